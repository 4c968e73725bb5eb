// Leaping over repeating decode iterations (Replica::leap) is an optimisation, never an
// approximation: over the generated workloads, every policy and variant, tight and roomy KV memory,
// one and three replicas, open and closed loops, and requests that follow one or several others,
// the roofline run with leaps gives exactly the requests, iterations and metrics of the run that
// steps one iteration at a time.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <tuple>

#include <gtest/gtest.h>

#include "analysis/metrics/metrics.h"
#include "backends/roofline.h"
#include "backends/roofline_backend.h"
#include "policies/registry.h"
#include "sim/simulator.h"
#include "routers/registry.h"
#include "tests/everything_recorder.h"
#include "tests/generated_workloads.h"
#include "tests/sim_harness.h"
#include "workloads/workload.h"

namespace servesim::testing {
namespace {

const std::string kData = std::string(SERVESIM_PROJECT_DIR) + "/data/";

struct Outcome {
  RunResult result;
  std::vector<IterationRecord> iterations;  // by (replica, step)
  std::vector<std::string> requests;        // sorted
  std::vector<Metric> metrics;
  int64_t leapt = 0;
  int64_t past_arrivals = 0;  // arrivals that leaps went on past
};

Outcome simulate(const std::vector<RequestSpec>& specs, const PolicyInfo& policy,
                 const std::string& opts, SimOptions o, bool leap) {
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<std::unique_ptr<Backend>> backends;
  for (int32_t i = 0; i < o.replicas; ++i) {
    policies.push_back(std::move(policy.make(toml::parse(opts)).value()));
    backends.push_back(default_roofline());
  }
  o.max_model_len = backends.front()->max_model_len();
  o.prefix_caching = policy.prefix_caching;
  o.leap = leap;
  MetricsAccumulator metrics(metrics_options(o));
  Everything everything;
  Simulator sim(specs, o, std::move(policies), std::move(backends), {&metrics, &everything});
  Outcome out;
  out.result = sim.run();
  out.iterations = std::move(everything.iterations);
  out.requests = std::move(everything.requests);
  sort_report(out.iterations, out.requests);
  out.metrics = metrics.compute();
  out.leapt = sim.leapt_iterations();
  out.past_arrivals = sim.arrivals_leapt_past();
  return out;
}

// The generated workloads, and the first with some requests following two others.
std::vector<std::vector<RequestSpec>> workloads() {
  std::vector<std::vector<RequestSpec>> all = parse_generated_workloads();
  std::vector<RequestSpec> dag = all.front();
  for (size_t i = 10; i < dag.size(); i += 10) {
    dag[i].after = {static_cast<int32_t>(i - 3), static_cast<int32_t>(i - 7)};
    dag[i].think_time = from_seconds(0.05);
  }
  all.push_back(std::move(dag));
  return all;
}

// Runs `specs` stepping every iteration and leaping; both must finish with the same requests and
// iteration rows. Adds the iterations leapt to `leapt`.
void expect_leaps_as_it_steps(const std::vector<RequestSpec>& specs, const PolicyInfo& policy, const SimOptions& o,
                              int64_t& leapt) {
  const Outcome stepped = simulate(specs, policy, "", o, false);
  const Outcome leaping = simulate(specs, policy, "", o, true);
  ASSERT_EQ(stepped.result.outcome, RunOutcome::kDone) << stepped.result.error;
  ASSERT_EQ(leaping.result.outcome, RunOutcome::kDone) << leaping.result.error;
  leapt += leaping.leapt;
  expect_same_report(leaping, stepped, /*with_groups=*/false);
}

class Leap : public ::testing::TestWithParam<std::string> {};

TEST_P(Leap, GivesExactlyTheResultsOfSteppingEveryIteration) {
  const PolicyInfo& policy = *find_policy(GetParam()).value();
  int64_t leapt = 0, iterations = 0, beside_prefills = 0, past_arrivals = 0, beside_preemptions = 0;
  const std::vector<std::vector<RequestSpec>> all = workloads();
  for (size_t w = 0; w < all.size(); ++w) {
    for (const std::string& opts : variants(GetParam())) {
      for (const auto& [kv_blocks, replicas, concurrency] :
           {std::tuple<int64_t, int32_t, int64_t>{-1, 1, 0}, {-1, 3, 0}, {300, 1, 0}, {300, 3, 0},
            {300, 1, 12}, {-1, 3, 12}}) {
        SCOPED_TRACE("workload " + std::to_string(w) + " [" + opts + "] kv_blocks=" +
                     std::to_string(kv_blocks) + " replicas=" + std::to_string(replicas) +
                     " max_concurrency=" + std::to_string(concurrency));
        const SimOptions o = generated_options(kv_blocks, replicas, concurrency);
        const Outcome stepped = simulate(all[w], policy, opts, o, false);
        const Outcome leaping = simulate(all[w], policy, opts, o, true);
        ASSERT_EQ(stepped.result.outcome, RunOutcome::kDone) << stepped.result.error;
        ASSERT_EQ(leaping.result.outcome, RunOutcome::kDone) << leaping.result.error;
        EXPECT_EQ(stepped.leapt, 0);
        leapt += leaping.leapt;
        past_arrivals += leaping.past_arrivals;
        iterations += static_cast<int64_t>(stepped.iterations.size());
        for (const IterationRecord& it : stepped.iterations) ASSERT_EQ(it.grouped, 0);
        for (const IterationRecord& it : leaping.iterations) {
          if (it.grouped > 0 && it.prefill_tokens > 0) ++beside_prefills;
          if (it.grouped > 0 && it.preempted > 0) ++beside_preemptions;
        }

        expect_same_report(leaping, stepped, /*with_groups=*/false);
        if (HasFatalFailure()) return;
      }
    }
  }
  // Static batching never leaps or groups decodes (its batches hold padding or wait); every other
  // policy must, leaping and grouping the decodes that run beside prefills, or this test would
  // compare nothing.
  if (GetParam() == "static") {
    EXPECT_EQ(leapt, 0);
    EXPECT_EQ(beside_prefills, 0);
    EXPECT_EQ(past_arrivals, 0);
    EXPECT_EQ(beside_preemptions, 0);
  } else {
    EXPECT_GT(leapt, iterations / 10) << "of " << iterations;
    EXPECT_GT(beside_prefills, iterations / 100) << "of " << iterations;
    EXPECT_GT(past_arrivals, 0);  // behind a blocked head (Policy::decode_batch_ignores_arrivals)
    // The members before the first that finds no free block stay a group while the policy
    // preempts for the rest (schedule_decode_group).
    EXPECT_GT(beside_preemptions, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, Leap, ::testing::ValuesIn(registered_policies()),
                         policy_test_name);

// Routers that read the replicas' state (KV use, requests in flight, prefix caches) see, at every
// arrival, exactly what stepping every iteration would show them: leaps stop at arrivals anywhere.
TEST(LeapRouters, EveryRouterGivesTheResultsOfStepping) {
  const std::vector<std::vector<RequestSpec>> all = workloads();
  int64_t leapt = 0;
  for (const RouterInfo& router : router_registry()) {
    const PolicyInfo& policy = *find_policy(router.needs_prefix_caching ? "prefix-cached" : "chunked-prefill").value();
    for (size_t w = 0; w < all.size(); ++w) {
      for (const auto& [kv_blocks, affinity] : {std::pair<int64_t, bool>{-1, true}, {300, true}, {300, false}}) {
        SCOPED_TRACE(std::string(router.name) + " workload " + std::to_string(w) + " kv_blocks=" +
                     std::to_string(kv_blocks) + " session_affinity=" + std::to_string(affinity));
        SimOptions o = generated_options(kv_blocks, 3);
        o.session_affinity = affinity;
        o.router = [&router] { return router.make(toml::table{}, 7).value(); };
        expect_leaps_as_it_steps(all[w], policy, o, leapt);
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(leapt, 0);
}

// Every block size, those of more than 64 tokens included (the leap then keeps its buckets' bits
// in several words), with and without prefix caching, and with the cache scarce enough to preempt.
TEST(LeapBlockSizes, EveryBlockSizeGivesTheResultsOfStepping) {
  const std::vector<std::vector<RequestSpec>> all = workloads();
  for (const char* name : {"continuous", "prefix-cached"}) {
    const PolicyInfo& policy = *find_policy(name).value();
    for (const int32_t block_size : {1, 8, 64, 128, 256}) {
      int64_t leapt = 0;
      for (const int64_t tokens : {int64_t{-1}, int64_t{4800}}) {  // the memory's blocks, or few
        SCOPED_TRACE(std::string(name) + " block_size=" + std::to_string(block_size) + " tokens=" +
                     std::to_string(tokens));
        SimOptions o = generated_options(tokens < 0 ? -1 : tokens / block_size, 1);
        o.block_size = block_size;
        expect_leaps_as_it_steps(all[0], policy, o, leapt);
        if (HasFatalFailure()) return;
      }
      EXPECT_GT(leapt, 0) << name << " block_size=" << block_size;
    }
  }
}

// A run stopped midway logs every request it did not finish with the tokens it got so far, those
// of the decode group's members included (their counters follow the group lazily): summed over
// every request logged, the output tokens are the tokens the iterations reported emitting.
TEST(LeapStopped, UnfinishedRequestsKeepTheTokensTheyGot) {
  class StopAfter : public Recorder {
   public:
    explicit StopAfter(int64_t iterations) : left_(iterations) {}
    bool accepts_grouped_decodes() const override { return true; }
    void on_iteration(const IterationRecord& it, std::span<const BatchItem> /*items*/) override {
      emitted += it.emitted;
      if (--left_ == 0) stop.store(true);
    }
    void on_request(const Request& r) override {
      outputs += r.num_output;
      if (r.finished < 0 && r.num_output > 0) ++unfinished_with_tokens;
    }
    std::atomic<bool> stop{false};
    int64_t emitted = 0, outputs = 0, unfinished_with_tokens = 0;

   private:
    int64_t left_;
  };
  const std::vector<std::vector<RequestSpec>> all = workloads();
  for (const char* name : {"continuous", "chunked-prefill"}) {
    const PolicyInfo& policy = *find_policy(name).value();
    for (const int64_t after : {25, 100, 400}) {
      SCOPED_TRACE(std::string(name) + " stopped after " + std::to_string(after) + " iterations");
      SimOptions o = generated_options(300, 1);
      std::vector<std::unique_ptr<Policy>> policies;
      std::vector<std::unique_ptr<Backend>> backends;
      policies.push_back(std::move(policy.make(toml::table{}).value()));
      backends.push_back(default_roofline());
      o.max_model_len = backends.front()->max_model_len();
      StopAfter recorder(after);
      Simulator sim(all[0], o, std::move(policies), std::move(backends), {&recorder});
      const RunResult result = sim.run(&recorder.stop);
      ASSERT_EQ(result.outcome, RunOutcome::kInterrupted);
      EXPECT_GT(sim.leapt_iterations(), 0);
      EXPECT_GT(recorder.unfinished_with_tokens, 0);
      EXPECT_EQ(recorder.outputs, recorder.emitted);
    }
  }
}

// The roofline's run of decodes gives each step exactly the duration that pricing that step's
// batch on its own gives, within a nanosecond of the floating-point price.
TEST(LeapRoofline, DecodeRunStepsEqualPricingEachBatch) {
  for (const char* hw : {"a100-80gb", "t4", "h100-sxm"}) {
    RooflineOptions ro;
    ro.weights = ro.kv = ro.activations = DType::kFp16;
    const RooflineModel rm(load_hardware(kData + "hardware/" + hw + ".toml").value(),
                           load_model(kData + "models/llama-3-8b.json").value(), ro);
    std::vector<Request> requests(5);
    Batch batch;
    for (size_t i = 0; i < requests.size(); ++i) {
      requests[i].prompt_tokens = static_cast<int32_t>(100 + 37 * i);
      requests[i].num_output = static_cast<int32_t>(1 + i);
      requests[i].num_computed = requests[i].num_tokens() - 1;
    }
    for (Request& r : requests) batch.items.push_back({&r, 1, r.num_computed});
    DecodeDurations run;
    ASSERT_TRUE(rm.decode_durations(batch, run)) << hw;
    DecodeDurationCursor cursor(run);
    const DecodeDurations later = run.shifted(57);
    for (int step = 0; step < 200; ++step) {
      DecodeDurations alone;
      ASSERT_TRUE(rm.decode_durations(batch, alone));
      const Time d = run.at(step);
      EXPECT_EQ(alone.at(0), d) << hw << " step " << step;
      EXPECT_EQ(cursor.next(), d) << hw << " step " << step;
      if (step >= 57) {
        EXPECT_EQ(later.at(step - 57), d) << hw << " step " << step;
      }
      EXPECT_LE(std::abs(d - priced_duration(rm.price(batch).total())), 1) << hw << " step " << step;
      if (step > 0) {
        EXPECT_GT(d, run.at(step - 1)) << hw << " step " << step;  // the attention grows
      }
      for (size_t i = 0; i < requests.size(); ++i) {
        ++requests[i].num_output;
        ++requests[i].num_computed;
        batch.items[i].context_tokens = requests[i].num_computed;
      }
    }
    // A prefill chunk is not a decode run.
    batch.items.front().new_tokens = 2;
    EXPECT_FALSE(rm.decode_durations(batch, run));
  }
}

// The cursor's additions give at(j), whatever the carries, up to the largest parts allowed.
TEST(LeapRoofline, DurationCursorEqualsClosedForm) {
  constexpr int64_t kOne = DecodeDurations::kOne;
  const DecodeDurations cases[] = {{5, 0, 0, 1, 0},
                                   {1000, kOne - 1, kOne / 2, 1, 7},
                                   {7, 3 * kOne + 12345, 999, 4, 1 << 20},
                                   {123456789, ((int64_t{1} << 62) - 1) / 3, (int64_t{1} << 62) - 1, 3, 11}};
  for (const DecodeDurations& d : cases) {
    DecodeDurationCursor cursor(d);
    for (int64_t j = 0; j < 5000; ++j) {
      const Wide exact = (static_cast<Wide>(d.per_context) * (d.context_sum + j * d.count) + d.fixed) / kOne;
      ASSERT_EQ(d.at(j), d.rest + static_cast<Time>(exact)) << j;
      ASSERT_EQ(cursor.next(), d.at(j)) << j;
    }
  }
}

// A leap sums a stretch of iterations at once (DecodeDurationCursor::sum): the same total, last
// duration and following durations as calling next() for each.
TEST(LeapRoofline, DurationCursorSumEqualsItsSteps) {
  constexpr int64_t kOne = DecodeDurations::kOne;
  const DecodeDurations cases[] = {{5, 0, 0, 1, 0},
                                   {1000, kOne - 1, kOne / 2, 1, 7},
                                   {7, 3 * kOne + 12345, 999, 4, 1 << 20},
                                   {3, kOne / 3 + 1, kOne - 1, 5, 2},
                                   {123456789, ((int64_t{1} << 62) - 1) / 3, (int64_t{1} << 62) - 1, 3, 11}};
  for (const DecodeDurations& d : cases) {
    for (const int64_t n : {1, 2, 3, 5, 15, 16, 17, 64, 300}) {
      for (const int64_t from : {0, 1, 6, 1000}) {
        DecodeDurationCursor stepped(d.shifted(from)), summed(d.shifted(from));
        Time total = 0, last = -1;
        for (int64_t i = 0; i < n; ++i) total += last = stepped.next();
        Time summed_last = -1;
        ASSERT_EQ(summed.sum(n, &summed_last), total) << "n " << n << " from " << from;
        ASSERT_EQ(summed_last, last) << "n " << n << " from " << from;
        for (int i = 0; i < 40; ++i) ASSERT_EQ(summed.next(), stepped.next()) << "n " << n << " from " << from;
      }
    }
  }
}

// A decode group is priced as the same decodes listed as items, beside a prefill or alone.
TEST(LeapRoofline, DecodeGroupIsPricedAsItsItems) {
  for (const char* hw : {"a100-80gb", "t4", "h100-sxm"}) {
    const RooflineModel rm(load_hardware(kData + "hardware/" + hw + ".toml").value(),
                           load_model(kData + "models/llama-3-8b.json").value(), RooflineOptions{});
    ASSERT_TRUE(rm.prices_decode_groups()) << hw;
    std::vector<Request> requests(6);
    Batch listed, grouped;
    for (size_t i = 0; i < requests.size(); ++i) {
      Request& r = requests[i];
      r.prompt_tokens = static_cast<int32_t>(300 + 91 * i);
      r.num_output = i + 1 < requests.size() ? static_cast<int32_t>(2 + i) : 0;
      r.num_computed = i + 1 < requests.size() ? r.num_tokens() - 1 : 0;
      if (i + 1 < requests.size()) {
        listed.items.push_back({&r, 1, r.num_computed});
        ++grouped.group;
        grouped.group_context += r.num_computed;
      }
    }
    EXPECT_EQ(rm.price(grouped).total(), rm.price(listed).total()) << hw;
    Request& prefill = requests.back();
    listed.items.push_back({&prefill, 200, 0});
    grouped.items.push_back({&prefill, 200, 0});
    EXPECT_EQ(rm.price(grouped).total(), rm.price(listed).total()) << hw;
    EXPECT_GT(rm.price(grouped).total(), rm.price(Batch{{{&prefill, 200, 0}}}).total()) << hw;
  }
}

}  // namespace
}  // namespace servesim::testing
