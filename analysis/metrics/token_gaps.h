// A run's inter-token gaps, exactly, in little memory: (gap, count) runs, appended as they come and
// merged (radix sort, then a merge with the runs already merged) whenever they have doubled, so
// that they hold about one run per distinct gap.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sim/decode_durations.h"
#include "sim/time.h"

namespace servesim {

class TokenGaps {
 public:
  using Run = std::pair<Time, int64_t>;  // a gap (>= 0) and how many tokens came after it

  void add(Time gap, int64_t n);
  // add(d.at(j), n) for j in [0, iterations), in O(1) mostly: a run's gaps are a function of the
  // decodes' contexts' sum, which grows by d.count an iteration, and the runs priced alike (the
  // same rest, attention and count: one table per kind of batch) share one table of counts by
  // that sum, in which a run adds n to an arithmetic progression as two entries of a difference
  // table. runs() turns the tables into gaps. Past kMaxTables tables or kMaxTableEntries entries in
  // all, the gaps are added one by one.
  void add_decode_run(const DecodeDurations& d, int64_t iterations, int64_t n);
  // The runs sorted by gap, one per distinct gap (merging what came since the last time).
  std::span<const Run> runs();
  // Adds every gap of `other` (a sharded run's group's, which is left without them), merging both
  // first (runs()): a linear merge, which costs little when the other merged its own runs on its
  // group's thread.
  void absorb(TokenGaps& other);

  static constexpr size_t kMaxTables = 64;
  static constexpr size_t kMaxTableEntries = size_t{1} << 19;  // 4 MiB

 private:
  void merge();
  void settle_merge();  // after a merge: everything is merged; the scratch is kept while small
  void fold_tables();  // the tables' counts into runs_

  std::vector<Run> runs_;
  size_t merged_ = 0;  // runs_[0, merged_) are sorted, one per gap
  struct Table {
    DecodeDurations kind;          // its rest, per_context, fixed and count (context_sum unused)
    std::vector<int64_t> changes;  // by the contexts' sum: tokens starting there minus ending there
  };
  std::vector<Table> tables_;
  size_t table_entries_ = 0;
  std::vector<Run> merge_scratch_;  // kept while small, so that a merge faults in no new memory
};

}  // namespace servesim
