// TimelineBuckets (analysis/storage/timeline_buckets.h): a leap's iterations, taken by range, fill the
// buckets exactly as its iterations taken one by one.
#include "analysis/storage/timeline_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

namespace servesim {
namespace {

auto fields(const std::pair<int32_t, TimelineBucket>& rb) {
  const TimelineBucket& b = rb.second;
  return std::make_tuple(rb.first, b.index, b.end, b.iterations, b.prefill, b.decode, b.emitted, b.preemptions,
                         b.seqs_max, b.waiting_max, b.kv_max, b.kv_total, b.busy, static_cast<double>(b.kv_ns));
}

TEST(TimelineBuckets, DecodeStepsFillTheBucketsAsTheirIterationsOneByOne) {
  std::mt19937_64 rng(11);
  for (const double resolution : {0.05, 0.25, 1.0}) {
    TimelineBuckets by_range(resolution), by_one(resolution);
    TimelineBuckets::Completed ranged, single;
    Time start[2] = {0, 7'000'000};
    for (int leap = 0; leap < 400; ++leap) {
      DecodeSteps steps;
      steps.replica = leap % 2;
      steps.start = start[steps.replica];
      steps.num_seqs = static_cast<int32_t>(1 + rng() % 8);
      steps.count = static_cast<int64_t>(1 + rng() % 120);
      steps.kv_blocks_total = 4096;
      steps.durations.rest = static_cast<Time>(5'000'000 + rng() % 20'000'000);
      steps.durations.per_context = static_cast<int64_t>(rng() % (int64_t{300} << 31));
      steps.durations.fixed = DecodeDurations::kOne / 2;
      steps.durations.count = steps.num_seqs;
      steps.durations.context_sum = static_cast<int64_t>(rng() % 20'000);
      // Ranges of a few iterations each, with their busy times.
      std::vector<DecodeSteps::Range> ranges;
      DecodeDurationCursor d(steps.durations);
      for (int64_t j = 0; j < steps.count;) {
        DecodeSteps::Range r;
        r.end = std::min(steps.count, j + static_cast<int64_t>(1 + rng() % 20));
        r.kv_blocks_used = static_cast<int64_t>(rng() % 4096);
        r.waiting = static_cast<int32_t>(rng() % 30);
        for (; j < r.end; ++j) r.busy += d.next();
        ranges.push_back(r);
      }
      steps.ranges = ranges;
      by_range.add_decode_steps(steps, ranged);
      Time at = steps.start;
      DecodeDurationCursor each(steps.durations);
      int64_t j = 0;
      for (const DecodeSteps::Range& r : ranges) {
        for (; j < r.end; ++j) {
          const Time duration = each.next();
          by_one.add_iteration(steps.record(j, r, at, duration), single);
          at += duration;
        }
      }
      start[steps.replica] = at + static_cast<Time>(rng() % 3'000'000'000);  // and an idle gap
    }
    by_range.finish(ranged);
    by_one.finish(single);
    ASSERT_EQ(ranged.size(), single.size()) << resolution;
    ASSERT_GT(ranged.size(), 100u) << resolution;  // many boundaries crossed
    for (size_t i = 0; i < ranged.size(); ++i) {
      EXPECT_EQ(fields(ranged[i]), fields(single[i])) << resolution << " bucket " << i;
    }
  }
}

// Iterations of two replicas, a few per second with idle gaps, as IterationRecords.
std::vector<IterationRecord> some_iterations(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<IterationRecord> out;
  Time at[2] = {0, 300'000'000};
  for (int i = 0; i < count; ++i) {
    IterationRecord it;
    it.replica = i % 2;
    it.start = at[it.replica];
    it.duration = static_cast<Time>(10'000'000 + rng() % 400'000'000);
    it.num_seqs = static_cast<int32_t>(rng() % 9);
    it.prefill_tokens = static_cast<int64_t>(rng() % 512);
    it.decode_tokens = it.num_seqs;
    it.emitted = it.num_seqs;
    it.preempted = static_cast<int32_t>(rng() % 5 == 0);
    it.waiting = static_cast<int32_t>(rng() % 20);
    it.kv_blocks_used = static_cast<int64_t>(rng() % 1000);
    it.kv_blocks_total = 1000 + static_cast<int64_t>(rng() % 3);
    out.push_back(it);
    at[it.replica] = it.start + it.duration + (rng() % 4 == 0 ? static_cast<Time>(rng() % 30'000'000'000) : 0);
  }
  return out;
}

// The rows' fields but `end` (which a merged row does not keep), by replica and bucket.
std::vector<std::tuple<int32_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, Time, double>>
sorted_fields(const TimelineBuckets::Completed& rows) {
  std::vector<decltype(sorted_fields(rows))::value_type> out;
  for (const auto& [replica, b] : rows) {
    out.emplace_back(replica, b.index, b.iterations, b.prefill, b.decode, b.emitted, b.preemptions, b.seqs_max,
                     b.waiting_max, b.kv_max, b.kv_total, b.busy, static_cast<double>(b.kv_ns));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TimelineCoarsener, MergesBucketsIntoThoseOfTheWiderResolution) {
  const std::vector<IterationRecord> its = some_iterations(5, 3000);
  for (const auto& [fine, factor] : {std::pair{1.0, int64_t{10}}, {0.25, 4}, {1.0, 1}, {0.01, 700}}) {
    TimelineBuckets narrow(fine), wide(fine * static_cast<double>(factor));
    TimelineCoarsener merge(factor);
    TimelineBuckets::Completed merged, direct, chunk;
    for (size_t i = 0; i < its.size(); ++i) {
      narrow.add_iteration(its[i], chunk);
      wide.add_iteration(its[i], direct);
      if (i % 97 == 0 || i + 1 == its.size()) {  // in chunks, as the writer takes them
        if (i + 1 == its.size()) narrow.finish(chunk);
        merge.add(chunk);
        merged.insert(merged.end(), chunk.begin(), chunk.end());
        chunk.clear();
      }
    }
    merge.finish(merged);
    wide.finish(direct);
    ASSERT_GT(direct.size(), 50u) << fine << " x " << factor;
    EXPECT_EQ(sorted_fields(merged), sorted_fields(direct)) << fine << " x " << factor;
  }
}

TEST(TimelineCoarsener, TakesTheWideRowsOfBucketsThatFollowASwitch) {
  // As DbRecorder does once the resolution is known: the narrow buckets in progress close, and
  // bucketing goes on at the wide resolution; the merged rows are those of the wide from the start.
  const std::vector<IterationRecord> its = some_iterations(9, 2000);
  for (const size_t at_switch : {size_t{0}, size_t{1}, size_t{777}, its.size()}) {
    TimelineBuckets buckets(1.0), wide(5.0);
    TimelineCoarsener merge(5);
    TimelineBuckets::Completed merged, direct, chunk;
    for (size_t i = 0; i < its.size(); ++i) {
      if (i == at_switch) {
        buckets.finish(chunk);
        merge.add(chunk, false);
        merged.insert(merged.end(), chunk.begin(), chunk.end());
        chunk.clear();
        buckets = TimelineBuckets(5.0);
      }
      buckets.add_iteration(its[i], chunk);
      wide.add_iteration(its[i], direct);
    }
    buckets.finish(chunk);
    merge.add(chunk, at_switch < its.size());
    merged.insert(merged.end(), chunk.begin(), chunk.end());
    merge.finish(merged);
    wide.finish(direct);
    EXPECT_EQ(sorted_fields(merged), sorted_fields(direct)) << "switch at " << at_switch;
  }
}

TEST(TimelineResolution, AutoKeepsTheArrivalsWithinTwoThousandBuckets) {
  EXPECT_EQ(auto_timeline_resolution(0), 1);
  EXPECT_EQ(auto_timeline_resolution(std::nan("")), 1);
  EXPECT_EQ(auto_timeline_resolution(2000), 1);
  EXPECT_EQ(auto_timeline_resolution(2000.5), 2);
  EXPECT_EQ(auto_timeline_resolution(18'174.7), 10);     // the Azure conversation replay
  EXPECT_EQ(auto_timeline_resolution(30'001), 20);
  EXPECT_EQ(auto_timeline_resolution(125'000), 120);     // a million requests at 8 per second
  EXPECT_EQ(auto_timeline_resolution(1'250'000), 900);   // ten million
  EXPECT_EQ(auto_timeline_resolution(86'400 * 10), 600);     // ten days: 1,440 buckets
  EXPECT_EQ(auto_timeline_resolution(1e9), 864'000);     // the end of time: ten days
  for (double span = 1; span < 1e9; span *= 1.7) {
    const double r = auto_timeline_resolution(span);
    EXPECT_LE(span / r, kAutoTimelineBuckets) << span;
    EXPECT_GE(r, 1) << span;
  }
}

TEST(TimelineBuckets, AWholeNumberOfNanosecondsSplitsAtItsMultiples) {
  // 0.01 s is 10,000,000 ns: an iteration starting at 290 ms is in bucket 29, one at 1 ns before in
  // 28. (In floating point, 0.29 / 0.01 is 28.999999999999996: bucket 28, as for 125 of the first
  // thousand boundaries.)
  TimelineBuckets b(0.01);
  TimelineBuckets::Completed done;
  IterationRecord it;
  it.duration = 1;
  for (const Time start : {Time{289'999'999}, Time{290'000'000}, Time{70'000'000'000'000}}) {
    it.start = start;
    b.add_iteration(it, done);
  }
  b.finish(done);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].second.index, 28);
  EXPECT_EQ(done[1].second.index, 29);
  EXPECT_EQ(done[2].second.index, 7'000'000);
  EXPECT_EQ(done[1].second.end, 300'000'000);
}

}  // namespace
}  // namespace servesim
