// TimelineBuckets (analysis/timeline_buckets.h): a leap's iterations, taken by range, fill the
// buckets exactly as its iterations taken one by one.
#include "analysis/timeline_buckets.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace servesim
