// The options of the policies that mirror vLLM's V1 scheduler (`chunked-prefill`, `prefix-cached`),
// under vLLM's own names, and the vLLM releases they can mirror.
//
// vLLM's scheduling changes between releases without a switch for every change, so a run names the
// release it mirrors (`vllm_version`); the release fixes the behaviours that have no switch and the
// defaults of those that do. Each release listed here was checked decision by decision against that
// release's own `Scheduler` (scripts/vllm_xcheck_suites.py).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "sim/kv_cache.h"
#include "sim/result.h"

namespace servesim {

// What one vLLM release does where releases differ.
struct VllmRelease {
  std::string_view version;     // "0.33.0"
  // SchedulerConfig.scheduler_reserve_full_isl exists (default on): a waiting request is admitted
  // only if its whole remaining prompt fits in free KV blocks (vLLM pull request #37307).
  bool has_reserve_full_isl;
  // long_prefill_token_threshold is lifted while only one request is running or waiting (#57951).
  bool lone_request_uncapped;
  // SchedulerConfig.long_prefill_token_threshold_adaptive exists.
  bool has_adaptive_threshold;
  // scheduling_policy = "priority" is mirrored (vLLM 0.11.0's priority preemption keeps the tokens
  // of a request it preempts in the step, and its queue fails on a tie of priority and arrival
  // time: defects servesim does not reproduce).
  bool priority_mirrored;
  // The order in which BlockPool.free_blocks queues freed blocks for reuse (#42656).
  FreeOrder free_order;
};

// The mirrored releases, newest first; the first is the default.
const std::vector<VllmRelease>& vllm_releases();

// The resolved options of one vLLM-style policy.
struct VllmSchedulerConfig {
  const VllmRelease* release = nullptr;          // vllm_version
  int32_t long_prefill_token_threshold = 0;      // prompt tokens per request per iteration; 0: no cap
  bool long_prefill_token_threshold_adaptive = false;  // floor the cap at budget / requests
  bool scheduler_reserve_full_isl = true;        // admit only if the whole prompt fits
  bool priority = false;                         // scheduling_policy: "fcfs" (false) | "priority"
  bool lpm = false;                              // prefix-cached only: order = "lpm" (SGLang)

  // The options as the run's configuration records them (every default filled in).
  toml::table to_toml(bool prefix_cached) const;
};

// Reads and checks a [policy] table (without `name`); errors name the key and where it was set.
Result<VllmSchedulerConfig> read_vllm_scheduler_config(const toml::table& options,
                                                       bool prefix_cached);

}  // namespace servesim
