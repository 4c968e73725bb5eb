// Continuous (iteration-level) batching, as Orca and vLLM before chunked prefill: every iteration
// keeps the running requests (one decode token each, in admission order) and then admits waiting
// requests first-come-first-served with their whole prompt, while max_num_seqs,
// max_num_batched_tokens and KV memory allow; prefills and decodes share the iteration.
//
// Option kv_reserve:
//   "paged" (vLLM): blocks are allocated as tokens are computed. When a running request cannot get a
//     block, the most recently admitted running request is preempted by recompute (it loses its
//     blocks and returns to the head of the queue) until the block fits; nobody new is admitted in
//     an iteration that preempted.
//   "max" (Orca): admission reserves prompt + max_tokens (never the true output length, which no
//     scheduler knows); nothing is ever preempted.
// When the first waiting prompt does not fit in the budget left beside the running decodes but
// would fit the whole budget, that iteration prefills only and the decodes pause once (as vLLM V0's
// prefill-only iterations), so that long generations cannot starve a long prompt.
// A request whose prompt exceeds max_num_batched_tokens, or that could not fit in an empty KV cache,
// is rejected with the reason: continuous batching never splits a prompt.
#pragma once

#include <memory>

#include <toml++/toml.h>

#include "policies/policy.h"
#include "sim/result.h"

namespace servesim {

Result<std::unique_ptr<Policy>> make_continuous_policy(const toml::table& options);

}  // namespace servesim
