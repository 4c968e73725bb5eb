// Properties at the edges of every input range, for every policy: a run is either a clean failure
// (a time past the horizon: RunResult::bad_input, with a message) or a done run whose every request
// settled with non-negative, monotone times (arrival <= scheduled < first token <= finished).
// Regressions of issue 9: huge think times, iterations priced past the horizon, prompts at the
// context limit and at kMaxTokens, arrivals at the horizon.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

struct Scenario {
  std::string name;
  std::vector<RequestSpec> specs;
  Time iteration = kNsPerSecond;  // every iteration's duration
  int64_t max_model_len = 0;      // 0: no model
  int32_t budget = 8192;
};

// Two- and three-turn conversations with think times near the horizon.
std::vector<RequestSpec> conversation(int turns, Time think) {
  std::vector<RequestSpec> specs;
  for (int t = 0; t < turns; ++t) {
    RequestSpec r = spec("c.t" + std::to_string(t), 0, 3, 2);
    if (t > 0) {
      r.after = {t - 1};
      r.think_time = think;
    }
    specs.push_back(r);
  }
  return specs;
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> s;
  s.push_back({"think times that stay inside the horizon", conversation(2, kTimeHorizon / 2)});
  s.push_back({"think times that pass the horizon", conversation(3, kTimeHorizon / 2)});
  s.push_back({"iterations of 10^8 s", {spec("A", 0, 1, 20), spec("B", 5, 1, 3)}, 100'000'000 * kNsPerSecond});
  s.push_back({"an iteration priced beyond any time", {spec("A", 0, 1, 2)}, kNever});
  s.push_back({"prompts at the context limit",
               {spec("below", 0, 999, 5), spec("at", 0, 1000, 5), spec("above", 0, 1001, 5)},
               kNsPerSecond, 1000});
  s.push_back({"a prompt of kMaxTokens", {spec("huge", 0, kMaxTokens, 2), spec("small", 0, 1, 2)},
               kNsPerSecond, 0, 2'000'000});
  s.push_back({"an arrival at the horizon", {spec("early", 0, 1, 1), spec("last", 1e9, 1, 1)}});
  s.push_back({"max_tokens of 1 and outputs capped by it", {spec("capped", 0, 1, 50, 1)}});
  return s;
}

SimOptions options(const Scenario& sc) {
  SimOptions o;
  o.limits = {16, sc.budget};
  o.max_model_len = sc.max_model_len;
  return o;
}

class ExtremeValues : public ::testing::TestWithParam<std::string> {};

TEST_P(ExtremeValues, ARunIsACleanFailureOrDoneInOrder) {
  const PolicyInfo* info = find_policy(GetParam()).value();
  for (const Scenario& sc : scenarios()) {
    SCOPED_TRACE(sc.name);
    auto run = simulate(sc.specs, std::string(info->name), "", options(sc), sc.iteration);
    const RunResult& r = run->result;
    const CaptureRecorder& capture = run->capture;
    const Simulator& sim = *run->sim;
    ASSERT_EQ(capture.ends, 1);
    if (r.outcome == RunOutcome::kFailed) {
      EXPECT_TRUE(r.bad_input) << r.error;
      EXPECT_NE(r.error.find("horizon"), std::string::npos) << r.error;
    } else {
      ASSERT_EQ(r.outcome, RunOutcome::kDone);
      for (const Request& q : sim.requests()) {
        if (q.status == RequestStatus::kRejected) {
          EXPECT_FALSE(q.reason.empty());
          continue;
        }
        EXPECT_EQ(q.status, RequestStatus::kDone) << q.id();
        EXPECT_GE(q.arrival, 0) << q.id();
        EXPECT_LE(q.arrival, q.scheduled) << q.id();
        EXPECT_LT(q.scheduled, q.first_token) << q.id();
        EXPECT_LE(q.first_token, q.finished) << q.id();
        EXPECT_LE(q.finished, kTimeHorizon) << q.id();
      }
    }
    // Every row recorded has sane times, whatever the outcome.
    for (const Request& q : capture.requests) {
      EXPECT_GE(q.arrival, 0);
      EXPECT_LE(q.finished, kTimeHorizon);
    }
    for (const CapturedIteration& it : capture.iterations) {
      EXPECT_GT(it.record.duration, 0);
      EXPECT_LE(it.record.start + it.record.duration, kTimeHorizon);
    }
  }
}

// The outcomes themselves, where they are known.
TEST(ExtremeValues, ExpectedOutcomes) {
  auto run = [](const Scenario& sc) {
    return simulate(sc.specs, "continuous", "", options(sc), sc.iteration);
  };
  const std::vector<Scenario> s = scenarios();
  EXPECT_EQ(run(s[0])->result.outcome, RunOutcome::kDone);
  EXPECT_EQ(run(s[1])->result.outcome, RunOutcome::kFailed);
  EXPECT_EQ(run(s[2])->result.outcome, RunOutcome::kFailed);  // the 11th iteration would pass 10^9 s
  EXPECT_EQ(run(s[3])->result.outcome, RunOutcome::kFailed);
  auto ctx = run(s[4]);
  EXPECT_EQ(ctx->result.outcome, RunOutcome::kDone);
  EXPECT_EQ(ctx->capture.by_id("below").status, RequestStatus::kDone);
  EXPECT_EQ(ctx->capture.by_id("below").num_output, 1);  // the context leaves room for one token
  EXPECT_EQ(ctx->capture.by_id("at").status, RequestStatus::kRejected);
  EXPECT_EQ(ctx->capture.by_id("above").status, RequestStatus::kRejected);
  EXPECT_EQ(run(s[5])->result.outcome, RunOutcome::kDone);
  EXPECT_EQ(run(s[6])->result.outcome, RunOutcome::kFailed);  // its iteration would end past 10^9 s
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, ExtremeValues, ::testing::ValuesIn(registered_policies()),
                         policy_test_name);

}  // namespace
}  // namespace servesim::testing
