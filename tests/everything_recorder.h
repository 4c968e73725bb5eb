// A recorder of everything a run reports, for the suites that simulate one run two ways and
// compare (leap_test: leaping and stepping; sharded_test: split over threads and on one): every
// iteration (a leap's through the default on_decode_steps) and every settled request as a line.
// It shards (sim/sharded.h): a split run's groups each fill one, absorbed in group order.
#pragma once

#include <atomic>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "sim/recorder.h"

namespace servesim::testing {

class Everything : public Recorder {
 public:
  Everything() = default;
  // Sets *stop once `stop_after` requests settled, counted in *settled (shared with its shards).
  Everything(std::atomic<int64_t>* settled, int64_t stop_after, std::atomic<bool>* stop)
      : settled_(settled), stop_after_(stop_after), stop_(stop) {}

  bool accepts_grouped_decodes() const override { return true; }
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> /*items*/) override {
    iterations.push_back(it);
  }
  void on_request(const Request& r) override {
    std::ostringstream out;
    out << r.id() << " index " << r.index << " replica " << r.replica << " status " << static_cast<int>(r.status)
        << " arrival " << r.arrival << " due " << r.due << " scheduled " << r.scheduled << " first "
        << r.first_token << " last " << r.last_token << " finished " << r.finished << " output " << r.num_output
        << " preemptions " << r.preemptions << " cached " << r.cached_tokens << " cause "
        << static_cast<int>(r.cause);
    requests.push_back(out.str());
    if (settled_ != nullptr && ++*settled_ == stop_after_) stop_->store(true);
  }
  bool can_shard() const override { return true; }
  std::unique_ptr<Recorder> shard() override { return std::make_unique<Everything>(settled_, stop_after_, stop_); }
  void absorb(Recorder& shard) override {
    auto& s = dynamic_cast<Everything&>(shard);
    iterations.insert(iterations.end(), s.iterations.begin(), s.iterations.end());
    requests.insert(requests.end(), s.requests.begin(), s.requests.end());
  }

  std::vector<IterationRecord> iterations;
  std::vector<std::string> requests;

 private:
  std::atomic<int64_t>* settled_ = nullptr;
  int64_t stop_after_ = 0;
  std::atomic<bool>* stop_ = nullptr;
};

// Every field of an iteration's record, to compare.
inline auto iteration_key(const IterationRecord& r) {
  return std::tie(r.replica, r.step, r.start, r.duration, r.num_seqs, r.emitted, r.prefill_tokens,
                  r.decode_tokens, r.kv_blocks_used, r.kv_blocks_total, r.predicted, r.waiting, r.preempted);
}

}  // namespace servesim::testing
