// The simulator: arrivals, rejection, max_tokens, replicas; hand-worked with the unit backend.
// Every expected value was derived by stepping the rules by hand, not copied from the output.
#include <gtest/gtest.h>

#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

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
