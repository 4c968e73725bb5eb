#include "analysis/timeline_buckets.h"

#include <algorithm>
#include <cmath>

namespace servesim {

void TimelineBucket::add(int64_t n, Time busy_ns, int64_t prefill_tokens, int64_t decode_tokens,
                         int64_t emitted_tokens, int64_t preempted, int64_t seqs, int64_t waiting,
                         Wide kv_blocks_ns, int64_t kv_blocks_max, int64_t kv_blocks) {
  iterations += n;
  busy += busy_ns;
  prefill += prefill_tokens;
  decode += decode_tokens;
  emitted += emitted_tokens;
  preemptions += preempted;
  seqs_max = std::max(seqs_max, seqs);
  waiting_max = std::max(waiting_max, waiting);
  kv_ns += kv_blocks_ns;
  kv_max = std::max(kv_max, kv_blocks_max);
  kv_total = kv_blocks;
}

void TimelineBuckets::add_iteration(const IterationRecord& it, Completed& done) {
  bucket_for(it.replica, it.start, done)
      .add(1, it.duration, it.prefill_tokens, it.decode_tokens, it.emitted, it.preempted, it.num_seqs,
           it.waiting, static_cast<Wide>(it.kv_blocks_used) * it.duration, it.kv_blocks_used,
           it.kv_blocks_total);
}

void TimelineBuckets::add_decode_steps(const DecodeSteps& steps, Completed& done) {
  // What the leap adds to the bucket *b, summed over its ranges in *b and added at once: every
  // iteration has the same sequences, each decoding and emitting one token.
  struct Part {
    int64_t n = 0;
    Time busy = 0;
    Wide kv_ns = 0;
    int64_t waiting_max = 0, kv_max = 0;
  } part;
  Time at = steps.start;
  TimelineBucket* b = &bucket_for(steps.replica, at, done);
  const auto take = [&](int64_t n, Time busy, const DecodeSteps::Range& range) {
    part.n += n;
    part.busy += busy;
    part.kv_ns += static_cast<Wide>(range.kv_blocks_used) * busy;
    part.waiting_max = std::max<int64_t>(part.waiting_max, range.waiting);
    part.kv_max = std::max(part.kv_max, range.kv_blocks_used);
  };
  const auto flush = [&] {  // into *b
    if (part.n == 0) return;
    const int64_t tokens = part.n * steps.num_seqs;
    b->add(part.n, part.busy, 0, tokens, tokens, 0, steps.num_seqs, part.waiting_max, part.kv_ns,
           part.kv_max, steps.kv_blocks_total);
    part = Part{};
  };
  int64_t j = 0;
  for (const DecodeSteps::Range& range : steps.ranges) {
    if (at >= b->end) {
      flush();
      b = &bucket_for(steps.replica, at, done);
    }
    if (at + range.busy < b->end) {  // every iteration of the range starts in *b
      take(range.end - j, range.busy, range);
      at += range.busy;
      j = range.end;
      continue;
    }
    DecodeDurationCursor duration(steps.durations.shifted(j));
    int64_t n = 0;  // of this range's iterations, in *b
    Time busy = 0;
    for (; j < range.end; ++j) {
      const Time d = duration.next();
      if (at >= b->end) {  // a new bucket
        if (n > 0) take(n, busy, range);
        flush();
        n = 0;
        busy = 0;
        b = &bucket_for(steps.replica, at, done);
      }
      ++n;
      busy += d;
      at += d;
    }
    if (n > 0) take(n, busy, range);
  }
  flush();
}

void TimelineBuckets::finish(Completed& done) {
  for (size_t r = 0; r < open_.size(); ++r) {
    if (open_[r].index >= 0) done.emplace_back(static_cast<int32_t>(r), open_[r]);
    open_[r] = TimelineBucket{};
  }
}

int64_t TimelineBuckets::index_of(Time t) const {
  return static_cast<int64_t>(std::floor(to_seconds(t) / resolution_));
}

Time TimelineBuckets::first_time_of(int64_t index) const {
  // index_of only grows with t: step from an estimate to the exact boundary.
  auto t = static_cast<Time>(std::ceil(static_cast<double>(index) * resolution_ * 1e9));
  while (t > 0 && index_of(t - 1) >= index) --t;
  while (index_of(t) < index) ++t;
  return t;
}

TimelineBucket& TimelineBuckets::bucket_for(int32_t replica, Time start, Completed& done) {
  const auto r = static_cast<size_t>(replica);
  if (open_.size() <= r) open_.resize(r + 1);
  TimelineBucket& b = open_[r];
  // A replica's iterations come in time order: a new bucket starts only at b.end.
  if (b.index < 0 || start >= b.end) {
    const int64_t index = index_of(start);
    if (index != b.index) {
      if (b.index >= 0) done.emplace_back(replica, b);
      b = TimelineBucket{};
      b.index = index;
      b.end = first_time_of(index + 1);
    }
  }
  return b;
}

}  // namespace servesim
