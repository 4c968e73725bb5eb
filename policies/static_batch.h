// Static batching, as FasterTransformer and Triton's batcher do it: a batch of up to max_num_seqs
// waiting requests, each reserving KV memory for prompt + max_tokens, runs until every member has
// finished; no request joins a running batch.
//
// Options: max_wait (seconds to wait for a full batch from the oldest waiting request's arrival;
// 0 dispatches what has arrived, inf waits until the batch is full or the workload is exhausted),
// release ("each": a response completes at its own last token while its slot stays blocked;
// "batch": every response returns when the batch drains), padding ("shrink": finished rows cost
// nothing; "pad": they still cost a decode's compute). A batch is full when it has max_num_seqs
// members or the next waiting request's reservation does not fit in KV memory.
// max_num_batched_tokens does not apply: the whole batch's prompts are prefilled at once.
#pragma once

#include <memory>

#include <toml++/toml.h>

#include "policies/policy.h"
#include "sim/result.h"

namespace servesim {

Result<std::unique_ptr<Policy>> make_static_policy(const toml::table& options);

}  // namespace servesim
