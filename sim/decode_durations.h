// The durations of a run of decode iterations in closed form (Backend::decode_run): each next
// iteration is the same `count` one-token decodes one token further, so the contexts' sum grows by
// `count`, and the attention with it. Iteration j (from 0) lasts
//     rest + floor((per_context * (context_sum + j * count) + fixed) / 2^31)   ns,
// in exact integer arithmetic (the attention in fixed point of 2^-31 ns). A replica leaping over
// such a run and one running it iteration by iteration see the very same durations, and the
// recorders can take a run as one description.
#pragma once

#include <cstdint>

#include "sim/time.h"

namespace servesim {

struct DecodeDurations {
  static constexpr int kFractionBits = 31;
  static constexpr int64_t kOne = int64_t{1} << kFractionBits;  // 1 ns in fixed point

  Time rest = 0;            // ns: everything but the attention
  int64_t per_context = 0;  // attention per context token, 2^-31 ns; per_context * count < 2^62
  int64_t fixed = 0;        // attention of the decodes' own tokens plus kOne / 2 (rounding); < 2^62
  int64_t count = 0;        // decodes: the contexts' sum grows by count an iteration
  int64_t context_sum = 0;  // of iteration 0

  // The duration of an iteration whose decodes' contexts sum to `context`.
  Time at_context(int64_t context) const {
    return rest + static_cast<Time>((static_cast<Wide>(per_context) * context + fixed) >> kFractionBits);
  }
  // Iteration j's duration. REQUIRES: 0 <= j < 2^31.
  Time at(int64_t j) const { return at_context(context_sum + j * count); }
  // The same run from iteration `from` on: shifted(from).at(j) == at(from + j).
  DecodeDurations shifted(int64_t from) const {
    DecodeDurations d = *this;
    d.context_sum += from * count;
    return d;
  }
};

// Iterates a run's durations in order, by additions only.
class DecodeDurationCursor {
 public:
  explicit DecodeDurationCursor(const DecodeDurations& d) {
    const Wide x = static_cast<Wide>(d.per_context) * d.context_sum + d.fixed;
    next_ = d.rest + static_cast<Time>(x >> DecodeDurations::kFractionBits);
    fraction_ = static_cast<int64_t>(x & (DecodeDurations::kOne - 1));
    const int64_t step = d.per_context * d.count;
    whole_step_ = step >> DecodeDurations::kFractionBits;
    fraction_step_ = step & (DecodeDurations::kOne - 1);
  }
  // The next iteration's duration (the first call: iteration 0's).
  Time next() {
    const Time d = next_;
    fraction_ += fraction_step_;
    next_ += whole_step_ + (fraction_ >> DecodeDurations::kFractionBits);
    fraction_ &= DecodeDurations::kOne - 1;
    return d;
  }
  // The next n (>= 1) iterations' durations summed, as n calls of next(); *last gets the last one.
  // REQUIRES: the sum fits in 63 bits, and n < 2^31.
  Time sum(int64_t n, Time* last) {
    // Iteration i from here lasts next_ + i * whole_step_ + floor((fraction_ + i * fraction_step_)
    // / 2^31); the fractions stay below 2^31 * (n + 1), so they add up in 64 bits.
    int64_t x = fraction_, carries = 0;
    for (int64_t i = 0; i < n; ++i) {
      carries += x >> DecodeDurations::kFractionBits;
      x += fraction_step_;
    }
    const int64_t k = n - 1;
    *last = next_ + k * whole_step_ + ((x - fraction_step_) >> DecodeDurations::kFractionBits);
    const Time total = n * next_ + whole_step_ * (n * k / 2) + carries;
    next_ += n * whole_step_ + (x >> DecodeDurations::kFractionBits);
    fraction_ = x & (DecodeDurations::kOne - 1);
    return total;
  }

 private:
  Time next_ = 0;
  int64_t fraction_ = 0;
  int64_t whole_step_ = 0, fraction_step_ = 0;
};

}  // namespace servesim
