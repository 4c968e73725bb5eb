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
  // Adds a later bucket's iterations (of the same replica): what adding them one by one gives.
  void merge(const TimelineBucket& later);
  // The time-weighted mean of the KV blocks used.
  double kv_mean() const { return busy > 0 ? static_cast<double>(kv_ns) / static_cast<double>(busy) : 0; }
};

class TimelineBuckets {
 public:
  using Completed = std::vector<std::pair<int32_t, TimelineBucket>>;

  // REQUIRES: resolution > 0.
  explicit TimelineBuckets(double resolution);

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
  // The resolution in ns when it is a whole number of them (as a decimal number of seconds down to
  // the ns is): buckets are then found by integer division, exactly; else 0.
  Time resolution_ns_ = 0;
  std::vector<TimelineBucket> open_;  // per replica
};

// The timeline's default resolution (log_resolution unset, or "auto"), for a workload whose last
// request arrives `span` seconds (steps, with the unit backend) after the start: 1, or the first of
// 2, 5, 10, 15, 20 and 30 seconds, 1, 2, 5, 10, 15, 20 and 30 minutes, 1, 2, 3, 6 and 12 hours,
// then 1, 2, 5, 10... days, that keeps the span within kAutoTimelineBuckets buckets. A run of a
// few minutes keeps a bucket per second; a five-hour replay gets 10 s buckets, so that a replica's
// rows are at most about that many whatever the run's length (the report draws 1,000 points per
// line).
inline constexpr int64_t kAutoTimelineBuckets = 2000;
double auto_timeline_resolution(double span);

// Merges the rows of a timeline into buckets `factor` times as wide (a bucket i of the rows given
// goes into i / factor): the rows TimelineBuckets gives at that resolution. The writer uses it when
// the resolution became known after the simulation started bucketing (runner/run.cc: a trace read
// beside the run).
class TimelineCoarsener {
 public:
  // REQUIRES: factor >= 1.
  explicit TimelineCoarsener(int64_t factor) : factor_(factor) {}
  // Takes rows completed in order (each replica's in time order) and leaves in `rows` the wide
  // buckets they complete. The rows are narrow, or wide already (then merged as they are).
  void add(TimelineBuckets::Completed& rows, bool rows_wide = false);
  // The wide buckets in progress, appended to `done` (in replica order), at the end of the run.
  void finish(TimelineBuckets::Completed& done);

 private:
  int64_t factor_;
  std::vector<TimelineBucket> open_;  // per replica
  TimelineBuckets::Completed done_;   // add()'s, reused
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

inline void TimelineBucket::merge(const TimelineBucket& later) {
  iterations += later.iterations;
  busy += later.busy;
  prefill += later.prefill;
  decode += later.decode;
  emitted += later.emitted;
  preemptions += later.preemptions;
  seqs_max = std::max(seqs_max, later.seqs_max);
  waiting_max = std::max(waiting_max, later.waiting_max);
  kv_ns += later.kv_ns;
  kv_max = std::max(kv_max, later.kv_max);
  kv_total = later.kv_total;
}

}  // namespace servesim
