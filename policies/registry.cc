#include "policies/registry.h"

#include "policies/continuous.h"
#include "policies/static_batch.h"

namespace servesim {

const std::vector<PolicyInfo>& policy_registry() {
  static const std::vector<PolicyInfo> kPolicies = {
      {"static", "FasterTransformer / Triton batcher: a batch runs until all its members finish",
       "max_wait = 0 (seconds to wait for a full batch; inf = until full or the workload ends), "
       "release = \"each\" | \"batch\", padding = \"shrink\" | \"pad\"",
       &make_static_policy},
      {"continuous", "Orca / vLLM before chunked prefill: admit whole prompts every iteration",
       "kv_reserve = \"paged\" (allocate as tokens arrive, preempt by recompute) | \"max\" "
       "(reserve prompt + max_tokens at admission, never preempt)",
       &make_continuous_policy},
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
