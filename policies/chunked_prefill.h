// Chunked prefill, as vLLM V1's scheduler does it (Sarathi-Serve's stall-free batching), and with
// automatic prefix caching (`prefix-cached`): one scheduler with a token budget per iteration,
// max_num_batched_tokens. It mirrors vLLM's Scheduler.schedule() of the release named by the
// `vllm_version` option (policies/vllm_config.h; default 0.33.0):
//
//  1. Running requests, in admission order: each computes what it has not computed yet (a decode
//     takes 1 token, an unfinished prompt what is left of it), capped by the budget left and by
//     long_prefill_token_threshold (lifted while a single request is running or waiting, and
//     floored at budget / requests with long_prefill_token_threshold_adaptive). When one cannot get
//     a KV block, the lowest-priority running request is preempted by recompute until it fits: the
//     most recently admitted under fcfs; under scheduling_policy = "priority" the one with the
//     largest (priority, arrival), which gives back its tokens if it was already scheduled.
//  2. Only if nothing was preempted: waiting requests in queue order (fcfs: arrival, preempted
//     first; priority: (priority, arrival, id); or, with prefix caching and order = "lpm", longest
//     cached prefix first while at most 128 wait, as SGLang), each prompt cut to the budget left;
//     with prefix caching a new request's cached leading blocks are reused and not computed. With
//     scheduler_reserve_full_isl (vLLM's default) a request is admitted only if KV blocks for its
//     whole remaining sequence are free. Admission stops at max_num_seqs, an empty budget, or the
//     first request that cannot get its KV blocks (nobody overtakes it).
// A request that could not fit in an empty KV cache is rejected with the reason.
#pragma once

#include <memory>

#include <toml++/toml.h>

#include "policies/policy.h"
#include "sim/result.h"

namespace servesim {

// `chunked-prefill`: the options of VllmSchedulerConfig.
Result<std::unique_ptr<Policy>> make_chunked_prefill_policy(const toml::table& options);

// `prefix-cached`: the same, and order = "fcfs" | "lpm".
Result<std::unique_ptr<Policy>> make_prefix_cached_policy(const toml::table& options);

}  // namespace servesim
