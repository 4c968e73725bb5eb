// Hand-worked schedules of chunked prefill and prefix caching with the unit backend (one iteration =
// one time unit). Every expected value was derived by stepping vLLM V1's scheduling rules by hand,
// not copied from the simulator's output.
#include <gtest/gtest.h>

#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

SimOptions budget(int32_t tokens, int32_t seqs = 8) {
  SimOptions o;
  o.limits = {seqs, tokens};
  return o;
}

// A request whose prompt is the given segments (content ids, tokens).
RequestSpec with_prompt(std::string id, double arrival, std::vector<Segment> prompt, int32_t output) {
  int32_t tokens = 0;
  for (const Segment& s : prompt) tokens += s.tokens;
  RequestSpec r = spec(std::move(id), arrival, tokens, output);
  r.prompt = std::move(prompt);
  return r;
}

constexpr uint64_t kP = 101, kPy = 102, kPz = 103, kUa = 201, kUb = 202, kUq = 203;

// Budget 8: R1 (prompt 20, output 3) and R2 (prompt 5, output 2) at 0. R1 computes 8, 8, then 4
// while R2 gets the other 4; R1's first token at 3; then R1 decodes while R2 finishes its prompt
// (first token at 4); both end at 5.
TEST(ChunkedPrefill, ALongPromptIsCutToTheBudgetAndShares) {
  auto run = simulate({spec("R1", 0, 20, 3), spec("R2", 0, 5, 2)}, "chunked-prefill", "", budget(8));
  const auto& c = run->capture;
  ASSERT_EQ(c.iterations.size(), 5u);
  const int32_t r1[] = {8, 8, 4, 1, 1};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(c.iterations[i].items[0].index, 0) << i;  // running R1 always comes first
    EXPECT_EQ(c.iterations[i].items[0].new_tokens, r1[i]) << i;
  }
  EXPECT_EQ(c.iterations[0].items.size(), 1u);  // the budget is spent on R1
  EXPECT_EQ(c.iterations[1].items.size(), 1u);
  EXPECT_EQ(c.iterations[2].items[1].new_tokens, 4);  // R2's first chunk
  EXPECT_EQ(c.iterations[3].items[1].new_tokens, 1);  // the rest of R2's prompt
  EXPECT_EQ(secs(c.by_id("R1").first_token), 3);
  EXPECT_EQ(secs(c.by_id("R2").scheduled), 2);
  EXPECT_EQ(secs(c.by_id("R2").first_token), 4);
  EXPECT_EQ(secs(c.by_id("R1").finished), 5);
  EXPECT_EQ(secs(c.by_id("R2").finished), 5);
}

// Block size 4, 4 blocks, budget 8. At 0 A prefills 6 (2 blocks) and B 2 of its 6 (1 block); at 1 B
// finishes its prompt (2 blocks, none free). At 3 A needs a third block: B, the newest, is preempted
// and nobody is admitted. B's 8 tokens (prompt + 2 generated) need 2 blocks, which free up when A
// ends at 6; B recomputes them in one chunk at 6 and ends at 10 with exactly 6 tokens.
TEST(ChunkedPrefill, PreemptionUnderShortMemoryRecomputesAndCompletes) {
  SimOptions o = budget(8, 4);
  o.block_size = 4;
  o.kv_blocks = 4;
  auto run = simulate({spec("A", 0, 6, 6), spec("B", 0, 6, 6)}, "chunked-prefill", "", o);
  const auto& c = run->capture;
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone);
  EXPECT_EQ(c.iterations[0].items[1].new_tokens, 2);
  EXPECT_EQ(c.iterations[3].record.num_seqs, 1);
  EXPECT_EQ(c.by_id("B").preemptions, 1);
  EXPECT_EQ(c.by_id("A").preemptions, 0);
  EXPECT_EQ(secs(c.by_id("A").finished), 6);
  EXPECT_EQ(c.iterations[6].record.prefill_tokens, 8);
  EXPECT_EQ(secs(c.by_id("B").finished), 10);
  EXPECT_EQ(c.by_id("B").num_output, 6);
  EXPECT_EQ(run->sim->replica(0).kv_blocks_used(), 0);
}

// Block size 4. A's prompt is P (8 tokens) + 3 of its own: its two P blocks are cached. B arrives
// later with P + 5 of its own: it reuses exactly those two blocks and computes only its 5 tokens.
TEST(PrefixCached, AHitSavesExactlyTheCachedBlocks) {
  SimOptions o = budget(100);
  o.block_size = 4;
  auto run = simulate({with_prompt("A", 0, {{kP, 8}, {kUa, 3}}, 2),
                       with_prompt("B", 5, {{kP, 8}, {kUb, 5}}, 1)},
                      "prefix-cached", "", o);
  const auto& c = run->capture;
  EXPECT_EQ(c.by_id("A").cached_tokens, 0);
  EXPECT_EQ(c.by_id("B").cached_tokens, 8);
  const auto& it = c.iterations.back();
  EXPECT_EQ(it.record.prefill_tokens, 5);
  EXPECT_EQ(it.items[0].context_tokens, 8);
  EXPECT_EQ(secs(c.by_id("B").finished), 6);
  // Without prefix caching B computes all 13.
  auto plain = simulate({with_prompt("A", 0, {{kP, 8}, {kUa, 3}}, 2),
                         with_prompt("B", 5, {{kP, 8}, {kUb, 5}}, 1)},
                        "chunked-prefill", "", o);
  EXPECT_EQ(plain->capture.iterations.back().record.prefill_tokens, 13);
}

// A prompt that is entirely cached still recomputes its last block: with P (8 tokens, 2 blocks)
// cached, B = P reuses 1 block and computes 4 tokens.
TEST(PrefixCached, AFullHitRecomputesTheLastBlock) {
  SimOptions o = budget(100);
  o.block_size = 4;
  auto run = simulate({with_prompt("A", 0, {{kP, 8}}, 1), with_prompt("B", 5, {{kP, 8}}, 1)},
                      "prefix-cached", "", o);
  EXPECT_EQ(run->capture.by_id("B").cached_tokens, 4);
  EXPECT_EQ(run->capture.iterations.back().record.prefill_tokens, 4);
}

// A block is registered when the iteration that fills it is scheduled: B, admitted in the same
// iteration as A and after it, already reuses A's P blocks.
TEST(PrefixCached, ALaterAdmissionInTheSameIterationReuses) {
  SimOptions o = budget(100);
  o.block_size = 4;
  auto run = simulate({with_prompt("A", 0, {{kP, 8}, {kUa, 3}}, 1),
                       with_prompt("B", 0, {{kP, 8}, {kUb, 3}}, 1)},
                      "prefix-cached", "", o);
  EXPECT_EQ(run->capture.by_id("B").cached_tokens, 8);
  EXPECT_EQ(run->capture.iterations[0].record.prefill_tokens, 11 + 3);
}

// LRU eviction: 4 blocks of 4 tokens. X = Px and Y = Py (2 blocks each) run and leave their blocks
// cached (freed tail first: queue X1, X0, Y1, Y0). Z = Pz needs 2 blocks and evicts the least
// recently freed, X's. A later Py request still hits; a later Px request does not.
TEST(PrefixCached, EvictionTakesTheLeastRecentlyFreedBlocks) {
  SimOptions o = budget(100);
  o.block_size = 4;
  o.kv_blocks = 4;
  auto with_q = [&](uint64_t prefix) {
    return simulate({with_prompt("X", 0, {{kP, 8}}, 1), with_prompt("Y", 2, {{kPy, 8}}, 1),
                     with_prompt("Z", 4, {{kPz, 8}}, 1), with_prompt("Q", 6, {{prefix, 8}, {kUq, 4}}, 1)},
                    "prefix-cached", "", o);
  };
  EXPECT_EQ(with_q(kPy)->capture.by_id("Q").cached_tokens, 8);
  EXPECT_EQ(with_q(kP)->capture.by_id("Q").cached_tokens, 0);
}

// Longest prefix match first (SGLang's lpm): with P cached, C (P + own tokens) jumps ahead of B
// (nothing cached) although B arrived first; fcfs keeps arrival order.
TEST(PrefixCached, LpmOrderAdmitsTheLongestCachedPrefixFirst) {
  SimOptions o = budget(100, 1);
  o.block_size = 4;
  std::vector<RequestSpec> specs = {with_prompt("A", 0, {{kP, 8}}, 3),
                                    with_prompt("B", 1, {{kUb, 8}}, 1),
                                    with_prompt("C", 2, {{kP, 8}, {kUa, 4}}, 1)};
  auto lpm = simulate(specs, "prefix-cached", "order = \"lpm\"", o);
  auto fcfs = simulate(specs, "prefix-cached", "order = \"fcfs\"", o);
  // A occupies the one slot until 3; then lpm picks C, fcfs picks B.
  EXPECT_EQ(secs(lpm->capture.by_id("C").scheduled), 3);
  EXPECT_EQ(secs(lpm->capture.by_id("B").scheduled), 4);
  EXPECT_EQ(secs(fcfs->capture.by_id("B").scheduled), 3);
  EXPECT_EQ(secs(fcfs->capture.by_id("C").scheduled), 4);
}

}  // namespace
}  // namespace servesim::testing

namespace servesim::testing {
namespace {

// Regression: a request alone that outgrew the whole cache preempted itself, the iteration came out
// empty, and the run stalled. Block size 4, 2 blocks: A (prompt 7) decodes its 2nd token at 1 (8
// tokens, 2 blocks); at 2 it needs a third block that does not exist: it is rejected, not stuck.
TEST(ChunkedPrefill, ARequestThatOutgrowsTheWholeCacheIsRejectedNotStuck) {
  for (const char* policy : {"chunked-prefill", "prefix-cached", "continuous"}) {
    SimOptions o;
    o.limits = {4, 64};
    o.block_size = 4;
    o.kv_blocks = 2;
    auto run = simulate({spec("A", 0, 7, 5), spec("B", 0, 2, 1)}, policy, "", o);
    ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << policy << ": " << run->result.error;
    const Request& a = run->capture.by_id("A");
    EXPECT_EQ(a.status, RequestStatus::kRejected) << policy;
    EXPECT_EQ(a.num_output, 2) << policy;
    EXPECT_NE(a.reason.find("the cache has 2"), std::string::npos) << policy << ": " << a.reason;
    EXPECT_EQ(run->capture.by_id("B").status, RequestStatus::kDone) << policy;
  }
}

}  // namespace
}  // namespace servesim::testing
