// The two-sample Kolmogorov-Smirnov test: how far apart two samples' distributions are, and how
// likely a distance that large is when both come from one distribution.
//
// D = sup_x |F_a(x) - F_b(x)|, F the empirical CDFs (the share of a sample <= x), taken exactly
// over the merged sorted samples: the sup is reached at one of the samples' values, and values
// equal across the samples (ties) are passed together before the CDFs are compared, so tied values
// never open a gap that is not there. Samples are run-length encoded (WeightedValue: a value and
// how often it occurs), so a run's millions of inter-token gaps need not be expanded.
//
// The p-value is asymptotic: P(K > sqrt(n_e) D), K Kolmogorov's distribution and n_e = n m / (n + m)
// the effective size (scipy's ks_2samp(..., method="asymp") before scipy 1.5, kstwobign.sf). It is
// accurate for n_e of about 40 and more, and conservative below.
#pragma once

#include <cstdint>
#include <span>

#include "analysis/metrics/metrics.h"

namespace servesim {

struct KsResult {
  double d = 0;            // the distance, in [0, 1]
  double n_effective = 0;  // n m / (n + m)
  double p_value = 1;      // P(K > sqrt(n_effective) d)
};

// The test of two samples. REQUIRES: each sorted by value (equal values may repeat), counts >= 1,
// neither empty.
KsResult ks_two_sample(std::span<const WeightedValue> a, std::span<const WeightedValue> b);

// P(K > x) of Kolmogorov's limiting distribution (1 for x <= 0).
double kolmogorov_sf(double x);

}  // namespace servesim
