#include "analysis/calibration/ks_test.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

namespace servesim {
namespace {

int64_t total(std::span<const WeightedValue> s) {
  int64_t n = 0;
  for (const WeightedValue& v : s) n += v.count;
  return n;
}

}  // namespace

double kolmogorov_sf(double x) {
  if (x <= 0) return 1.0;
  if (x < 1.18) {
    // For small x the alternating series converges slowly; use Jacobi's form of the CDF:
    // P(K <= x) = sqrt(2 pi) / x * sum_{k >= 1} exp(-(2k - 1)^2 pi^2 / (8 x^2)).
    const double f = -std::numbers::pi * std::numbers::pi / (8 * x * x);
    double cdf = 0;
    for (int k = 1; k <= 20; ++k) cdf += std::exp(f * (2 * k - 1) * (2 * k - 1));
    return std::clamp(1.0 - std::sqrt(2 * std::numbers::pi) / x * cdf, 0.0, 1.0);
  }
  // P(K > x) = 2 sum_{k >= 1} (-1)^(k-1) exp(-2 k^2 x^2): its terms fall fast for x >= 1.18.
  double sf = 0;
  for (int k = 1; k <= 100; ++k) {
    const double term = std::exp(-2.0 * k * k * x * x);
    sf += (k % 2 == 1 ? 2 : -2) * term;
    if (term < 1e-300) break;
  }
  return std::clamp(sf, 0.0, 1.0);
}

KsResult ks_two_sample(std::span<const WeightedValue> a, std::span<const WeightedValue> b) {
  assert(!a.empty() && !b.empty());
  const double n = static_cast<double>(total(a)), m = static_cast<double>(total(b));
  int64_t seen_a = 0, seen_b = 0;
  double d = 0;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    // The next value of the merged samples; every occurrence of it, in both, is passed before the
    // CDFs are compared.
    const double x = j == b.size() || (i < a.size() && a[i].value <= b[j].value) ? a[i].value : b[j].value;
    while (i < a.size() && a[i].value == x) seen_a += a[i++].count;
    while (j < b.size() && b[j].value == x) seen_b += b[j++].count;
    d = std::max(d, std::abs(static_cast<double>(seen_a) / n - static_cast<double>(seen_b) / m));
  }
  KsResult r;
  r.d = d;
  r.n_effective = n * m / (n + m);
  r.p_value = kolmogorov_sf(std::sqrt(r.n_effective) * d);
  return r;
}

}  // namespace servesim
