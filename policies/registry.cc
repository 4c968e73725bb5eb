#include "policies/registry.h"

#include "policies/chunked_prefill.h"
#include "policies/continuous.h"
#include "policies/static_batch.h"

namespace servesim {

const std::vector<PolicyInfo>& policy_registry() {
  static const std::vector<PolicyInfo> kPolicies = {
      {"static", "FasterTransformer / Triton batcher: a batch runs until all its members finish",
       "max_wait = 0 (seconds to wait for a full batch; inf = until full or the workload ends), "
       "release = \"each\" | \"batch\", padding = \"shrink\" | \"pad\"",
       false, &make_static_policy},
      {"continuous", "Orca / vLLM before chunked prefill: admit whole prompts every iteration",
       "kv_reserve = \"paged\" (allocate as tokens arrive, preempt by recompute) | \"max\" "
       "(reserve prompt + max_tokens at admission, never preempt)",
       false, &make_continuous_policy},
      {"chunked-prefill",
       "vLLM V1 / Sarathi-Serve: a token budget per iteration, running requests first, prompts cut "
       "to the budget",
       "long_prefill_token_threshold = 0 (tokens a prompt may compute per iteration; 0 = no cap)",
       false, &make_chunked_prefill_policy},
      {"prefix-cached",
       "vLLM V1 with automatic prefix caching: chunked-prefill that reuses cached leading KV blocks",
       "long_prefill_token_threshold = 0, order = \"fcfs\" | \"lpm\" (longest prefix match first "
       "while at most 128 wait, as SGLang)",
       true, &make_prefix_cached_policy},
  };
  return kPolicies;
}

Result<const PolicyInfo*> find_policy(std::string_view name) {
  std::string known;
  for (const PolicyInfo& p : policy_registry()) {
    if (p.name == name) return &p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  return Error{"unknown policy '" + std::string(name) + "' (known: " + known + ")"};
}

}  // namespace servesim
