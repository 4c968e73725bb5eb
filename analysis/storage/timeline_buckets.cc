#include "analysis/storage/timeline_buckets.h"

#include <array>
#include <cmath>

namespace servesim {

TimelineBuckets::TimelineBuckets(double resolution) : resolution_(resolution) {
  const double ns = resolution * 1e9;
  const double whole = std::round(ns);
  if (whole >= 1 && whole <= 1e18 && std::abs(ns - whole) <= 1e-12 * whole) resolution_ns_ = static_cast<Time>(whole);
}

void TimelineBuckets::add_iteration(const IterationRecord& it, Completed& done) {
  bucket_for(it.replica, it.start, done)
      .add(1, it.duration, it.prefill_tokens, it.decode_tokens, it.emitted, it.preempted, it.num_seqs,
           it.waiting, it.kv_blocks_used, it.kv_blocks_total);
}

void TimelineBuckets::add_decode_steps(const DecodeSteps& steps, Completed& done) {
  Time at = steps.start;
  TimelineBucket* b = &bucket_for(steps.replica, at, done);
  int64_t j = 0;
  for (const DecodeSteps::Range& range : steps.ranges) {
    // n of the range's iterations, lasting `busy` in all, to *b: each decodes and emits a token
    // per sequence.
    const auto add = [&](int64_t n, Time busy) {
      b->add(n, busy, 0, n * steps.num_seqs, n * steps.num_seqs, 0, steps.num_seqs, range.waiting,
             range.kv_blocks_used, steps.kv_blocks_total);
    };
    if (at >= b->end) b = &bucket_for(steps.replica, at, done);
    if (at + range.busy < b->end) {  // every iteration of the range starts in *b
      add(range.end - j, range.busy);
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
        if (n > 0) add(n, busy);
        n = 0;
        busy = 0;
        b = &bucket_for(steps.replica, at, done);
      }
      ++n;
      busy += d;
      at += d;
    }
    if (n > 0) add(n, busy);
  }
}

void TimelineBuckets::finish(Completed& done) {
  for (size_t r = 0; r < open_.size(); ++r) {
    if (open_[r].index >= 0) done.emplace_back(static_cast<int32_t>(r), open_[r]);
    open_[r] = TimelineBucket{};
  }
}

int64_t TimelineBuckets::index_of(Time t) const {
  if (resolution_ns_ > 0) return t / resolution_ns_;  // t >= 0: an iteration's start
  return static_cast<int64_t>(std::floor(to_seconds(t) / resolution_));
}

Time TimelineBuckets::first_time_of(int64_t index) const {
  if (resolution_ns_ > 0 && index <= kTimeHorizon / resolution_ns_) return index * resolution_ns_;
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

double auto_timeline_resolution(double span) {
  constexpr double kMinute = 60, kHour = 3600, kDay = 86400;
  // The last keeps the longest span there is (kTimeHorizonSeconds) within the buckets.
  static constexpr std::array<double, 23> kNice = {
      1,           2,            5,            10,           15,           20,           30,    kMinute,
      2 * kMinute, 5 * kMinute,  10 * kMinute, 15 * kMinute, 20 * kMinute, 30 * kMinute, kHour, 2 * kHour,
      3 * kHour,   6 * kHour,    12 * kHour,   kDay,         2 * kDay,     5 * kDay,     10 * kDay};
  static_assert(kTimeHorizonSeconds / kNice.back() <= kAutoTimelineBuckets);
  for (const double r : kNice) {
    if (!(span / r > static_cast<double>(kAutoTimelineBuckets))) return r;  // NaN: 1
  }
  return kNice.back();
}

void TimelineCoarsener::add(TimelineBuckets::Completed& rows, bool rows_wide) {
  done_.clear();
  for (const auto& [replica, b] : rows) {
    const auto r = static_cast<size_t>(replica);
    if (open_.size() <= r) open_.resize(r + 1);
    TimelineBucket& wide = open_[r];
    const int64_t index = rows_wide ? b.index : b.index / factor_;
    if (wide.index != index) {
      if (wide.index >= 0) done_.emplace_back(replica, wide);
      wide = b;
      wide.index = index;
    } else {
      wide.merge(b);
    }
  }
  rows.swap(done_);
}

void TimelineCoarsener::finish(TimelineBuckets::Completed& done) {
  for (size_t r = 0; r < open_.size(); ++r) {
    if (open_[r].index >= 0) done.emplace_back(static_cast<int32_t>(r), open_[r]);
    open_[r] = TimelineBucket{};
  }
}

}  // namespace servesim
