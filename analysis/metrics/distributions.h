// A sample's lines of metrics: its mean, standard deviation and percentiles (vLLM's names:
// ttft_mean, ttft_std, ttft_p99, ...) and, when asked, its points on the quantile grid. The
// samples are sorted in place; means are exact (independent of the order the values came in).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "analysis/metrics/metrics.h"
#include "analysis/metrics/token_gaps.h"

namespace servesim {

// The mean of values (non-empty, each below 2^63), summed exactly in fixed point with 64 fractional
// bits, so that it does not depend on their order.
double exact_mean(std::span<const double> values);

// Sorts a sample in place, ascending (-0 before +0; no NaN).
void sort_sample(std::vector<double>& values);
// Whether a comes before b in sort_sample's order.
bool sample_before(double a, double b);

// Appends name_mean, name_std (numpy's, ddof 0) and name_pX for each of `percentiles` (ascending)
// of values, which are sorted in place unless `sorted` says they are already (sort_sample's
// order), and with `quantiles` each point of the quantile grid; nothing when values is empty.
void add_distribution(std::vector<Metric>& out, std::vector<QuantilePoint>* quantiles,
                      std::string_view name, std::vector<double>& values, std::span<const double> percentiles,
                      bool sorted = false);

// The same for the inter-token gaps ("itl"), given as runs of (gap in ns, count), one per distinct
// gap, ascending.
void add_gap_distribution(std::vector<Metric>& out, std::vector<QuantilePoint>* quantiles,
                          std::span<const TokenGaps::Run> gaps, std::span<const double> percentiles);

// Distributions' lines computed apart (on another thread), appended to the run's in order later.
class DistributionLines {
 public:
  explicit DistributionLines(bool with_quantiles) : with_quantiles_(with_quantiles) {}
  std::vector<Metric>& metrics() { return metrics_; }
  std::vector<QuantilePoint>* quantiles() { return with_quantiles_ ? &quantiles_ : nullptr; }
  void append_to(std::vector<Metric>& out, std::vector<QuantilePoint>* quantiles) const {
    out.insert(out.end(), metrics_.begin(), metrics_.end());
    if (quantiles != nullptr) quantiles->insert(quantiles->end(), quantiles_.begin(), quantiles_.end());
  }

 private:
  bool with_quantiles_;
  std::vector<Metric> metrics_;
  std::vector<QuantilePoint> quantiles_;
};

}  // namespace servesim
