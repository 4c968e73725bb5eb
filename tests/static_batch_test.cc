// Hand-worked schedules of static batching with the unit backend (one iteration = one time unit).
// Every expected value was derived by stepping the rules by hand, not copied from the output.
#include <gtest/gtest.h>

#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

TEST(StaticPolicy, FirstSeedSchedule) {
  auto run = simulate(toy(), "static", "", capacity(3));
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone);
  const auto& c = run->capture;
  ASSERT_EQ(c.requests.size(), 5u);
  for (const char* id : {"A", "B", "C"}) EXPECT_EQ(secs(c.by_id(id).scheduled), 0) << id;
  EXPECT_EQ(secs(c.by_id("D").scheduled), 8);
  EXPECT_EQ(secs(c.by_id("E").scheduled), 8);
  EXPECT_EQ(secs(c.by_id("A").finished), 3);
  EXPECT_EQ(secs(c.by_id("B").finished), 8);
  EXPECT_EQ(secs(c.by_id("C").finished), 5);
  EXPECT_EQ(secs(c.by_id("D").finished), 12);
  EXPECT_EQ(secs(c.by_id("E").finished), 11);
  EXPECT_EQ(c.iterations.size(), 12u);
  // While the first batch drains, no one joins it: iterations 5..7 run B alone.
  EXPECT_EQ(c.iterations[6].record.num_seqs, 1);
}

TEST(StaticPolicy, SecondSeedWaitsForFullBatchesAndReleasesTogether) {
  auto run = simulate(toy(), "static", "max_wait = inf\nrelease = \"batch\"", capacity(3));
  const auto& c = run->capture;
  for (const char* id : {"A", "B", "C"}) {
    EXPECT_EQ(secs(c.by_id(id).scheduled), 0) << id;
    EXPECT_EQ(secs(c.by_id(id).finished), 8) << id;  // every member returns as the batch drains
    EXPECT_EQ(secs(c.by_id(id).first_token), 8) << id;  // nothing is streamed before
  }
  // D and E never make a full batch: they go when the workload is exhausted, at 8.
  for (const char* id : {"D", "E"}) {
    EXPECT_EQ(secs(c.by_id(id).scheduled), 8) << id;
    EXPECT_EQ(secs(c.by_id(id).finished), 12) << id;
  }
}

TEST(StaticPolicy, MaxWaitDispatchesAPartialBatchAtTheDeadline) {
  // A at 0, B at 1, C at 5; capacity 3, max_wait 2: A waits until 0 + 2, B rides along.
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 2), spec("B", 1, 1, 2), spec("C", 5, 1, 1)};
  auto run = simulate(specs, "static", "max_wait = 2.0", capacity(3));
  const auto& c = run->capture;
  EXPECT_EQ(secs(c.by_id("A").scheduled), 2);
  EXPECT_EQ(secs(c.by_id("B").scheduled), 2);
  EXPECT_EQ(secs(c.by_id("A").finished), 4);
  // C is the last arrival: nothing more can join, so it goes at once.
  EXPECT_EQ(secs(c.by_id("C").scheduled), 5);
  EXPECT_EQ(secs(c.by_id("C").finished), 6);
}

TEST(StaticPolicy, PaddingKeepsFinishedRowsInTheBatch) {
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 1), spec("B", 0, 1, 3)};
  auto shrink = simulate(specs, "static", "padding = \"shrink\"", capacity(2));
  auto pad = simulate(specs, "static", "padding = \"pad\"", capacity(2));
  ASSERT_EQ(shrink->capture.iterations.size(), 3u);
  ASSERT_EQ(pad->capture.iterations.size(), 3u);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(shrink->capture.iterations[i].record.num_seqs, 1);
    EXPECT_EQ(pad->capture.iterations[i].record.num_seqs, 2);
    EXPECT_EQ(pad->capture.iterations[i].record.decode_tokens, 2);
    EXPECT_EQ(pad->capture.iterations[i].record.emitted, 1);  // padding produces nothing
  }
  EXPECT_EQ(secs(pad->capture.by_id("B").finished), 3);
}

TEST(StaticPolicy, BatchIsCutByKvMemory) {
  // Reservations of prompt + max_tokens = 4 + 12 = 16 tokens = 1 block of 16; 2 blocks in all.
  std::vector<RequestSpec> specs = {spec("A", 0, 4, 2, 12), spec("B", 0, 4, 2, 12),
                                    spec("C", 0, 4, 2, 12)};
  SimOptions o = capacity(3);
  o.kv_blocks = 2;
  auto run = simulate(specs, "static", "", o);
  const auto& c = run->capture;
  EXPECT_EQ(secs(c.by_id("A").scheduled), 0);
  EXPECT_EQ(secs(c.by_id("B").scheduled), 0);
  EXPECT_EQ(secs(c.by_id("C").scheduled), 2);
}

}  // namespace
}  // namespace servesim::testing

namespace servesim::testing {
namespace {

// Regression: with max_wait = inf, a batch waited for a conversation's next turn, which could only
// arrive after the waiting turn itself ran: the run stalled. Nothing in flight can bring B, so A
// goes alone at 0 (done at 2); B arrives at 2 + 1 of think time and goes at once.
TEST(StaticPolicy, DoesNotWaitForArrivalsThatOnlyTheWaitingRequestsCouldRelease) {
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 2), spec("B", 0, 1, 1)};
  specs[1].after = {0};
  specs[1].think_time = from_seconds(1);
  auto run = simulate(specs, "static", "max_wait = inf", capacity(3));
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  EXPECT_EQ(secs(run->capture.by_id("A").scheduled), 0);
  EXPECT_EQ(secs(run->capture.by_id("B").arrival), 3);
  EXPECT_EQ(secs(run->capture.by_id("B").scheduled), 3);
}

}  // namespace
}  // namespace servesim::testing
