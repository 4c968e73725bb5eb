// Hand-worked schedules with the unit backend (one iteration = one time unit). Every expected value
// below was derived by stepping the policy's rules by hand, not copied from the simulator's output.
#include <gtest/gtest.h>

#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

// The seeds' five-request example: capacity 3; A 0/3, B 0/8, C 0/5, D 2/4, E 4/3 (arrival/output).
std::vector<RequestSpec> toy() {
  return {spec("A", 0, 1, 3), spec("B", 0, 1, 8), spec("C", 0, 1, 5), spec("D", 2, 1, 4),
          spec("E", 4, 1, 3)};
}

SimOptions capacity(int32_t seqs) {
  SimOptions o;
  o.limits.max_num_seqs = seqs;
  return o;
}

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

TEST(ContinuousPolicy, FirstSeedSchedule) {
  auto run = simulate(toy(), "continuous", "", capacity(3));
  const auto& c = run->capture;
  EXPECT_EQ(secs(c.by_id("D").scheduled), 3);  // A's slot frees at 3
  EXPECT_EQ(secs(c.by_id("E").scheduled), 5);  // C's slot frees at 5
  EXPECT_EQ(secs(c.by_id("D").finished), 7);
  EXPECT_EQ(secs(c.by_id("E").finished), 8);
  EXPECT_EQ(secs(c.by_id("B").finished), 8);
  EXPECT_EQ(c.iterations.size(), 8u);
  for (const auto& it : c.iterations) EXPECT_LE(it.record.num_seqs, 3);
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

// Two requests that outgrow a 4-block cache (block size 4): B is preempted at 5, recomputes
// prompt + 5 generated tokens when A leaves at 10, and still ends with exactly 10 tokens.
TEST(ContinuousPolicy, PagedPreemptsTheNewestAndRecomputes) {
  std::vector<RequestSpec> specs = {spec("A", 0, 4, 10), spec("B", 0, 4, 10)};
  SimOptions o = capacity(2);
  o.block_size = 4;
  o.kv_blocks = 4;
  auto run = simulate(specs, "continuous", "kv_reserve = \"paged\"", o);
  const auto& c = run->capture;
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone);
  const Request& a = c.by_id("A");
  const Request& b = c.by_id("B");
  EXPECT_EQ(a.preemptions, 0);
  EXPECT_EQ(secs(a.finished), 10);
  EXPECT_EQ(b.preemptions, 1);
  EXPECT_EQ(b.num_output, 10);
  EXPECT_EQ(secs(b.finished), 15);
  // At 5 A needs a third block and none is free: B goes, and nobody is admitted that iteration.
  EXPECT_EQ(c.iterations[5].record.num_seqs, 1);
  // B's recompute at 10 prefills its prompt and the 5 tokens it had generated.
  EXPECT_EQ(c.iterations[10].record.prefill_tokens, 9);
  EXPECT_EQ(c.iterations[10].items[0].emitted, true);
  for (const auto& it : c.iterations) EXPECT_LE(it.record.kv_blocks_used, 4);
  EXPECT_EQ(run->sim->replica(0).kv_blocks_used(), 0);
}

TEST(ContinuousPolicy, MaxReservationNeverPreempts) {
  std::vector<RequestSpec> specs = {spec("A", 0, 4, 10, 10), spec("B", 0, 4, 10, 10)};
  SimOptions o = capacity(2);
  o.block_size = 4;
  o.kv_blocks = 4;  // 4 + 10 tokens = 4 blocks: one request at a time
  auto run = simulate(specs, "continuous", "kv_reserve = \"max\"", o);
  const auto& c = run->capture;
  EXPECT_EQ(c.by_id("A").preemptions + c.by_id("B").preemptions, 0);
  EXPECT_EQ(secs(c.by_id("A").finished), 10);
  EXPECT_EQ(secs(c.by_id("B").scheduled), 10);
  EXPECT_EQ(secs(c.by_id("B").finished), 20);
}

TEST(ContinuousPolicy, TokenBudgetDefersPromptsAndRejectsOversizedOnes) {
  // Budget 10: A's 6-token prompt fits, B's 6 must wait for the next iteration (strict FCFS);
  // C's 11-token prompt can never be prefilled whole and is rejected with the reason.
  std::vector<RequestSpec> specs = {spec("A", 0, 6, 3), spec("B", 0, 6, 3), spec("C", 0, 11, 3)};
  SimOptions o = capacity(4);
  o.limits.max_num_batched_tokens = 10;
  auto run = simulate(specs, "continuous", "", o);
  const auto& c = run->capture;
  EXPECT_EQ(secs(c.by_id("A").scheduled), 0);
  EXPECT_EQ(secs(c.by_id("B").scheduled), 1);
  EXPECT_EQ(c.by_id("C").status, RequestStatus::kRejected);
  EXPECT_NE(c.by_id("C").reason.find("max_num_batched_tokens"), std::string::npos);
}

TEST(ContinuousPolicy, ALongPromptGetsAPrefillOnlyIterationRatherThanStarve) {
  // Budget 10. At 1, A's decode leaves 9 tokens: B's 10-token prompt does not fit beside it, so
  // iteration 1 prefills B alone and A's decode pauses once (A: tokens at 1, 3, 4, 5, 6).
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 5), spec("B", 1, 10, 2)};
  SimOptions o = capacity(4);
  o.limits.max_num_batched_tokens = 10;
  auto run = simulate(specs, "continuous", "", o);
  const auto& c = run->capture;
  EXPECT_EQ(secs(c.by_id("B").scheduled), 1);
  ASSERT_GE(c.iterations.size(), 2u);
  EXPECT_EQ(c.iterations[1].record.num_seqs, 1);
  EXPECT_EQ(c.iterations[1].record.prefill_tokens, 10);
  EXPECT_EQ(secs(c.by_id("B").finished), 3);
  EXPECT_EQ(secs(c.by_id("A").finished), 6);
}

TEST(Simulator, PromptLargerThanKvMemoryIsRejectedAtArrival) {
  std::vector<RequestSpec> specs = {spec("A", 0, 100, 2), spec("B", 0, 10, 2)};
  SimOptions o = capacity(4);
  o.kv_blocks = 2;  // 32 tokens
  auto run = simulate(specs, "continuous", "", o);
  EXPECT_EQ(run->capture.by_id("A").status, RequestStatus::kRejected);
  EXPECT_NE(run->capture.by_id("A").reason.find("KV blocks"), std::string::npos);
  EXPECT_EQ(secs(run->capture.by_id("B").finished), 2);
}

TEST(Simulator, OutputStopsAtMaxTokensAndIsFlagged) {
  auto run = simulate({spec("A", 0, 1, 50, 5)}, "continuous", "", capacity(1));
  const Request& a = run->capture.by_id("A");
  EXPECT_EQ(a.num_output, 5);
  EXPECT_TRUE(a.capped);
  EXPECT_EQ(secs(a.finished), 5);
}

TEST(Simulator, ArrivalAtTheEndOfAnIterationIsSeenByTheNextOne) {
  // A runs 0..1 (prompt) and 1..2 (decode); B arrives exactly at 1 and joins the iteration at 1.
  auto run = simulate({spec("A", 0, 1, 2), spec("B", 1, 1, 1)}, "continuous", "", capacity(2));
  EXPECT_EQ(secs(run->capture.by_id("B").scheduled), 1);
  // Mid-iteration arrivals wait for the next start.
  auto late = simulate({spec("A", 0, 1, 3), spec("B", 0.5, 1, 1)}, "continuous", "", capacity(2));
  EXPECT_EQ(secs(late->capture.by_id("B").scheduled), 1);
}

TEST(Simulator, ReplicasShareTheWorkRoundRobin) {
  SimOptions o = capacity(1);
  o.replicas = 2;
  auto run = simulate({spec("A", 0, 1, 4), spec("B", 0, 1, 4)}, "continuous", "", o);
  EXPECT_EQ(run->capture.by_id("A").replica, 0);
  EXPECT_EQ(run->capture.by_id("B").replica, 1);
  EXPECT_EQ(secs(run->capture.by_id("B").finished), 4);
}

}  // namespace
}  // namespace servesim::testing
