// Test helpers: run a policy over a list of requests in-process with the unit backend and capture
// what the recorders saw.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "analysis/metrics/metrics.h"
#include "backends/roofline_backend.h"
#include "backends/unit.h"
#include "policies/registry.h"
#include "sim/recorder.h"
#include "sim/simulator.h"

namespace servesim::testing {

struct CapturedItem {
  int32_t index;
  int32_t new_tokens;
  int32_t context_tokens;
  bool padding;
  bool emitted;
};

struct CapturedIteration {
  IterationRecord record;
  std::vector<CapturedItem> items;
};

class CaptureRecorder : public Recorder {
 public:
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override {
    CapturedIteration c{it, {}};
    for (const BatchItem& b : items) {
      c.items.push_back({b.seq->index, b.new_tokens, b.context_tokens, b.padding, b.emitted});
    }
    iterations.push_back(std::move(c));
  }
  void on_request(const Request& r) override { requests.push_back(r); }
  void on_run_end(RunOutcome how, const std::string& why) override {
    ++ends;
    outcome = how;
    error = why;
  }
  std::vector<CapturedIteration> iterations;
  std::vector<Request> requests;  // copies, in the order they were settled
  int ends = 0;
  RunOutcome outcome = RunOutcome::kDone;
  std::string error;

  const Request& by_id(const std::string& id) const {
    for (const Request& r : requests) {
      if (r.id() == id) return r;
    }
    ADD_FAILURE() << "no request " << id;
    return requests.front();
  }
};

// A backend whose every iteration lasts `duration` (the unit backend's one step, stretched; kNever
// for a cost model that priced it beyond any time).
class StretchedBackend : public Backend {
 public:
  explicit StretchedBackend(Time duration) : duration_(duration) {}
  IterationResult run(const Batch&) override { return {duration_, -1}; }
  int64_t kv_blocks(int32_t) const override { return -1; }
  std::string_view name() const override { return "stretched"; }

 private:
  Time duration_;
};

inline RequestSpec spec(std::string id, double arrival_s, int32_t prompt, int32_t output,
                        int32_t max_tokens = 0) {
  RequestSpec s;
  s.id = std::move(id);
  s.arrival = from_seconds(arrival_s);
  s.prompt_tokens = prompt;
  s.output_tokens = output;
  s.max_tokens = max_tokens;
  return s;
}

struct Run {
  std::vector<RequestSpec> specs;  // owned: requests point at their specs
  std::unique_ptr<Simulator> sim;
  CaptureRecorder capture;
  RunResult result;
};

// Runs `policy` (with [policy] options given as TOML text) over specs with the unit backend, or,
// given `iteration`, a StretchedBackend whose every iteration lasts that long.
inline std::unique_ptr<Run> simulate(const std::vector<RequestSpec>& specs, const std::string& policy,
                                     const std::string& options_toml, SimOptions options,
                                     Time iteration = 0) {
  auto run = std::make_unique<Run>();
  run->specs = specs;
  Result<const PolicyInfo*> info = find_policy(policy);
  EXPECT_TRUE(info.ok()) << policy;
  toml::table opts = toml::parse(options_toml);
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<std::unique_ptr<Backend>> backends;
  for (int32_t i = 0; i < options.replicas; ++i) {
    Result<std::unique_ptr<Policy>> p = info.value()->make(opts);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    policies.push_back(std::move(p.value()));
    if (iteration == 0) {
      backends.push_back(std::make_unique<UnitBackend>());
    } else {
      backends.push_back(std::make_unique<StretchedBackend>(iteration));
    }
  }
  options.prefix_caching = info.value()->prefix_caching;
  run->sim = std::make_unique<Simulator>(run->specs, options, std::move(policies), std::move(backends),
                                         std::vector<Recorder*>{&run->capture});
  run->result = run->sim->run();
  return run;
}

inline double secs(Time t) { return to_seconds(t); }

// Every registered policy's name, for suites that run one body per policy, and the test name of
// one ("chunked-prefill" -> "chunked_prefill").
inline std::vector<std::string> registered_policies() {
  std::vector<std::string> names;
  for (const PolicyInfo& p : policy_registry()) names.emplace_back(p.name);
  return names;
}
inline std::string policy_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n) {
    if (c == '-') c = '_';
  }
  return n;
}

// The roofline backend of the defaults (Llama-3-8B on an A100-80GB), from the checkout's data/.
inline std::unique_ptr<Backend> default_roofline() {
  const std::string data = std::string(SERVESIM_PROJECT_DIR) + "/data/";
  BackendSetup setup;
  setup.hardware = data + "hardware/a100-80gb.toml";
  setup.model = data + "models/llama-3-8b.json";
  return std::move(make_roofline_backend(setup).value());
}

// Metrics options for a run with these simulation options.
inline MetricsOptions metrics_options(const SimOptions& o) {
  MetricsOptions mo;
  mo.max_num_seqs = o.limits.max_num_seqs;
  mo.replicas = o.replicas;
  mo.prefix_caching = o.prefix_caching;
  return mo;
}

// The seeds' five-request example: capacity 3; A 0/3, B 0/8, C 0/5, D 2/4, E 4/3 (arrival/output).
inline std::vector<RequestSpec> toy() {
  return {spec("A", 0, 1, 3), spec("B", 0, 1, 8), spec("C", 0, 1, 5), spec("D", 2, 1, 4),
          spec("E", 4, 1, 3)};
}

inline SimOptions capacity(int32_t seqs) {
  SimOptions o;
  o.limits.max_num_seqs = seqs;
  return o;
}

}  // namespace servesim::testing
