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

namespace servesim::testing {
namespace {

// A policy that never schedules anything: the simulator must fail the run, not hang.
class StuckPolicy final : public Policy {
 public:
  void next_batch(ReplicaView& /*view*/, Time /*now*/, Batch& /*batch*/) override {}
  std::string_view name() const override { return "stuck"; }
  toml::table options() const override { return {}; }
};

TEST(Simulator, APolicyThatStopsMakingProgressFailsTheRunInsteadOfHanging) {
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 2)};
  std::vector<std::unique_ptr<Policy>> policies;
  policies.push_back(std::make_unique<StuckPolicy>());
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<UnitBackend>());
  CaptureRecorder capture;
  Simulator sim(specs, capacity(1), std::move(policies), std::move(backends), {&capture});
  const RunResult result = sim.run();
  EXPECT_EQ(result.outcome, RunOutcome::kFailed);
  EXPECT_NE(result.error.find("stopped making progress"), std::string::npos);
  EXPECT_EQ(capture.ends, 1);
  ASSERT_EQ(capture.requests.size(), 1u);  // logged as unfinished
  EXPECT_EQ(capture.requests[0].status, RequestStatus::kWaiting);
}

// Lists its running requests last admitted first: the requests that finish in one iteration then
// come out of running order, and the replica must still take exactly those out.
class ReversedPolicy final : public Policy {
 public:
  void next_batch(ReplicaView& view, Time /*now*/, Batch& batch) override {
    while (!view.waiting().empty() && view.running().size() < 4) {
      Sequence* seq = view.waiting().front();
      view.kv().allocate(*seq, seq->num_tokens());
      view.admit(seq);
    }
    const std::vector<Sequence*>& running = view.running();
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
      Sequence* seq = *it;
      view.kv().allocate(*seq, seq->num_tokens());
      batch.items.push_back({seq, seq->num_uncomputed(), seq->num_computed});
    }
  }
  std::string_view name() const override { return "reversed"; }
  toml::table options() const override { return {}; }
};

TEST(Simulator, RequestsFinishingOutOfRunningOrderLeaveTheRunningSet) {
  // A..D run together; B and D finish in one iteration, C and A in a later one, each listed after
  // the one admitted after it.
  std::vector<RequestSpec> specs = {spec("A", 0, 3, 6), spec("B", 0, 3, 2), spec("C", 0, 3, 6),
                                    spec("D", 0, 3, 2), spec("E", 0, 3, 1)};
  std::vector<std::unique_ptr<Policy>> policies;
  policies.push_back(std::make_unique<ReversedPolicy>());
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<UnitBackend>());
  CaptureRecorder capture;
  Simulator sim(specs, capacity(4), std::move(policies), std::move(backends), {&capture});
  ASSERT_EQ(sim.run().outcome, RunOutcome::kDone);
  ASSERT_EQ(capture.requests.size(), specs.size());
  for (const RequestSpec& s : specs) EXPECT_EQ(capture.by_id(s.id).num_output, s.output_tokens) << s.id;
  // Each iteration lists what runs: a request done in one is in none after it.
  for (const CapturedIteration& it : capture.iterations) {
    for (const CapturedItem& item : it.items) {
      const Request& r = capture.by_id(specs[static_cast<size_t>(item.index)].id);
      EXPECT_LT(it.record.start, r.finished) << r.id();
    }
  }
  EXPECT_EQ(capture.by_id("E").scheduled, capture.by_id("B").finished);  // B's slot, freed in time
}

TEST(Simulator, AStopRequestInterruptsAndLogsWhatIsOutstanding) {
  std::atomic<bool> stop{true};
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 2)};
  std::vector<std::unique_ptr<Policy>> policies;
  policies.push_back(find_policy("continuous").value()->make({}).value());
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<UnitBackend>());
  CaptureRecorder capture;
  Simulator sim(specs, capacity(1), std::move(policies), std::move(backends), {&capture});
  EXPECT_EQ(sim.run(&stop).outcome, RunOutcome::kInterrupted);
  EXPECT_EQ(capture.outcome, RunOutcome::kInterrupted);
  EXPECT_TRUE(capture.requests.empty());  // nothing had arrived yet
}

TEST(Simulator, EventsAtOneInstantAreSeenTogether) {
  // Three requests at the same instant with one free slot left after A: B and C are both visible
  // when the iteration at 2 is formed, and FCFS picks B.
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 2), spec("B", 2, 1, 1), spec("C", 2, 1, 1)};
  auto run = simulate(specs, "continuous", "", capacity(1));
  EXPECT_EQ(secs(run->capture.by_id("B").scheduled), 2);
  EXPECT_EQ(secs(run->capture.by_id("C").scheduled), 3);
}

}  // namespace
}  // namespace servesim::testing

namespace servesim::testing {
namespace {

TEST(Simulator, ADependentRequestArrivesWhenItsLastParentFinishesPlusThinkTime) {
  // A ends at 3, B at 2; C waits for both, then 0.5 of think time: it arrives at 3.5, when the
  // replica is idle, and starts at once.
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 3), spec("B", 0, 1, 2), spec("C", 0, 1, 1)};
  specs[2].after = {0, 1};
  specs[2].think_time = from_seconds(0.5);
  auto run = simulate(specs, "continuous", "", capacity(4));
  const auto& c = run->capture;
  EXPECT_EQ(secs(c.by_id("C").arrival), 3.5);
  EXPECT_EQ(secs(c.by_id("C").scheduled), 3.5);  // the replica was idle: it starts at once
  EXPECT_EQ(c.by_id("C").replica, c.by_id("A").replica);  // follows its first parent
}

TEST(Simulator, AChildOfARejectedRequestIsRejectedToo) {
  std::vector<RequestSpec> specs = {spec("A", 0, 100, 1), spec("B", 0, 1, 1), spec("C", 0, 1, 1)};
  specs[1].after = {0};
  specs[2].after = {1};
  SimOptions o = capacity(2);
  o.kv_blocks = 2;  // A's prompt never fits
  auto run = simulate(specs, "continuous", "", o);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone);
  for (const char* id : {"A", "B", "C"}) {
    EXPECT_EQ(run->capture.by_id(id).status, RequestStatus::kRejected) << id;
  }
  EXPECT_NE(run->capture.by_id("C").reason.find("'B'"), std::string::npos);
}

TEST(Simulator, AChildWithNoThinkTimeIsSeenAtTheInstantItsParentFinishes) {
  // A ends at 2; B (after A, no think time) arrives at 2 and joins the iteration that starts at 2.
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 2), spec("B", 0, 1, 1)};
  specs[1].after = {0};
  auto run = simulate(specs, "continuous", "", capacity(2));
  EXPECT_EQ(secs(run->capture.by_id("B").arrival), 2);
  EXPECT_EQ(secs(run->capture.by_id("B").scheduled), 2);
}

}  // namespace
}  // namespace servesim::testing
