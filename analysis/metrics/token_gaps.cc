#include "analysis/metrics/token_gaps.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/metrics/radix_sort.h"

namespace servesim {

namespace {

using GapRun = TokenGaps::Run;

// The runs are merged when they have grown past twice those merged plus this.
constexpr size_t kMergeSlack = 4096;
// Up to this many runs (16 MiB), a merge leaves room for the runs that will come before the next
// one, and its scratch is kept for the next: no memory is faulted in again. Past it, memory comes
// first: the runs take what they hold, and the scratch is given back.
constexpr size_t kRoomyRuns = size_t{1} << 20;

// runs[0, sorted) holds one run per distinct gap, in order, and so does the rest (sorted by gap, at
// least); merges them into one run per gap.
void merge_sorted_runs(std::vector<GapRun>& runs, size_t sorted, std::vector<GapRun>& scratch) {
  scratch.clear();
  // Room for the runs added until the next merge (TokenGaps::add), so that they move no more.
  scratch.reserve(runs.size() <= kRoomyRuns ? 2 * runs.size() + kMergeSlack + 1 : runs.size());
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

// runs[0, sorted) holds one run per distinct gap, in order; sorts the rest and merges it in.
void merge_runs(std::vector<GapRun>& runs, size_t sorted, std::vector<GapRun>& scratch) {
  radix_sort(runs.data() + sorted, runs.size() - sorted, scratch,
             [](const GapRun& r) { return static_cast<uint64_t>(r.first); });
  merge_sorted_runs(runs, sorted, scratch);
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
  if (runs_.size() > 2 * merged_ + kMergeSlack) merge();
}

void TokenGaps::add_decode_run(const DecodeDurations& d, int64_t iterations, int64_t n) {
  if (iterations <= 0 || n == 0) return;
  const auto alike = [&d](const Table& t) {
    return t.kind.rest == d.rest && t.kind.per_context == d.per_context && t.kind.fixed == d.fixed &&
           t.kind.count == d.count;
  };
  auto table = std::find_if(tables_.begin(), tables_.end(), alike);
  // The progression's first sum and the one after its last, where its count stops.
  const int64_t first = d.context_sum, end = d.context_sum + iterations * d.count;
  const bool fits = d.count > 0 && first >= 0 && end < static_cast<int64_t>(kMaxTableEntries);
  if (fits && table == tables_.end() && tables_.size() < kMaxTables) {
    tables_.push_back({d, {}});
    table = tables_.end() - 1;
  }
  const auto need = static_cast<size_t>(end) + 1;
  if (!fits || table == tables_.end() ||
      (need > table->changes.size() && table_entries_ + need - table->changes.size() > kMaxTableEntries)) {
    DecodeDurationCursor gaps(d);
    for (int64_t j = 0; j < iterations; ++j) add(gaps.next(), n);
    return;
  }
  if (need > table->changes.size()) {
    table_entries_ += need - table->changes.size();
    table->changes.resize(need, 0);
  }
  table->changes[static_cast<size_t>(first)] += n;
  table->changes[static_cast<size_t>(end)] -= n;
}

void TokenGaps::fold_tables() {
  for (Table& t : tables_) {
    // Summed along each progression (stride count), the changes are the tokens at each sum.
    const auto stride = static_cast<size_t>(t.kind.count);
    std::vector<int64_t>& c = t.changes;
    for (size_t x = stride; x < c.size(); ++x) c[x] += c[x - stride];
    for (size_t x = 0; x < c.size(); ++x) {
      if (c[x] != 0) add(t.kind.at_context(static_cast<int64_t>(x)), c[x]);
    }
  }
  tables_.clear();
  table_entries_ = 0;
}

std::span<const TokenGaps::Run> TokenGaps::runs() {
  fold_tables();
  merge();
  return runs_;
}

void TokenGaps::absorb(TokenGaps& other) {
  // Both merged (the other's already, when its group ended), then one merge of the two in order;
  // the first's runs are taken whole.
  const std::span<const Run> theirs = other.runs();
  const size_t ours = runs().size();
  if (ours == 0) {
    runs_.swap(other.runs_);
    other.merged_ = 0;
    return settle_merge();
  }
  runs_.insert(runs_.end(), theirs.begin(), theirs.end());
  std::vector<Run>().swap(other.runs_);  // given back at once
  other.merged_ = 0;
  merge_sorted_runs(runs_, ours, merge_scratch_);
  settle_merge();
}

void TokenGaps::merge() {
  merge_runs(runs_, merged_, merge_scratch_);
  settle_merge();
}

void TokenGaps::settle_merge() {
  merged_ = runs_.size();
  // The runs' old buffer is the next merge's scratch, while small.
  if (merge_scratch_.capacity() > kRoomyRuns) std::vector<Run>().swap(merge_scratch_);
}

}  // namespace servesim
