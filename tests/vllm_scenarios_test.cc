// Regression scenarios of the vLLM cross-check (scripts/vllm_xcheck_suites.py): the smallest cases
// where servesim once decided differently from vLLM's own Scheduler, each worked through by hand
// below and confirmed step by step against vLLM 0.33.0 and 0.11.0 (the `vllm_version`s mirrored).
// Unit backend: one iteration per time unit; kv_blocks = vLLM's num_blocks - 1 (its null block).
#include <gtest/gtest.h>

#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

constexpr const char* kV033 = "vllm_version = \"0.33.0\"";
constexpr const char* kV011 = "vllm_version = \"0.11.0\"";

SimOptions engine(int32_t block_size, int64_t blocks, int32_t seqs, int32_t budget) {
  SimOptions o;
  o.limits = {seqs, budget};
  o.block_size = block_size;
  o.kv_blocks = blocks;
  return o;
}

// A request whose prompt is shared prefix `prefix` (tokens) followed by `own` tokens of its own.
RequestSpec prefixed(std::string id, double arrival, uint64_t prefix, int32_t prefix_tokens,
                     int32_t own, int32_t output) {
  static uint64_t next_own = 0;  // every request's own tokens are its own
  RequestSpec r = spec(std::move(id), arrival, prefix_tokens + own, output);
  r.prompt = {{prefix, prefix_tokens}, {content_id(kUserContent, ++next_own), own}};
  return r;
}

RequestSpec with_priority(RequestSpec r, int32_t priority) {
  r.priority = priority;
  return r;
}

std::vector<int64_t> kv_used(const Run& run) {
  std::vector<int64_t> used;
  for (const CapturedIteration& it : run.capture.iterations) used.push_back(it.record.kv_blocks_used);
  return used;
}

std::vector<int32_t> tokens(const Run& run) {
  std::vector<int32_t> t;
  for (const CapturedIteration& it : run.capture.iterations) {
    t.push_back(static_cast<int32_t>(it.record.prefill_tokens + it.record.decode_tokens));
  }
  return t;
}

// scheduler_reserve_full_isl. Block size 4, 11 blocks, budget 8. A (prompt 8, 20 outputs) runs from
// 0; B (prompt 30, 2 outputs) arrives at 1. At 1 B's whole prompt (8 blocks) fits the 8 free ones,
// so it is admitted and computes 7 tokens a step beside A's decodes. At 5 A takes the last free
// block and B, 2 tokens short, preempts itself; its 30 tokens (8 blocks) never fit beside A's 4..5
// blocks again, so it waits, admitted once A ends at 20, and computes 8, 8, 8, 6, then decodes.
// vLLM 0.11.0 checks only the first chunk: B is let in at once after each preemption and is
// preempted 5 times, with the same first token and finish.
TEST(VllmScenarios, AdmissionReservesTheWholePrompt) {
  const std::vector<RequestSpec> specs = {spec("A", 0, 8, 20), spec("B", 1, 30, 2)};
  auto now = simulate(specs, "chunked-prefill", kV033, engine(4, 11, 4, 8));
  const auto& c = now->capture;
  EXPECT_EQ(c.by_id("B").preemptions, 1);
  EXPECT_EQ(c.by_id("A").preemptions, 0);
  EXPECT_EQ(secs(c.by_id("A").finished), 20);
  EXPECT_EQ(secs(c.by_id("B").first_token), 24);
  EXPECT_EQ(secs(c.by_id("B").finished), 25);
  const std::vector<int64_t> used = kv_used(*now);
  ASSERT_EQ(used.size(), 25u);
  EXPECT_EQ(std::vector<int64_t>(used.begin(), used.begin() + 6),
            (std::vector<int64_t>{2, 5, 7, 9, 10, 4}));
  const std::vector<int32_t> t = tokens(*now);
  EXPECT_EQ(std::vector<int32_t>(t.begin() + 20, t.end()), (std::vector<int32_t>{8, 8, 8, 6, 1}));

  auto old = simulate(specs, "chunked-prefill", kV011, engine(4, 11, 4, 8));
  EXPECT_EQ(old->capture.by_id("B").preemptions, 5);
  EXPECT_EQ(secs(old->capture.by_id("B").finished), 25);
  // Switched off in 0.33.0, it behaves as 0.11.0 here.
  auto off = simulate(specs, "chunked-prefill",
                      std::string(kV033) + "\nscheduler_reserve_full_isl = false",
                      engine(4, 11, 4, 8));
  EXPECT_EQ(off->capture.by_id("B").preemptions, 5);
}

// A lone request is not held back by long_prefill_token_threshold in 0.33.0: prompt 100, budget 64,
// threshold 10 computes 64 then 36 (first token at 2). 0.11.0 computes 10 a step (first token at 10).
TEST(VllmScenarios, ALoneRequestIsNotCappedByTheThreshold) {
  const std::vector<RequestSpec> specs = {spec("A", 0, 100, 2)};
  const std::string thr = "long_prefill_token_threshold = 10\n";
  auto now = simulate(specs, "chunked-prefill", thr + kV033, engine(16, 999, 8, 64));
  EXPECT_EQ(tokens(*now), (std::vector<int32_t>{64, 36, 1}));
  EXPECT_EQ(secs(now->capture.by_id("A").first_token), 2);
  auto old = simulate(specs, "chunked-prefill", thr + kV011, engine(16, 999, 8, 64));
  EXPECT_EQ(tokens(*old), (std::vector<int32_t>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 1}));
  // Two requests: the cap applies in both releases.
  auto two = simulate({spec("A", 0, 100, 2), spec("B", 0, 3, 1)}, "chunked-prefill", thr + kV033,
                      engine(16, 999, 8, 64));
  EXPECT_EQ(two->capture.iterations[0].items[0].new_tokens, 10);
}

// long_prefill_token_threshold_adaptive floors the cap at budget / requests: two prompts of 100 with
// budget 64 and threshold 4 compute 32 each per step instead of 4.
TEST(VllmScenarios, AdaptiveThresholdTakesAFairShareOfTheBudget) {
  const std::vector<RequestSpec> specs = {spec("A", 0, 100, 1), spec("B", 0, 100, 1)};
  const std::string thr = "long_prefill_token_threshold = 4\n";
  auto adaptive = simulate(specs, "chunked-prefill",
                           thr + "long_prefill_token_threshold_adaptive = true",
                           engine(16, 999, 8, 64));
  EXPECT_EQ(adaptive->capture.iterations[0].items[0].new_tokens, 32);
  EXPECT_EQ(adaptive->capture.iterations[0].items[1].new_tokens, 32);
  auto fixed = simulate(specs, "chunked-prefill", thr, engine(16, 999, 8, 64));
  EXPECT_EQ(fixed->capture.iterations[0].items[0].new_tokens, 4);
}

// Freed blocks without a hash are reused first (0.33.0). Block size 4, 4 blocks. Y = q (8 tokens,
// 2 blocks) + 1 ends at 1 and frees its partial block and q's two (cached); W's partial block is
// freed at 2. V (5 tokens, 2 blocks) at 2 takes the two hashless blocks and q survives: Z = q + 1
// at 3 hits 8 tokens. 0.11.0 queues every freed block in order: V evicts one of q's blocks and Z
// hits 4.
TEST(VllmScenarios, FreedBlocksWithoutAHashAreReusedFirst) {
  constexpr uint64_t kQ = 501;
  const std::vector<RequestSpec> specs = {prefixed("Y", 0, kQ, 8, 1, 1), spec("W", 0, 1, 2),
                                          spec("V", 2, 5, 1), prefixed("Z", 3, kQ, 8, 1, 1)};
  auto now = simulate(specs, "prefix-cached", kV033, engine(4, 4, 4, 64));
  EXPECT_EQ(now->capture.by_id("Z").cached_tokens, 8);
  EXPECT_EQ(kv_used(*now), (std::vector<int64_t>{4, 1, 2, 3}));
  auto old = simulate(specs, "prefix-cached", kV011, engine(4, 4, 4, 64));
  EXPECT_EQ(old->capture.by_id("Z").cached_tokens, 4);
}

// Two copies of a block under one hash both stay cached. Block size 4, 6 blocks, budget 9,
// threshold 4; D keeps a third request around so the cap holds. A0 and A1 (p = 12 tokens, + 1)
// start together; A1 hits A0's first block and runs ahead, so A0 computes blocks 2 and 3 of p
// again, as copies. At 2 A1 needs a 4th block and preempts itself; at 3 A0 evicts A1's copy of
// block 3 for its last block. When A0 ends, A1 comes back at 4 and still finds all of p (12
// tokens): block 2 through A1's own copy, block 3 through A0's.
TEST(VllmScenarios, TwoCopiesOfABlockAreBothCached) {
  constexpr uint64_t kP = 502;
  const std::vector<RequestSpec> specs = {spec("D", 0, 1, 6), prefixed("A0", 0, kP, 12, 1, 1),
                                          prefixed("A1", 0, kP, 12, 1, 1)};
  auto run = simulate(specs, "prefix-cached", std::string(kV033) + "\nlong_prefill_token_threshold = 4",
                      engine(4, 6, 3, 9));
  const auto& c = run->capture;
  EXPECT_EQ(c.by_id("A1").cached_tokens, 4);  // at its first admission
  EXPECT_EQ(c.by_id("A1").preemptions, 1);
  EXPECT_EQ(tokens(*run), (std::vector<int32_t>{9, 9, 5, 2, 2, 1}));
  EXPECT_EQ(kv_used(*run), (std::vector<int64_t>{3, 5, 4, 5, 6, 2}));
  const CapturedIteration& back = c.iterations[4];  // A1 re-admitted: 12 tokens cached, 1 computed
  ASSERT_EQ(back.items.size(), 2u);
  EXPECT_EQ(back.items[1].context_tokens, 12);
  EXPECT_EQ(back.items[1].new_tokens, 1);
  EXPECT_EQ(secs(c.by_id("A1").finished), 5);
}

// Priority preemption takes the largest (priority, arrival), even one already scheduled in this
// step, and gives its tokens back. Block size 4, 4 blocks. A (prompt 4, priority 1) from 0 and B
// (prompt 7, priority 0) from 1 each hold 2 blocks at 2. At 3 A decodes first (7 tokens, no new
// block), then B needs a third: A is the lowest priority, so A leaves the step and is preempted, and
// B runs alone. A (7 tokens, 2 blocks) waits until B ends at 11, then recomputes 7 and ends at 18.
// Under fcfs B, the newest, preempts itself instead.
TEST(VllmScenarios, PriorityPreemptsTheLowestPriorityEvenIfAlreadyScheduled) {
  const std::vector<RequestSpec> specs = {with_priority(spec("A", 0, 4, 10), 1),
                                          with_priority(spec("B", 1, 7, 10), 0)};
  auto run = simulate(specs, "chunked-prefill", "scheduling_policy = \"priority\"",
                      engine(4, 4, 4, 64));
  const auto& c = run->capture;
  EXPECT_EQ(c.by_id("A").preemptions, 1);
  EXPECT_EQ(c.by_id("B").preemptions, 0);
  ASSERT_EQ(c.iterations[3].items.size(), 1u);
  EXPECT_EQ(c.iterations[3].items[0].index, 1);
  EXPECT_EQ(c.iterations[3].items[0].new_tokens, 1);
  EXPECT_EQ(secs(c.by_id("B").finished), 11);
  EXPECT_EQ(c.iterations[11].record.prefill_tokens, 7);
  EXPECT_EQ(secs(c.by_id("A").finished), 18);
  EXPECT_EQ(kv_used(*run)[3], 3);

  auto fcfs = simulate(specs, "chunked-prefill", "", engine(4, 4, 4, 64));
  EXPECT_EQ(fcfs->capture.by_id("A").preemptions, 0);
  EXPECT_EQ(fcfs->capture.by_id("B").preemptions, 1);
}

// The waiting queue under priority scheduling is ordered by (priority, arrival, id) as vLLM's
// Request.__lt__, ids compared as strings ("r10" < "r2"). One slot: H holds it until 3; then the
// queue gives r10 and r2 (priority 0, both at 1: by id), then late (priority 0, at 2), then early
// (priority 1, at 0) although it came first.
TEST(VllmScenarios, PriorityQueueOrdersByPriorityArrivalAndId) {
  const std::vector<RequestSpec> specs = {
      spec("H", 0, 1, 3), with_priority(spec("early", 0, 1, 1), 1),
      with_priority(spec("r2", 1, 1, 1), 0), with_priority(spec("r10", 1, 1, 1), 0),
      with_priority(spec("late", 2, 1, 1), 0)};
  auto run = simulate(specs, "chunked-prefill", "scheduling_policy = \"priority\"",
                      engine(16, 99, 1, 64));
  const auto& c = run->capture;
  EXPECT_EQ(secs(c.by_id("H").finished), 3);
  EXPECT_EQ(secs(c.by_id("r10").scheduled), 3);
  EXPECT_EQ(secs(c.by_id("r2").scheduled), 4);
  EXPECT_EQ(secs(c.by_id("late").scheduled), 5);
  EXPECT_EQ(secs(c.by_id("early").scheduled), 6);
  // fcfs: arrival order (early was first, and H admitted before it).
  auto fcfs = simulate(specs, "chunked-prefill", "", engine(16, 99, 1, 64));
  EXPECT_EQ(secs(fcfs->capture.by_id("early").scheduled), 3);
}

}  // namespace
}  // namespace servesim::testing
