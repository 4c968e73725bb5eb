// Hand-worked schedules of continuous batching with the unit backend (one iteration = one time unit).
// Every expected value was derived by stepping the rules by hand, not copied from the output.
#include <gtest/gtest.h>

#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

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

}  // namespace
}  // namespace servesim::testing
