// A recorder of everything a run reports, for the suites that simulate one run two ways and
// compare (leap_test: leaping and stepping; sharded_test: split over threads and on one): every
// iteration (a leap's through the default on_decode_steps) and every settled request as a line.
// It shards (sim/sharded.h): a split run's groups each fill one, absorbed in group order.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

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

// Every field of an iteration's record, to compare (with_groups: the decode group's too, which a
// run stepping every iteration lists as items instead).
inline auto iteration_key(const IterationRecord& r) {
  return std::tie(r.replica, r.step, r.start, r.duration, r.num_seqs, r.emitted, r.prefill_tokens,
                  r.decode_tokens, r.kv_blocks_used, r.kv_blocks_total, r.predicted, r.waiting, r.preempted);
}

// Puts what an Everything gathered in an order to compare: iterations by (replica, step), the
// requests' lines sorted.
inline void sort_report(std::vector<IterationRecord>& iterations, std::vector<std::string>& requests) {
  std::sort(iterations.begin(), iterations.end(),
            [](const auto& a, const auto& b) { return std::tie(a.replica, a.step) < std::tie(b.replica, b.step); });
  std::sort(requests.begin(), requests.end());
}

// Fails, at the first difference, unless two runs' outcomes (each with sorted `requests` and
// `iterations`, and `metrics`) are the same.
template <typename Outcome>
void expect_same_report(const Outcome& got, const Outcome& want, bool with_groups) {
  ASSERT_EQ(got.requests, want.requests);
  ASSERT_EQ(got.iterations.size(), want.iterations.size());
  for (size_t i = 0; i < want.iterations.size(); ++i) {
    const IterationRecord& a = got.iterations[i];
    const IterationRecord& b = want.iterations[i];
    ASSERT_TRUE(iteration_key(a) == iteration_key(b)) << "replica " << b.replica << " step " << b.step;
    if (with_groups) {
      ASSERT_TRUE(a.grouped == b.grouped && a.group_gap == b.group_gap) << "replica " << b.replica << " step " << b.step;
    }
  }
  ASSERT_EQ(got.metrics.size(), want.metrics.size());
  for (size_t i = 0; i < want.metrics.size(); ++i) {
    EXPECT_EQ(got.metrics[i].name, want.metrics[i].name);
    EXPECT_EQ(got.metrics[i].value, want.metrics[i].value) << want.metrics[i].name;
  }
}

}  // namespace servesim::testing
