// A run's inter-token gaps, exactly, in little memory: (gap, count) runs, appended as they come and
// merged (radix sort, then a merge with the runs already merged) whenever they have doubled, so
// that they hold about one run per distinct gap.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sim/time.h"

namespace servesim {

class TokenGaps {
 public:
  using Run = std::pair<Time, int64_t>;  // a gap (>= 0) and how many tokens came after it

  void add(Time gap, int64_t n);
  // add(gap, n) for each gap, faster when they ascend (a leap's steps): a gap seen before is found
  // by galloping from where the last one was.
  void add_each(std::span<const Time> gaps, int64_t n);
  // The runs sorted by gap, one per distinct gap (merging what came since the last time).
  std::span<const Run> runs();

 private:
  void merge();

  std::vector<Run> runs_;
  size_t merged_ = 0;  // runs_[0, merged_) are sorted, one per gap
};

}  // namespace servesim
