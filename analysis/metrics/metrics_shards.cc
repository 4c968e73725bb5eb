// A sharded run's metrics (MetricsAccumulator, analysis/metrics/metrics.h): each group's shard sorts its
// samples when the group ends, and the run's accumulator absorbs the shards in turn.
#include <array>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "analysis/metrics/backlog.h"
#include "analysis/metrics/distributions.h"
#include "analysis/metrics/metrics.h"

namespace servesim {

bool MetricsAccumulator::in_sorted_parts() const {
  // The samples only grow: while the last part ends at their ends, nothing came since.
  return !sorted_parts_.empty() && sorted_parts_.back() == sample_sizes();
}

std::unique_ptr<Recorder> MetricsAccumulator::shard() {
  MetricsOptions options = options_;
  options.expected_requests = 0;  // a share of them: the samples grow as they come
  auto shard = std::make_unique<MetricsAccumulator>(std::move(options));
  shard->shard_ = true;
  return shard;
}

std::array<size_t, MetricsAccumulator::kSorted> MetricsAccumulator::sample_sizes() const {
  return {outstanding_.size(), ttft_.size(), tpot_.size(), e2el_.size(), queue_.size()};
}

void MetricsAccumulator::on_run_end(RunOutcome /*outcome*/, const std::string& /*error*/) {
  if (!shard_) return;  // the whole run's: compute() sorts, on as many threads as it may
  sort_intervals(outstanding_);
  for (std::vector<double>* sample : {&ttft_, &tpot_, &e2el_, &queue_}) sort_sample(*sample);
  sorted_parts_.assign(1, sample_sizes());
  (void)gaps_.runs();  // merged
}

void MetricsAccumulator::absorb(Recorder& recorder) {
  auto& s = dynamic_cast<MetricsAccumulator&>(recorder);
  completed_ += s.completed_;
  rejected_ += s.rejected_;
  capped_ += s.capped_;
  preemptions_ += s.preemptions_;
  iterations_ += s.iterations_;
  good_ += s.good_;
  for (int c = 0; c < kNumRejectCauses; ++c) rejected_by_cause_[c] += s.rejected_by_cause_[c];
  // Sorted parts stay so, after those already here (if any).
  const std::array<size_t, kSorted> before = sample_sizes();
  if (!(in_sorted_parts() || before == std::array<size_t, kSorted>{}) || !s.in_sorted_parts()) {
    sorted_parts_.clear();
  } else {
    for (std::array<size_t, kSorted> part : s.sorted_parts_) {
      for (size_t k = 0; k < kSorted; ++k) part[k] += before[k];
      sorted_parts_.push_back(part);
    }
  }
  // The first shard's samples are taken whole (no copy), the others' appended and given back at
  // once, one sample at a time, so that no more than one is held twice.
  const auto append = [](auto& to, auto& from) {
    if (to.empty()) {
      to.swap(from);
    } else {
      to.insert(to.end(), from.begin(), from.end());
    }
    std::remove_reference_t<decltype(from)>().swap(from);
  };
  append(outstanding_, s.outstanding_);
  append(ttft_, s.ttft_);
  append(tpot_, s.tpot_);
  append(e2el_, s.e2el_);
  append(queue_, s.queue_);
  append(transfer_wait_, s.transfer_wait_);
  append(transfer_time_, s.transfer_time_);
  input_tokens_ += s.input_tokens_;
  output_tokens_ += s.output_tokens_;
  cached_tokens_ += s.cached_tokens_;
  cache_hits_ += s.cache_hits_;
  cacheable_ += s.cacheable_;
  first_arrival_ = std::min(first_arrival_, s.first_arrival_);
  last_finished_ = std::max(last_finished_, s.last_finished_);
  gaps_.absorb(s.gaps_);
  emitting_ns_ += s.emitting_ns_;
  // Per replica: each replica's iterations are one group's.
  if (kv_.size() < s.kv_.size()) kv_.resize(s.kv_.size());
  for (size_t r = 0; r < s.kv_.size(); ++r) {
    kv_[r].used_ns += s.kv_[r].used_ns;
    kv_[r].ns += s.kv_[r].ns;
    if (s.kv_[r].total != 0) kv_[r].total = s.kv_[r].total;
  }
  kv_limited_ = kv_limited_ || s.kv_limited_;
  if (busy_.size() < s.busy_.size()) busy_.resize(s.busy_.size());
  for (size_t r = 0; r < s.busy_.size(); ++r) busy_[r] += s.busy_[r];
  transfer_bytes_ += s.transfer_bytes_;
}

}  // namespace servesim
