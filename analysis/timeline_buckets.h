// A run's timeline (the timeline table's rows): per replica and time bucket of `resolution`
// seconds, what the iterations starting in it did. A replica's iterations come in time order, so
// each replica has one bucket in progress; it is complete when an iteration of that replica starts
// past its end, and complete buckets are handed out as (replica, bucket) in the order they
// completed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/recorder.h"
#include "sim/time.h"

namespace servesim {

struct TimelineBucket {
  int64_t index = -1;  // the bucket's number: it starts at index x resolution seconds; -1: none yet
  Time end = 0;        // the first time of the next bucket
  int64_t iterations = 0, prefill = 0, decode = 0, emitted = 0, preemptions = 0;
  int64_t seqs_max = 0, waiting_max = 0, kv_max = 0, kv_total = -1;
  Time busy = 0;   // ns
  Wide kv_ns = 0;  // blocks used x ns
  // Adds `n` iterations that together last `busy` ns, with the same seqs, waiting and KV use;
  // prefill, decode, emitted and preempted are their sums.
  void add(int64_t n, Time busy, int64_t prefill, int64_t decode, int64_t emitted, int64_t preempted,
           int64_t seqs, int64_t waiting, int64_t kv_used, int64_t kv_total);
  // The time-weighted mean of the KV blocks used.
  double kv_mean() const { return busy > 0 ? static_cast<double>(kv_ns) / static_cast<double>(busy) : 0; }
};

class TimelineBuckets {
 public:
  using Completed = std::vector<std::pair<int32_t, TimelineBucket>>;

  // REQUIRES: resolution > 0.
  explicit TimelineBuckets(double resolution) : resolution_(resolution) {}

  double resolution() const { return resolution_; }
  // Adds one iteration to its replica's bucket; the bucket before it, if now complete, goes to
  // `done`.
  void add_iteration(const IterationRecord& it, Completed& done);
  // A leap's iterations, as add_iteration would take them one by one: a range of them (the same KV
  // use and queue) adds to each bucket it reaches once.
  void add_decode_steps(const DecodeSteps& steps, Completed& done);
  // The buckets in progress, to `done` (in replica order), at the end of the run.
  void finish(Completed& done);

 private:
  int64_t index_of(Time t) const;
  Time first_time_of(int64_t index) const;  // the least t with index_of(t) >= index
  // The bucket of an iteration of `replica` starting at `start`, moving the one in progress to
  // `done` when a new one starts.
  TimelineBucket& bucket_for(int32_t replica, Time start, Completed& done);

  double resolution_;
  std::vector<TimelineBucket> open_;  // per replica
};

// Inline: a leap adds each of its ranges.
inline void TimelineBucket::add(int64_t n, Time busy_ns, int64_t prefill_tokens, int64_t decode_tokens,
                                int64_t emitted_tokens, int64_t preempted, int64_t seqs, int64_t waiting,
                                int64_t kv_used, int64_t kv_blocks) {
  iterations += n;
  busy += busy_ns;
  prefill += prefill_tokens;
  decode += decode_tokens;
  emitted += emitted_tokens;
  preemptions += preempted;
  seqs_max = std::max(seqs_max, seqs);
  waiting_max = std::max(waiting_max, waiting);
  kv_ns += static_cast<Wide>(kv_used) * busy_ns;
  kv_max = std::max(kv_max, kv_used);
  kv_total = kv_blocks;
}

}  // namespace servesim
