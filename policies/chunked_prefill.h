// Chunked prefill, as vLLM V1's scheduler does it (Sarathi-Serve's stall-free batching), and with
// automatic prefix caching (`prefix-cached`): one scheduler with a token budget per iteration,
// max_num_batched_tokens.
//
//  1. Running requests, in admission order: each computes what it has not computed yet (a decode
//     takes 1 token, an unfinished prompt what is left of it), capped by the budget left and by
//     long_prefill_token_threshold. When one cannot get a KV block, the most recently admitted
//     running request is preempted by recompute (back to the head of the queue) until it fits.
//  2. Only if nothing was preempted: waiting requests in queue order (fcfs; or, with prefix caching
//     and order = "lpm", longest cached prefix first while at most 128 wait, as SGLang), each prompt
//     cut to the budget left; with prefix caching a new request's cached leading blocks are reused
//     and not computed. Admission stops at max_num_seqs, an empty budget, or the first request that
//     cannot get its KV blocks (nobody overtakes it).
// A request that could not fit in an empty KV cache is rejected with the reason.
#pragma once

#include <memory>

#include <toml++/toml.h>

#include "policies/policy.h"
#include "sim/result.h"

namespace servesim {

// `chunked-prefill`: option long_prefill_token_threshold (0 = off).
Result<std::unique_ptr<Policy>> make_chunked_prefill_policy(const toml::table& options);

// `prefix-cached`: options long_prefill_token_threshold and order = "fcfs" | "lpm".
Result<std::unique_ptr<Policy>> make_prefix_cached_policy(const toml::table& options);

}  // namespace servesim
