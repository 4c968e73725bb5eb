// A sample's lines of metrics (analysis/metrics/distributions.h).
#include "analysis/metrics/distributions.h"

#include <bit>
#include <cmath>
#include <string>

#include "analysis/metrics/percentiles.h"
#include "analysis/metrics/radix_sort.h"

namespace servesim {
namespace {

// Sums of non-negative values that do not depend on the order they come in (replicas report at
// their own pace, and a leap reports its iterations together): exact integer sums of nanoseconds,
// or of values in fixed point with 64 fractional bits (below 1e-19 s, 1e7 values of up to the
// 1e9 s horizon fit).

// max(v, 0) times 2^64, truncated: static_cast<Wide>(std::ldexp(std::max(v, 0.0), 64)) from the
// double's bits, without a library call per value. REQUIRES: v < 2^63 (far past the horizon).
Wide fixed_64(double v) {
  if (!(v > 0)) return 0;
  const auto bits = std::bit_cast<uint64_t>(v);
  const auto biased = static_cast<int>(bits >> 52);  // the sign bit is 0
  if (biased == 0) return 0;  // subnormal: times 2^64, far below 1
  const uint64_t mantissa = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int shift = biased - 1075 + 64;  // v = mantissa * 2^(biased - 1075)
  if (shift >= 0) return static_cast<Wide>(mantissa) << shift;
  return shift > -64 ? static_cast<Wide>(mantissa >> -shift) : 0;
}

// Appends name_mean, name_std (numpy's, ddof 0) and each name_pX of a sorted sample of n values
// (at(r): the value at rank r; sum_sq_dev(mean): the sum of squared deviations), and the
// quantile grid's points when asked.
template <typename At, typename SumSqDev>
void add_sorted_distribution(std::vector<Metric>& out, std::vector<QuantilePoint>* quantiles,
                             std::string_view name, int64_t n, double mean, At at, SumSqDev sum_sq_dev,
                             std::span<const double> percentiles) {
  const std::string base(name);
  out.push_back({base + "_mean", mean});
  out.push_back({base + "_std", std::sqrt(sum_sq_dev(mean) / static_cast<double>(n))});
  for (double p : percentiles) out.push_back({base + percentile_suffix(p), percentile_of(n, p, at)});
  if (quantiles == nullptr) return;
  for (double q : quantile_grid()) quantiles->push_back({base, q, percentile_of(n, 100 * q, at)});
}

}  // namespace

double exact_mean(std::span<const double> values) {
  Wide sum = 0;
  for (double v : values) sum += fixed_64(v);
  return std::ldexp(static_cast<double>(sum), -64) / static_cast<double>(values.size());
}

void sort_sample(std::vector<double>& values) {
  std::vector<double> scratch;
  radix_sort(values.data(), values.size(), scratch, [](double v) { return double_order_key(v); });  // inlined
}

bool sample_before(double a, double b) { return double_order_key(a) < double_order_key(b); }

// add_sorted_distribution of values (sorted in place unless they are), unless values is empty.
void add_distribution(std::vector<Metric>& out, std::vector<QuantilePoint>* quantiles,
                      std::string_view name, std::vector<double>& values, std::span<const double> percentiles,
                      bool sorted) {
  if (values.empty()) return;
  if (!sorted) sort_sample(values);
  auto at = [&](int64_t r) { return values[static_cast<size_t>(r)]; };
  auto sum_sq_dev = [&](double mean) {
    double s = 0;
    for (double v : values) s += (v - mean) * (v - mean);
    return s;
  };
  add_sorted_distribution(out, quantiles, name, static_cast<int64_t>(values.size()), exact_mean(values), at,
                          sum_sq_dev, percentiles);
}

// add_sorted_distribution of the inter-token gaps, given as runs of (gap in ns, count) ascending,
// one per distinct gap, unless there are none.
void add_gap_distribution(std::vector<Metric>& out, std::vector<QuantilePoint>* quantiles,
                          std::span<const TokenGaps::Run> gaps, std::span<const double> percentiles) {
  Wide gap_sum = 0;  // ns
  int64_t gap_count = 0;
  for (const auto& [gap, n] : gaps) {
    gap_sum += static_cast<Wide>(gap) * n;
    gap_count += n;
  }
  if (gap_count == 0) return;
  RunCursor at(gaps, [](const TokenGaps::Run& r) { return to_seconds(r.first); },
               [](const TokenGaps::Run& r) { return r.second; });
  auto sum_sq_dev = [&](double mean) {
    double s = 0;
    for (const auto& [gap, n] : gaps) s += static_cast<double>(n) * (to_seconds(gap) - mean) * (to_seconds(gap) - mean);
    return s;
  };
  add_sorted_distribution(out, quantiles, "itl", gap_count,
                          static_cast<double>(gap_sum) / 1e9 / static_cast<double>(gap_count), at, sum_sq_dev,
                          percentiles);
}

}  // namespace servesim
