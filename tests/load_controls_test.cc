// Load controls (workloads/load_controls.h), the closed loop of max_concurrency (sim/simulator.h),
// goodput, rejection causes and the overload test (analysis/metrics/metrics.h).
#include "workloads/load_controls.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "analysis/metrics/metrics.h"
#include "sim_harness.h"
#include "sim/config/toml_fields.h"
#include "workloads/generate.h"
#include "workloads/workload.h"

namespace servesim {
namespace {

using testing::simulate;
using testing::spec;

Workload parse(const std::string& text, const LoadControls& load) {
  Result<Workload> w = parse_workload(text, "w.toml", std::nullopt, load);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  return w.ok() ? std::move(w).value() : Workload{};
}

std::string parse_error(const std::string& text, const LoadControls& load) {
  Result<Workload> w = parse_workload(text, "w.toml", std::nullopt, load);
  return w.ok() ? "" : w.error().message;
}

// Ten explicit requests at irregular times (a "trace").
std::string explicit_requests() {
  std::string s;
  const double at[] = {0, 0.5, 0.6, 2, 2.1, 2.2, 5, 7.5, 7.6, 9};
  for (double a : at) {
    s += "[[request]]\narrival = " + std::to_string(a) + "\nprompt_tokens = 10\noutput_tokens = 3\n";
  }
  return s;
}

double mean_rate(const Workload& w) {
  const double span = to_seconds(w.requests.back().arrival - w.requests.front().arrival);
  return static_cast<double>(w.requests.size() - 1) / span;
}

TEST(LoadControls, RetimingKeepsTheRequestsAndHitsTheMeanRateExactly) {
  const Workload own = parse(explicit_requests(), {});
  for (double rate : {0.37, 4.0, 250.0}) {
    const Workload w = parse(explicit_requests(), {.request_rate = rate});
    ASSERT_EQ(w.requests.size(), own.requests.size());
    EXPECT_NEAR(mean_rate(w), rate, rate * 1e-9);
    // The gaps keep their proportions: the trace keeps its burstiness.
    for (size_t i = 1; i < w.requests.size(); ++i) {
      EXPECT_NEAR(to_seconds(w.requests[i].arrival), to_seconds(own.requests[i].arrival) * (1.0 / rate),
                  1e-8);  // own mean rate is 9 / 9 s = 1
      EXPECT_EQ(w.requests[i].id, own.requests[i].id);
    }
  }
  const Workload all = parse(explicit_requests(), {.request_rate = INFINITY});
  for (const RequestSpec& r : all.requests) EXPECT_EQ(r.arrival, 0);
}

TEST(LoadControls, TimeScaleMultipliesArrivals) {
  const Workload w = parse(explicit_requests(), {.time_scale = 0.5});
  EXPECT_EQ(w.requests.back().arrival, from_seconds(4.5));
  EXPECT_EQ(w.requests[1].arrival, from_seconds(0.25));
}

TEST(LoadControls, NumPromptsKeepsTheFirstInSendOrderWithTheirParents) {
  const Workload w = parse(explicit_requests(), {.num_prompts = 4});
  ASSERT_EQ(w.requests.size(), 4u);
  EXPECT_EQ(w.requests.back().arrival, from_seconds(2));
  // Conversations: a request comes after its parents; "the first 4" are c0's three turns and c1's
  // first, in the order a client sends them.
  const std::string convo =
      "[[request]]\nid = 'c0'\narrival = 0\nprompt_tokens = 5\noutput_tokens = 2\n"
      "[[request]]\nid = 'c1'\narrival = 1\nprompt_tokens = 5\noutput_tokens = 2\n"
      "[[request]]\nid = 'c0b'\nafter = ['c0']\nprompt_tokens = 5\noutput_tokens = 2\n"
      "[[request]]\nid = 'c1b'\nafter = ['c1']\nprompt_tokens = 5\noutput_tokens = 2\n"
      "[[request]]\nid = 'c0c'\nafter = ['c0b']\nprompt_tokens = 5\noutput_tokens = 2\n";
  const Workload c = parse(convo, {.num_prompts = 4});
  std::vector<std::string> ids;
  for (const RequestSpec& r : c.requests) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"c0", "c1", "c0b", "c0c"}));
  ASSERT_EQ(c.requests[3].after.size(), 1u);
  EXPECT_EQ(c.requests[3].after[0], 2);  // indices rewritten into the kept list
  EXPECT_NE(parse_error(convo, {.num_prompts = 6}).find("has only 5 requests"), std::string::npos);
}

const char* kGenerated =
    "[generate]\nrequests = 20000\nseed = 3\n[generate.arrival]\nprocess = 'constant'\nrate = 1.0\n"
    "[generate.output_tokens]\ndist = 'fixed'\nvalue = 4\n";

// Mean and coefficient of variation of the gaps.
std::pair<double, double> gap_stats(const Workload& w) {
  std::vector<double> gaps;
  for (size_t i = 1; i < w.requests.size(); ++i) {
    gaps.push_back(to_seconds(w.requests[i].arrival - w.requests[i - 1].arrival));
  }
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / static_cast<double>(gaps.size());
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= static_cast<double>(gaps.size());
  return {mean, std::sqrt(var) / mean};
}

TEST(LoadControls, GeneratedWorkloadsDrawPoissonOrGammaArrivalsAtTheRate) {
  const auto [poisson_mean, poisson_cv] = gap_stats(parse(kGenerated, {.request_rate = 8}));
  EXPECT_NEAR(poisson_mean, 1.0 / 8, 0.03 / 8);
  EXPECT_NEAR(poisson_cv, 1.0, 0.03);
  // vLLM's burstiness B: gamma gaps of shape B, so the gaps' cv is 1 / sqrt(B).
  const auto [gamma_mean, gamma_cv] = gap_stats(parse(kGenerated, {.request_rate = 8, .burstiness = 4}));
  EXPECT_NEAR(gamma_mean, 1.0 / 8, 0.03 / 8);
  EXPECT_NEAR(gamma_cv, 0.5, 0.03);
  const auto [own_mean, own_cv] = gap_stats(parse(kGenerated, {.burstiness = 0.25}));
  EXPECT_NEAR(own_mean, 1.0, 0.05);  // the workload's own rate, shaped
  EXPECT_NEAR(own_cv, 2.0, 0.1);
  // num_prompts draws exactly N, in place of `requests`.
  EXPECT_EQ(parse(kGenerated, {.num_prompts = 7}).requests.size(), 7u);
}

// vLLM bench times N requests at rate R so that the last is sent at exactly N / R, the first one
// drawn gap after the start (benchmarks/serve.py, get_request's normalize_factor).
TEST(LoadControls, ACountOfRequestsIsTimedAsVllmBenchTimesIt) {
  const Workload w = parse(kGenerated, {.request_rate = 8, .num_prompts = 1000});
  ASSERT_EQ(w.requests.size(), 1000u);
  EXPECT_NEAR(to_seconds(w.requests.back().arrival), 1000.0 / 8, 1e-6);
  EXPECT_GT(w.requests.front().arrival, 0);
  const Workload even = parse(kGenerated, {.request_rate = 4, .burstiness = INFINITY, .num_prompts = 10});
  for (size_t i = 0; i < even.requests.size(); ++i) {
    EXPECT_NEAR(to_seconds(even.requests[i].arrival), (static_cast<double>(i) + 1) / 4, 1e-9);
  }
}

// Regression: the documented maximum, --num-prompts 10000000, at a --request-rate (one more
// arrival drawn and dropped, as vLLM bench times them) was refused, naming generate.duration, a
// key the file did not have.
TEST(LoadControls, TheLargestNumPromptsIsDrawnAtARate) {
  uint64_t seed = 0;
  Result<toml::table> table = parse_toml(kGenerated, "w.toml");
  ASSERT_TRUE(table.ok());
  const toml::table* generate = table.value().get_as<toml::table>("generate");
  ASSERT_NE(generate, nullptr);
  auto stream = generated_stream(*generate, "w.toml", std::nullopt,
                                 {.request_rate = 5, .num_prompts = kMaxGeneratedRequests}, &seed);
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  ASSERT_NE(stream.value(), nullptr);
  EXPECT_EQ(stream.value()->size(), kMaxGeneratedRequests);
  EXPECT_NE(parse_error(kGenerated, {.num_prompts = kMaxGeneratedRequests + 1}).find("num_prompts"), std::string::npos);
}

TEST(LoadControls, BadCombinationsNameTheKey) {
  EXPECT_NE(parse_error(explicit_requests(), {.burstiness = 2}).find("burstiness: applies to generated"),
            std::string::npos);
  EXPECT_NE(parse_error(explicit_requests(), {.request_rate = 2, .time_scale = 2}).find("time_scale"),
            std::string::npos);
  EXPECT_NE(parse_error(explicit_requests(), {.request_rate = -1}).find("request_rate = -1"),
            std::string::npos);
  EXPECT_NE(parse_error("[[request]]\nprompt_tokens = 1\noutput_tokens = 1\n[[request]]\n"
                        "prompt_tokens = 1\noutput_tokens = 1\n",
                        {.request_rate = 3})
                .find("arrive at the same instant"),
            std::string::npos);
}

// Hand-worked closed loop, unit backend (one iteration = one step), continuous batching: three
// one-token prompts with two output tokens each, all due at 0, at most one in flight. A is sent at 0,
// prefilled in step [0, 1) (first token at 1) and decoded in [1, 2): done at 2. B is sent at 2 and
// done at 4, C sent at 4 and done at 6. Latencies count from the send, as vLLM bench measures them.
TEST(MaxConcurrency, HoldsRequestsUntilASlotFrees) {
  SimOptions options;
  options.limits = {8, 64};
  options.max_concurrency = 1;
  auto run = simulate({spec("A", 0, 1, 2), spec("B", 0, 1, 2), spec("C", 0, 1, 2)}, "continuous",
                      "", options);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  const double sent[] = {0, 2, 4};
  const char* ids[] = {"A", "B", "C"};
  for (int i = 0; i < 3; ++i) {
    const Request& r = run->capture.by_id(ids[i]);
    EXPECT_EQ(testing::secs(r.due), 0) << ids[i];
    EXPECT_EQ(testing::secs(r.arrival), sent[i]) << ids[i];
    EXPECT_EQ(testing::secs(r.first_token), sent[i] + 1) << ids[i];
    EXPECT_EQ(testing::secs(r.finished), sent[i] + 2) << ids[i];
  }
  // Never two in one iteration.
  for (const auto& it : run->capture.iterations) EXPECT_EQ(it.items.size(), 1u);

  // Two slots: A and B together (done at 2), then C (done at 4).
  options.max_concurrency = 2;
  auto two = simulate({spec("A", 0, 1, 2), spec("B", 0, 1, 2), spec("C", 0, 1, 2)}, "continuous",
                      "", options);
  EXPECT_EQ(testing::secs(two->capture.by_id("B").finished), 2);
  EXPECT_EQ(testing::secs(two->capture.by_id("C").arrival), 2);
  EXPECT_EQ(testing::secs(two->capture.by_id("C").finished), 4);
}

TEST(MaxConcurrency, ARejectedRequestFreesItsSlot) {
  SimOptions options;
  options.limits = {8, 64};
  options.max_concurrency = 1;
  options.kv_blocks = 2;  // 32 tokens: a 100-token prompt can never fit
  auto run = simulate({spec("big", 0, 100, 2), spec("A", 0, 1, 2)}, "continuous", "", options);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  EXPECT_EQ(run->capture.by_id("big").status, RequestStatus::kRejected);
  EXPECT_EQ(run->capture.by_id("big").cause, RejectCause::kKvCapacity);
  EXPECT_EQ(testing::secs(run->capture.by_id("A").arrival), 0);
  EXPECT_EQ(testing::secs(run->capture.by_id("A").finished), 2);
}

// Goodput, hand-computed: unit backend, each step 1 s. Four requests at 0 with capacity 2: A (3
// tokens) and B (2) run first; C (2) and D (4) follow when slots free.
TEST(Goodput, CountsRequestsWithinEverySloAndRejectionsAsMisses) {
  SimOptions options;
  options.limits = {2, 64};
  auto run = simulate({spec("A", 0, 1, 3), spec("B", 0, 1, 2), spec("C", 0, 1, 2), spec("D", 0, 1, 4)},
                      "continuous", "", options);
  // A: ttft 1, e2e 3, tpot 1. B: ttft 1, e2e 2. C: admitted at 2: ttft 3, e2e 4. D: admitted at 3:
  // ttft 4, e2e 7, tpot 1.
  EXPECT_EQ(testing::secs(run->capture.by_id("C").first_token), 3);
  EXPECT_EQ(testing::secs(run->capture.by_id("D").finished), 7);
  MetricsAccumulator acc({.max_num_seqs = 2, .replicas = 1, .slo_ttft = 2.5, .slo_e2el = 3.5});
  for (const Request& r : run->capture.requests) acc.on_request(r);
  Request rejected = run->capture.requests.front();
  rejected.status = RequestStatus::kRejected;
  rejected.cause = RejectCause::kContextLength;
  acc.on_request(rejected);
  std::map<std::string, double> m;
  for (const Metric& x : acc.compute()) m[x.name] = x.value;
  // Good: A and B (ttft 1 <= 2.5, e2e 3 and 2 <= 3.5); C misses the TTFT, D both.
  EXPECT_DOUBLE_EQ(m.at("request_goodput"), 2.0 / 7);  // over the duration 0..7
  EXPECT_DOUBLE_EQ(m.at("slo_attainment"), 2.0 / 5);  // the rejected one is a miss
  EXPECT_EQ(m.at("rejected_context_length"), 1);
  EXPECT_EQ(m.count("rejected_kv_capacity"), 0u);
}

// Overload: one replica of capacity 4 that serves a request in 10 steps (0.4 req/step). Arrivals
// at 0.2 per step are carried; at 1 per step the backlog grows by 0.6 per step.
std::unique_ptr<testing::Run> steady(double rate, int n) {
  std::vector<RequestSpec> specs;
  for (int i = 0; i < n; ++i) specs.push_back(spec("r" + std::to_string(i), i / rate, 1, 10));
  SimOptions options;
  options.limits = {4, 64};
  return simulate(specs, "continuous", "", options);
}

BacklogTrend trend(const testing::Run& run) {
  std::vector<Sojourn> intervals;
  for (const Request& r : run.capture.requests) {
    intervals.push_back({testing::secs(r.due), testing::secs(r.finished), testing::secs(r.scheduled)});
  }
  return backlog_trend(intervals);
}

TEST(Overload, AClearlyOverloadedRunIsFlaggedAndAStableOneIsNot) {
  const BacklogTrend stable = trend(*steady(0.2, 400));
  EXPECT_TRUE(stable.known);
  EXPECT_FALSE(stable.overloaded) << stable.growth;
  EXPECT_LT(std::abs(stable.growth), 4);
  EXPECT_LT(stable.share(), 0.04);
  const BacklogTrend over = trend(*steady(1.0, 400));
  EXPECT_TRUE(over.overloaded);
  // Outstanding grows at 1 - 0.4 = 0.6 per step over each 100-step quarter: about 60 requests.
  EXPECT_NEAR(over.growth, 60, 4);
  EXPECT_NEAR(over.arrivals, 100, 1);
  EXPECT_NEAR(over.share(), 0.6, 0.04);
  // Too few requests to tell.
  EXPECT_FALSE(trend(*steady(1.0, 70)).known);
}

TEST(Overload, AClosedLoopCountsFromWhenRequestsWereDue) {
  // The overloaded arrivals behind max_concurrency: in flight stays at 4, but requests wait to be
  // sent, so the backlog (due, not finished) still grows.
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 400; ++i) specs.push_back(spec("r" + std::to_string(i), i, 1, 10));
  SimOptions options;
  options.limits = {4, 64};
  options.max_concurrency = 4;
  auto run = simulate(specs, "continuous", "", options);
  EXPECT_TRUE(trend(*run).overloaded);
}

}  // namespace
}  // namespace servesim
