// A run split by replicas over threads (sim/sharded.h) gives exactly what one thread gives: over
// the generated workloads of independent requests, every policy that can be split and its
// variants, tight and roomy KV memory, several replicas and threads, with and without leaps, the
// same iterations, requests and metrics.
#include <algorithm>
#include <atomic>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "analysis/metrics/metrics.h"
#include "policies/registry.h"
#include "routers/registry.h"
#include "sim/request_stream.h"
#include "sim/sharded.h"
#include "sim/simulator.h"
#include "tests/everything_recorder.h"
#include "tests/generated_workloads.h"
#include "tests/sim_harness.h"

namespace servesim::testing {
namespace {

struct Outcome {
  RunResult result;
  std::vector<IterationRecord> iterations;  // by (replica, step)
  std::vector<std::string> requests;        // sorted
  std::vector<Metric> metrics;
  int32_t groups = 1;
};

std::vector<std::unique_ptr<Policy>> make_policies(const PolicyInfo& policy, const std::string& opts, int32_t n) {
  std::vector<std::unique_ptr<Policy>> policies;
  for (int32_t i = 0; i < n; ++i) policies.push_back(std::move(policy.make(toml::parse(opts)).value()));
  return policies;
}

std::vector<std::unique_ptr<Backend>> make_backends(int32_t n) {
  std::vector<std::unique_ptr<Backend>> backends;
  for (int32_t i = 0; i < n; ++i) backends.push_back(default_roofline());
  return backends;
}

// On one thread (threads 1), or split.
Outcome simulate(const std::vector<RequestSpec>& specs, const PolicyInfo& policy, const std::string& opts,
                 SimOptions o, int32_t threads) {
  o.max_model_len = default_roofline()->max_model_len();
  o.prefix_caching = policy.prefix_caching;
  o.threads = threads;
  MetricsAccumulator metrics(metrics_options(o));
  Everything everything;
  RequestListStream stream(specs);
  std::vector<std::unique_ptr<Policy>> policies = make_policies(policy, opts, o.replicas);
  const std::vector<Recorder*> recorders = {&metrics, &everything};
  Outcome out;
  if (threads == 1) {
    EXPECT_FALSE(ShardedSimulation::possible(o, policies, recorders));
    Simulator sim(stream, o, std::move(policies), make_backends(o.replicas), recorders);
    out.result = sim.run();
  } else {
    EXPECT_TRUE(ShardedSimulation::possible(o, policies, recorders));
    ShardedSimulation sim(stream, o, std::move(policies), make_backends(o.replicas), recorders);
    out.result = sim.run();
    out.groups = sim.groups();
  }
  out.iterations = std::move(everything.iterations);
  out.requests = std::move(everything.requests);
  sort_report(out.iterations, out.requests);
  out.metrics = metrics.compute();
  return out;
}

// The generated workloads whose requests are all independent (a stream's).
std::vector<std::vector<RequestSpec>> independent_workloads() {
  std::vector<std::vector<RequestSpec>> all;
  for (std::vector<RequestSpec>& r : parse_generated_workloads()) {
    if (std::all_of(r.begin(), r.end(), [](const RequestSpec& s) { return s.after.empty(); })) all.push_back(std::move(r));
  }
  return all;
}

void expect_same(const Outcome& split, const Outcome& one) {
  ASSERT_EQ(one.result.outcome, RunOutcome::kDone) << one.result.error;
  ASSERT_EQ(split.result.outcome, RunOutcome::kDone) << split.result.error;
  expect_same_report(split, one, /*with_groups=*/true);
}

class Sharded : public ::testing::TestWithParam<std::string> {};

TEST_P(Sharded, GivesExactlyTheResultsOfOneThread) {
  const PolicyInfo& policy = *find_policy(GetParam()).value();
  const std::vector<std::vector<RequestSpec>> all = independent_workloads();
  ASSERT_GE(all.size(), 2u);
  for (size_t w = 0; w < all.size(); ++w) {
    for (const std::string& opts : variants(GetParam())) {
      for (const auto& [kv_blocks, replicas, threads] :
           {std::tuple<int64_t, int32_t, int32_t>{-1, 2, 2}, {300, 3, 2}, {300, 5, 3}, {-1, 4, 8}}) {
        SCOPED_TRACE("workload " + std::to_string(w) + " [" + opts + "] kv_blocks=" + std::to_string(kv_blocks) +
                     " replicas=" + std::to_string(replicas) + " threads=" + std::to_string(threads));
        const SimOptions o = generated_options(kv_blocks, replicas);
        const Outcome one = simulate(all[w], policy, opts, o, 1);
        const Outcome split = simulate(all[w], policy, opts, o, threads);
        EXPECT_EQ(split.groups, std::min(threads, replicas));
        expect_same(split, one);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Stepping every iteration (no leaps, every item listed) splits the same way.
TEST_P(Sharded, GivesTheResultsOfOneThreadWithoutLeaps) {
  const PolicyInfo& policy = *find_policy(GetParam()).value();
  const std::vector<std::vector<RequestSpec>> all = independent_workloads();
  SimOptions o = generated_options(300, 3);
  o.leap = false;
  expect_same(simulate(all.front(), policy, "", o, 3), simulate(all.front(), policy, "", o, 1));
}

std::vector<std::string> splittable_policies() {
  std::vector<std::string> names;
  for (const std::string& name : registered_policies()) {
    if (!find_policy(name).value()->make(toml::table{}).value()->asks_about_arrivals()) names.push_back(name);
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(EverySplittablePolicy, Sharded, ::testing::ValuesIn(splittable_policies()),
                         policy_test_name);

TEST(ShardedRuns, SplitsOnlyRunsWhoseReplicasDependOnNothingElse) {
  const PolicyInfo& chunked = *find_policy("chunked-prefill").value();
  const PolicyInfo& fixed = *find_policy("static").value();
  MetricsAccumulator metrics(MetricsOptions{});
  Recorder plain;  // cannot shard
  const std::vector<Recorder*> recorders = {&metrics};
  SimOptions o = generated_options(-1, 4);
  o.threads = 2;
  EXPECT_TRUE(ShardedSimulation::possible(o, make_policies(chunked, "", 4), recorders));
  EXPECT_FALSE(ShardedSimulation::possible(o, make_policies(fixed, "", 4), recorders));  // asks about arrivals
  EXPECT_FALSE(ShardedSimulation::possible(o, make_policies(chunked, "", 4), {&metrics, &plain}));
  SimOptions one = o;
  one.threads = 1;
  EXPECT_FALSE(ShardedSimulation::possible(one, make_policies(chunked, "", 4), recorders));
  SimOptions single = generated_options(-1, 1);
  single.threads = 2;
  EXPECT_FALSE(ShardedSimulation::possible(single, make_policies(chunked, "", 1), recorders));
  SimOptions closed = generated_options(-1, 4, 10);
  closed.threads = 2;
  EXPECT_FALSE(ShardedSimulation::possible(closed, make_policies(chunked, "", 4), recorders));
  for (const RouterInfo& router : router_registry()) {
    SimOptions routed = o;
    routed.router = [&router] { return router.make(toml::table{}, 7).value(); };
    EXPECT_EQ(ShardedSimulation::possible(routed, make_policies(chunked, "", 4), recorders),
              std::string(router.name) == "round-robin")
        << router.name;
  }
  SimOptions disaggregated = o;
  disaggregated.roles = {ReplicaRole::kPrefill, ReplicaRole::kPrefill, ReplicaRole::kDecode, ReplicaRole::kDecode};
  disaggregated.links.assign(4, SimOptions::LinkEnd{1e9, 0});
  EXPECT_FALSE(ShardedSimulation::possible(disaggregated, make_policies(chunked, "", 4), recorders));
}

// Each group's requests are in order while the stream's are not: the split run finds it, with the
// message of the run on one thread.
TEST(ShardedRuns, ChecksTheWholeStreamsOrder) {
  const PolicyInfo& policy = *find_policy("continuous").value();
  // Round robin over 2 replicas: r0 and r2 to replica 0 (0 s, 1 s), r1 and r3 to replica 1 (2 s, 3 s).
  const std::vector<RequestSpec> specs = {spec("r0", 0, 100, 10), spec("r1", 2, 100, 10),
                                          spec("r2", 1, 100, 10), spec("r3", 3, 100, 10)};
  const SimOptions o = generated_options(-1, 2);
  const Outcome one = simulate(specs, policy, "", o, 1);
  const Outcome split = simulate(specs, policy, "", o, 2);
  ASSERT_EQ(one.result.outcome, RunOutcome::kFailed);
  EXPECT_NE(one.result.error.find("request 'r2' of the stream arrives out of order"), std::string::npos)
      << one.result.error;
  EXPECT_EQ(split.result.outcome, RunOutcome::kFailed);
  EXPECT_EQ(split.result.error, one.result.error);
  EXPECT_TRUE(split.result.bad_input);
}

// A stop ends every group; each request that arrived is recorded once, finished or not.
TEST(ShardedRuns, AStopEndsEveryGroup) {
  const PolicyInfo& policy = *find_policy("chunked-prefill").value();
  const std::vector<RequestSpec> specs = independent_workloads().front();
  for (const int64_t stop_after : {int64_t{0}, int64_t{40}}) {
    SCOPED_TRACE(stop_after);
    SimOptions o = generated_options(-1, 4);
    o.max_model_len = default_roofline()->max_model_len();
    o.threads = 2;
    std::atomic<bool> stop{stop_after == 0};
    std::atomic<int64_t> settled{0};
    MetricsAccumulator metrics(metrics_options(o));
    Everything everything(&settled, stop_after, &stop);
    RequestListStream stream(specs);
    ShardedSimulation sim(stream, o, make_policies(policy, "", 4), make_backends(4), {&metrics, &everything});
    const RunResult result = sim.run(&stop);
    EXPECT_EQ(result.outcome, RunOutcome::kInterrupted);
    EXPECT_LT(everything.requests.size(), specs.size());
    std::set<std::string> ids;
    for (const std::string& r : everything.requests) ids.insert(r.substr(0, r.find(' ')));
    EXPECT_EQ(ids.size(), everything.requests.size());  // none twice
  }
}

}  // namespace
}  // namespace servesim::testing
