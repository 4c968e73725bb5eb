#include "analysis/metrics/percentiles.h"

#include <cassert>
#include <cmath>

namespace servesim {

double percentile_interpolate(double a, double b, double gamma) {
  const double diff = b - a;
  return gamma >= 0.5 ? b - diff * (1 - gamma) : a + diff * gamma;
}

PercentileRanks percentile_ranks(int64_t n, double p) {
  // numpy's virtual index for method="linear": (n - 1) * p / 100, split into floor and fraction.
  const double index = static_cast<double>(n - 1) * (p / 100.0);
  const double lo = std::floor(index);
  if (lo >= static_cast<double>(n - 1)) return {n - 1, n - 1, index - lo};
  if (lo < 0) return {0, 0, 0};
  const auto lo_i = static_cast<int64_t>(lo);
  return {lo_i, lo_i + 1, index - lo};
}

double percentile(std::span<const double> sorted, double p) {
  assert(!sorted.empty() && p >= 0 && p <= 100);
  const PercentileRanks v = percentile_ranks(static_cast<int64_t>(sorted.size()), p);
  return percentile_interpolate(sorted[v.lo], sorted[v.hi], v.gamma);
}

double weighted_percentile(std::span<const WeightedValue> runs, double p) {
  assert(!runs.empty() && p >= 0 && p <= 100);
  int64_t n = 0;
  for (const WeightedValue& r : runs) n += r.count;
  RunCursor at(runs, [](const WeightedValue& r) { return r.value; }, [](const WeightedValue& r) { return r.count; });
  return percentile_of(n, p, at);
}

}  // namespace servesim
