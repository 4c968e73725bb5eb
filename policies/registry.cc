#include "policies/registry.h"

#include "policies/chunked_prefill.h"
#include "policies/continuous.h"
#include "policies/static_batch.h"

#include <string>

#include "sim/config/registry_lookup.h"

namespace servesim {

const std::vector<PolicyInfo>& policy_registry() {
  // The options of the vLLM V1 scheduler policies (policies/vllm_config.h).
  static const std::string kVllmOptions =
      "vllm_version = \"0.33.0\" | \"0.11.0\" (the vLLM release mirrored), "
      "long_prefill_token_threshold = 0 (prompt tokens a request may compute per iteration; 0 = no "
      "cap), long_prefill_token_threshold_adaptive = false, scheduler_reserve_full_isl = true "
      "(admit only if the whole prompt fits; 0.33.0 only), scheduling_policy = \"fcfs\" | "
      "\"priority\" (lower request priority first)";
  static const std::string kPrefixOptions =
      kVllmOptions +
      ", order = \"fcfs\" | \"lpm\" (longest prefix match first while at most 128 wait, as SGLang)";
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
       "vLLM 0.33.0 V1 scheduler (Sarathi-Serve's stall-free batching): a token budget per "
       "iteration, running requests first, prompts cut to the budget",
       kVllmOptions, false, &make_chunked_prefill_policy},
      {"prefix-cached",
       "vLLM 0.33.0 V1 scheduler with automatic prefix caching: chunked-prefill that reuses cached "
       "leading KV blocks",
       kPrefixOptions, true, &make_prefix_cached_policy},
  };
  return kPolicies;
}

Result<const PolicyInfo*> find_policy(std::string_view name) {
  std::string known;
  if (const PolicyInfo* p = find_by_name(policy_registry(), name, &known)) return p;
  return Error{"unknown policy '" + std::string(name) + "' (known: " + known + ")"};
}

}  // namespace servesim
