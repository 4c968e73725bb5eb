// One suite, every registered policy: over generated workloads, with unlimited and with tight KV
// memory, the same invariants must hold (ns-3 style: one test body for every implementation).
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/generated_workloads.h"
#include "tests/sim_harness.h"
#include "workloads/workload.h"

namespace servesim::testing {
namespace {

// Checks, iteration by iteration, what must hold whatever the policy.
class InvariantChecker : public Recorder {
 public:
  InvariantChecker(const SimOptions& o, bool token_budget) : o_(o), budget_(token_budget) {}

  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override {
    Time& end = replica_end_[it.replica];
    EXPECT_GE(it.start, end) << "time went backwards on replica " << it.replica;
    EXPECT_GT(it.duration, 0);
    end = it.start + it.duration;
    EXPECT_LE(it.num_seqs, o_.limits.max_num_seqs);
    if (it.kv_blocks_total >= 0) {
      EXPECT_LE(it.kv_blocks_used, it.kv_blocks_total);
    }
    int64_t tokens = 0;
    std::set<const Sequence*> seen;
    for (const BatchItem& b : items) {
      EXPECT_TRUE(seen.insert(b.seq).second) << "a sequence appears twice in one batch";
      EXPECT_GE(b.new_tokens, 1);
      if (b.padding) continue;
      tokens += b.new_tokens;
      if (b.emitted) ++emitted_[b.seq->index];
    }
    if (budget_) {
      EXPECT_LE(tokens, o_.limits.max_num_batched_tokens);
    }
  }

  void on_request(const Request& r) override { ++settled_[r.index]; }

  std::map<int32_t, int> settled_;
  std::map<int32_t, int64_t> emitted_;

 private:
  SimOptions o_;
  bool budget_;
  std::map<int32_t, Time> replica_end_;
};

std::string fingerprint(const CaptureRecorder& c) {
  std::ostringstream out;
  for (const auto& it : c.iterations) {
    out << it.record.replica << ' ' << it.record.start << ' ' << it.record.num_seqs << ' '
        << it.record.prefill_tokens << ' ' << it.record.decode_tokens << '\n';
  }
  for (const Request& r : c.requests) {
    out << r.id() << ' ' << r.scheduled << ' ' << r.first_token << ' ' << r.finished << ' '
        << r.num_output << ' ' << r.preemptions << '\n';
  }
  return out.str();
}

class PolicyInvariants : public ::testing::TestWithParam<std::string> {};

TEST_P(PolicyInvariants, HoldOnGeneratedWorkloads) {
  const std::string policy = GetParam();
  const PolicyInfo* info = find_policy(policy).value();
  for (const char* text : kWorkloads) {
    Result<Workload> w = parse_workload(text, "invariants.toml", std::nullopt);
    ASSERT_TRUE(w.ok()) << w.error().message;
    const std::vector<RequestSpec>& specs = w.value().requests;
    for (int64_t kv_blocks : {int64_t{-1}, int64_t{256}}) {
      for (int32_t replicas : {1, 2}) {
        for (const std::string& opts : variants(policy)) {
          SCOPED_TRACE(policy + " [" + opts + "] kv_blocks=" + std::to_string(kv_blocks) +
                       " replicas=" + std::to_string(replicas));
          SimOptions o = generated_options(kv_blocks, replicas);
          o.prefix_caching = info->prefix_caching;
          InvariantChecker checker(o, policy != "static");
          CaptureRecorder capture;
          std::vector<std::unique_ptr<Policy>> policies;
          std::vector<std::unique_ptr<Backend>> backends;
          for (int32_t i = 0; i < replicas; ++i) {
            policies.push_back(std::move(info->make(toml::parse(opts)).value()));
            backends.push_back(std::make_unique<UnitBackend>());
          }
          Simulator sim(specs, o, std::move(policies), std::move(backends), {&checker, &capture});
          const RunResult result = sim.run();
          ASSERT_EQ(result.outcome, RunOutcome::kDone) << result.error;
          EXPECT_EQ(capture.ends, 1);

          // No request lost or settled twice; every output token produced exactly once.
          ASSERT_EQ(checker.settled_.size(), specs.size());
          for (const auto& [index, count] : checker.settled_) EXPECT_EQ(count, 1) << index;
          size_t rejected = 0;
          for (const Request& r : sim.requests()) {
            if (r.status == RequestStatus::kRejected) {
              ++rejected;
              EXPECT_FALSE(r.reason.empty());
              continue;
            }
            EXPECT_EQ(r.status, RequestStatus::kDone) << r.id();
            EXPECT_EQ(r.num_output, std::min(r.spec->output_tokens, r.max_tokens)) << r.id();
            EXPECT_EQ(checker.emitted_[r.index], r.num_output) << r.id();
            EXPECT_LE(r.arrival, r.scheduled);
            EXPECT_LT(r.scheduled, r.first_token);
            EXPECT_LE(r.first_token, r.finished);
          }
          if (kv_blocks < 0) {
            EXPECT_EQ(rejected, 0u);
          }
          // All KV blocks are free at the end.
          for (int32_t i = 0; i < replicas; ++i) EXPECT_EQ(sim.replica(i).kv_blocks_used(), 0);

          // The same inputs give the same rows.
          auto again = simulate(specs, policy, opts, o);
          EXPECT_EQ(fingerprint(again->capture), fingerprint(capture));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PolicyInvariants, ::testing::ValuesIn(registered_policies()),
                         policy_test_name);

TEST(PolicyRegistry, NamesAreUniqueAndUnknownNamesListTheKnown) {
  std::set<std::string> names;
  for (const PolicyInfo& p : policy_registry()) EXPECT_TRUE(names.insert(std::string(p.name)).second);
  Result<const PolicyInfo*> bad = find_policy("fifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("static"), std::string::npos);
  EXPECT_NE(bad.error().message.find("continuous"), std::string::npos);
}

TEST(PolicyRegistry, OptionsAreChecked) {
  const PolicyInfo* s = find_policy("static").value();
  auto bad = s->make(toml::parse("release = \"sometimes\""));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("policy.release"), std::string::npos);
  auto unknown = s->make(toml::parse("kv_reserve = \"max\""));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown key"), std::string::npos);
  auto negative = s->make(toml::parse("max_wait = -1"));
  EXPECT_FALSE(negative.ok());
}

}  // namespace
}  // namespace servesim::testing
