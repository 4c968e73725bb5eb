#include "analysis/token_gaps.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/radix_sort.h"

namespace servesim {

namespace {

using GapRun = TokenGaps::Run;

// runs[0, sorted) holds one run per distinct gap, in order; sorts the rest and merges it in.
void merge_runs(std::vector<GapRun>& runs, size_t sorted, std::vector<GapRun>& scratch) {
  radix_sort(runs.data() + sorted, runs.size() - sorted, scratch,
             [](const GapRun& r) { return static_cast<uint64_t>(r.first); });
  scratch.clear();
  scratch.reserve(runs.size());
  size_t i = 0, j = sorted;
  while (i < sorted || j < runs.size()) {
    const GapRun& next = j == runs.size() || (i < sorted && runs[i].first <= runs[j].first) ? runs[i++] : runs[j++];
    if (!scratch.empty() && scratch.back().first == next.first) {
      scratch.back().second += next.second;
    } else {
      scratch.push_back(next);
    }
  }
  runs.swap(scratch);
}

}  // namespace

void TokenGaps::add(Time gap, int64_t n) {
  // Most emitting items of an iteration share one gap (its duration): extend the last run.
  if (!runs_.empty() && runs_.back().first == gap) {
    runs_.back().second += n;
  } else {
    runs_.emplace_back(gap, n);
  }
  // One run per distinct gap, amortized: merge when the runs doubled since the last time.
  if (runs_.size() > 2 * merged_ + 4096) merge();
}

void TokenGaps::add_each(std::span<const Time> gaps, int64_t n) {
  // A leap's gaps ascend, mostly: find each in the merged runs by galloping on from where the last
  // one was (probes 1, 2, 4, ... ahead, then bisection between the last two).
  size_t at = 0;  // no merged run before it is below the last gap
  Time last = -1;
  for (const Time gap : gaps) {
    if (gap < last) at = 0;  // not ascending here
    last = gap;
    size_t lo = at, step = 1;
    while (lo + step < merged_ && runs_[lo + step].first < gap) {
      lo += step;
      step *= 2;
    }
    // runs_[lo] may be below gap; runs_[min(lo + step, merged_)] is not (or is the end).
    const auto first = runs_.begin() + static_cast<std::ptrdiff_t>(lo);
    const auto limit = runs_.begin() + static_cast<std::ptrdiff_t>(std::min(lo + step, merged_));
    at = static_cast<size_t>(std::partition_point(first, limit, [gap](const Run& r) { return r.first < gap; }) -
                             runs_.begin());
    if (at < merged_ && runs_[at].first == gap) {
      runs_[at].second += n;
      continue;
    }
    const size_t before = merged_;
    add(gap, n);
    if (merged_ != before) at = 0;  // merged: the runs moved
  }
}

std::span<const TokenGaps::Run> TokenGaps::runs() {
  merge();
  return runs_;
}

void TokenGaps::merge() {
  std::vector<GapRun> scratch;
  merge_runs(runs_, merged_, scratch);
  merged_ = runs_.size();
}

}  // namespace servesim
