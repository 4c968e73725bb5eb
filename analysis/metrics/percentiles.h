// Percentiles exactly as numpy's default (method="linear"), of a sorted sample held as values or
// as runs of repeated values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace servesim {

// Percentile of sorted values by linear interpolation, as numpy's default (method="linear").
// REQUIRES: !sorted.empty(), 0 <= p <= 100, sorted is in ascending order.
double percentile(std::span<const double> sorted, double p);

// Where numpy's linear percentile p of a sorted sample of n values falls: between the values at
// ranks lo and hi (hi = lo or lo + 1), weight gamma on hi's. percentile() is
// percentile_interpolate(sorted[lo], sorted[hi], gamma); a sample held otherwise (counts of
// repeated values, as a bootstrap resample) needs only the values at those two ranks.
// REQUIRES: n >= 1, 0 <= p <= 100.
struct PercentileRanks {
  int64_t lo, hi;
  double gamma;
};
PercentileRanks percentile_ranks(int64_t n, double p);
// numpy's _lerp: a + (b - a) * gamma, computed from b's side when gamma >= 0.5.
double percentile_interpolate(double a, double b, double gamma);

// A value repeated count times: one run of a run-length encoded sample.
struct WeightedValue {
  double value;
  int64_t count;
};

// Percentile of the sample in which each value appears count times, exactly as percentile() of the
// expanded sample.
// REQUIRES: !runs.empty(), runs sorted by value, every count >= 1, 0 <= p <= 100.
double weighted_percentile(std::span<const WeightedValue> runs, double p);

// The value at ascending ranks of a sorted sample held as runs (value, count): walks forward,
// and from the start again when asked for a lower rank.
template <typename Run, typename Value, typename Count>
class RunCursor {
 public:
  RunCursor(std::span<const Run> runs, Value value, Count count) : runs_(runs), value_(value), count_(count) {}
  double operator()(int64_t rank) {
    if (rank < begin_) i_ = 0, begin_ = 0;
    while (begin_ + count_(runs_[i_]) <= rank) begin_ += count_(runs_[i_++]);
    return value_(runs_[i_]);
  }

 private:
  std::span<const Run> runs_;
  Value value_;
  Count count_;
  size_t i_ = 0;
  int64_t begin_ = 0;  // the rank of runs_[i_]'s first value
};

// numpy's percentile (linear) of a sorted sample of n values, the value at rank r being at(r).
template <typename At>
double percentile_of(int64_t n, double p, At& at) {
  const PercentileRanks v = percentile_ranks(n, p);
  const double a = at(v.lo);
  return percentile_interpolate(a, v.hi == v.lo ? a : at(v.hi), v.gamma);
}

}  // namespace servesim
