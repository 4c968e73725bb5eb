// Regressions of simulated times that overflowed int64 nanoseconds (issue 9, item 5 and 6): every
// sum of times is checked against the simulation horizon (sim/time.h), and a run that would pass
// it fails with a message; it is never `done` with a negative time or an unfinished request.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/backend.h"
#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

TEST(TimeHorizon, AddTimeAndSecondsToTimeStopAtTheHorizon) {
  EXPECT_EQ(add_time(1, 2), 3);
  EXPECT_EQ(add_time(kTimeHorizon, 0), kTimeHorizon);
  EXPECT_EQ(add_time(kTimeHorizon, 1), kNever);
  EXPECT_EQ(add_time(kTimeHorizon - 5, 6), kNever);
  EXPECT_EQ(add_time(std::numeric_limits<Time>::max() - 1, 2), kNever);  // no wrap-around
  EXPECT_EQ(add_time(-1, 2), kNever);
  EXPECT_EQ(seconds_to_time(1.5), 1'500'000'000);
  EXPECT_EQ(seconds_to_time(1e9), kTimeHorizon);
  EXPECT_EQ(seconds_to_time(1e9 + 1), kNever);
  EXPECT_EQ(seconds_to_time(std::numeric_limits<double>::infinity()), kNever);
  EXPECT_EQ(seconds_to_time(std::nan("")), kNever);
  EXPECT_EQ(seconds_to_time(-1), kNever);
  EXPECT_EQ(priced_duration(1e20), kNever);  // llround overflowed to 1 ns before
  EXPECT_EQ(priced_duration(0), 1);
}

TEST(TimeHorizon, AnIterationEndingPastTheHorizonFailsTheRun) {
  // 6e8 s per iteration: the first ends at 6e8 s, the second would end at 1.2e9 s.
  auto run = simulate({spec("A", 0, 1, 3)}, "continuous", "", capacity(4), 600'000'000 * kNsPerSecond);
  const RunResult& r = run->result;
  const CaptureRecorder& capture = run->capture;
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_NE(r.error.find("iteration 1 of replica 0, starting at 600000000"), std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("past the simulation horizon of 1e9 s"), std::string::npos) << r.error;
  ASSERT_EQ(capture.requests.size(), 1u);
  EXPECT_EQ(capture.requests[0].finished, -1);  // logged as unfinished, not finished
  // A cost model that priced an iteration beyond any time at all.
  const RunResult never = simulate({spec("A", 0, 1, 1)}, "continuous", "", capacity(4), kNever)->result;
  EXPECT_EQ(never.outcome, RunOutcome::kFailed);
  EXPECT_NE(never.error.find("the cost model priced it beyond that"), std::string::npos) << never.error;
}

TEST(TimeHorizon, AConversationPastTheHorizonFailsTheRun) {
  // 12 turns, 1e9 s of think time each: turn 1 would arrive at 1e9 s + 2 steps.
  std::vector<RequestSpec> specs;
  for (int t = 0; t < 12; ++t) {
    RequestSpec r = spec("s0.t" + std::to_string(t), 0, 1, 1);
    if (t > 0) {
      r.after = {t - 1};
      r.think_time = kTimeHorizon;
    }
    specs.push_back(r);
  }
  auto run = simulate(specs, "continuous", "", capacity(4));
  EXPECT_EQ(run->result.outcome, RunOutcome::kFailed);
  EXPECT_NE(run->result.error.find("request 's0.t1' would arrive past the simulation horizon"),
            std::string::npos)
      << run->result.error;
  for (const Request& r : run->capture.requests) {
    EXPECT_GE(r.arrival, 0);
    EXPECT_LE(r.finished, kTimeHorizon);
  }
}

// static max_wait beyond the horizon waits as forever does; it used to wrap to a deadline in the
// past and serve A at once.
TEST(TimeHorizon, AStaticWaitPastTheHorizonIsForever) {
  for (const char* wait : {"max_wait = 9e9", "max_wait = 1e300", "max_wait = inf"}) {
    auto run = simulate({spec("A", 0, 1, 1), spec("B", 5, 1, 1)}, "static", wait, capacity(2));
    ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << wait << ": " << run->result.error;
    EXPECT_EQ(secs(run->capture.by_id("A").scheduled), 5) << wait;
    EXPECT_EQ(secs(run->capture.by_id("B").scheduled), 5) << wait;
  }
}

}  // namespace
}  // namespace servesim::testing

namespace servesim {
namespace {

// from_seconds rounds as std::llround does, halves away from zero included.
TEST(FromSeconds, RoundsAsLlround) {
  std::mt19937_64 rng(3);
  std::vector<double> values = {0.0, -0.0, 0.5e-9, 1.5e-9, 2.5e-9, -0.5e-9, -2.5e-9, 0.4999999999e-9,
                                1e9, 9.2e9, 123.456789012345, -7.25e-9, 0.49999999999999994e-9};
  for (int i = 0; i < 100000; ++i) {
    const double magnitude = std::ldexp(1.0, static_cast<int>(rng() % 60) - 30);
    values.push_back((static_cast<double>(rng() % 2000000) / 1000000.0 - 1.0) * magnitude);
  }
  for (int64_t ns : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{123456789}}) {
    values.push_back((static_cast<double>(ns) + 0.5) / 1e9);  // halves, as far as doubles hold them
  }
  for (const double s : values) {
    EXPECT_EQ(from_seconds(s), static_cast<Time>(std::llround(s * 1e9))) << s;
  }
}

}  // namespace
}  // namespace servesim
