// The durations of a run of decode iterations in closed form (Backend::decode_run): each next
// iteration is the same one-token decodes one token further, and its attention grows by the same
// amount, so iteration j (from 0) lasts
//     base + floor((step * j + offset) / 2^31)   ns,
// in exact integer arithmetic. A replica leaping over such a run and one running it iteration by
// iteration see the very same durations, and the recorders can take a run as one description.
#pragma once

#include <cstdint>
#include <span>

#include "sim/time.h"

namespace servesim {

struct DecodeDurations {
  static constexpr int kFractionBits = 31;
  static constexpr int64_t kOne = int64_t{1} << kFractionBits;  // 1 ns in fixed point

  Time base = 0;      // ns
  int64_t step = 0;   // growth per iteration, in 2^-31 ns; 0 <= step < 2^62
  int64_t offset = 0; // in 2^-31 ns; 0 <= offset < kOne

  // Iteration j's duration. REQUIRES: 0 <= j < 2^31.
  Time at(int64_t j) const {
    __extension__ using Wide = __int128;
    return base + static_cast<Time>((static_cast<Wide>(step) * j + offset) >> kFractionBits);
  }
  // The same run from iteration `from` on: shifted(from).at(j) == at(from + j).
  DecodeDurations shifted(int64_t from) const {
    __extension__ using Wide = __int128;
    const Wide x = static_cast<Wide>(step) * from + offset;
    return {base + static_cast<Time>(x >> kFractionBits), step, static_cast<int64_t>(x & (kOne - 1))};
  }
};

// Iterates a run's durations in order, by additions only.
class DecodeDurationCursor {
 public:
  explicit DecodeDurationCursor(const DecodeDurations& d)
      : next_(d.at(0)), fraction_(d.offset), whole_step_(d.step >> DecodeDurations::kFractionBits),
        fraction_step_(d.step & (DecodeDurations::kOne - 1)) {}
  // The next iteration's duration (the first call: iteration 0's).
  Time next() {
    const Time d = next_;
    fraction_ += fraction_step_;
    next_ += whole_step_ + (fraction_ >> DecodeDurations::kFractionBits);
    fraction_ &= DecodeDurations::kOne - 1;
    return d;
  }
  // Fills `out` with the next out.size() durations.
  void fill(std::span<Time> out) {
    for (Time& t : out) t = next();
  }

 private:
  Time next_;
  int64_t fraction_;
  int64_t whole_step_, fraction_step_;
};

}  // namespace servesim
