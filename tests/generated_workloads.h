// Generated workloads and policy option variants shared by the suites that run every policy over
// them (policy_invariants_test, leap_test).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/simulator.h"
#include "workloads/workload.h"

namespace servesim::testing {

inline const char* kWorkloads[] = {
    R"([generate]
requests = 300
seed = 11
[generate.arrival]
process = "poisson"
rate = 20.0
[generate.prompt_tokens]
dist = "lognormal"
median = 200.0
sigma = 1.0
max = 2000
[generate.output_tokens]
dist = "pareto"
shape = 1.5
scale = 10
max = 400
[generate.priority]
values = [0, 1, 2]
)",
    R"([generate]
requests = 200
seed = 12
[generate.arrival]
process = "all-at-once"
[generate.prompt_tokens]
dist = "uniform"
min = 1
max = 64
[generate.output_tokens]
dist = "uniform"
min = 1
max = 50
)",
    R"([generate]
requests = 300
seed = 13
[generate.arrival]
process = "gamma"
rate = 30.0
cv = 3.0
[generate.prompt_tokens]
dist = "normal"
mean = 300.0
std = 150.0
[generate.output_tokens]
dist = "zipf"
exponent = 1.1
n = 500
)",
    // Shared prefixes and multi-turn conversations: prefix hits, dependencies, think times.
    R"([generate]
requests = 60
seed = 14
[generate.arrival]
process = "poisson"
rate = 4.0
[generate.prompt_tokens]
dist = "uniform"
min = 8
max = 200
[generate.output_tokens]
dist = "uniform"
min = 1
max = 120
[generate.prefixes]
share = 0.7
count = 3
tokens = 256
[generate.sessions]
think_time = 2.0
think = "exponential"
[generate.sessions.turns]
dist = "uniform"
min = 1
max = 4
)",
};

// kWorkloads parsed, in order (each must parse).
inline std::vector<std::vector<RequestSpec>> parse_generated_workloads() {
  std::vector<std::vector<RequestSpec>> all;
  for (const char* text : kWorkloads) {
    Result<Workload> w = parse_workload(text, "generated.toml", std::nullopt);
    EXPECT_TRUE(w.ok()) << w.error().message;
    if (w.ok()) all.push_back(w.value().requests);
  }
  return all;
}

// Option variants per policy; every registered policy also runs with its defaults ("").
inline std::vector<std::string> variants(const std::string& policy) {
  std::map<std::string, std::vector<std::string>> extra = {
      {"static", {"max_wait = inf\nrelease = \"batch\"", "padding = \"pad\"\nmax_wait = 0.5"}},
      {"continuous", {"kv_reserve = \"max\""}},
      {"chunked-prefill",
       {"long_prefill_token_threshold = 64", "scheduling_policy = \"priority\"",
        "vllm_version = \"0.11.0\"\nlong_prefill_token_threshold = 64",
        "long_prefill_token_threshold = 16\nlong_prefill_token_threshold_adaptive = true",
        "scheduler_reserve_full_isl = false"}},
      {"prefix-cached",
       {"order = \"lpm\"", "long_prefill_token_threshold = 100",
        "scheduling_policy = \"priority\"\nlong_prefill_token_threshold = 32",
        "vllm_version = \"0.11.0\""}},
  };
  std::vector<std::string> v = {""};
  for (const std::string& e : extra[policy]) v.push_back(e);
  return v;
}

// The options the generated workloads run under: 16 sequences and 2,048 tokens per iteration
// (every generated prompt, at most 2,000 tokens, fits the budget whole), and at most 300 output
// tokens for requests that give no max_tokens.
inline SimOptions generated_options(int64_t kv_blocks, int32_t replicas, int64_t max_concurrency = 0) {
  SimOptions o;
  o.limits = {16, 2048};
  o.kv_blocks = kv_blocks;
  o.replicas = replicas;
  o.max_concurrency = max_concurrency;
  o.default_max_tokens = 300;
  return o;
}

}  // namespace servesim::testing
