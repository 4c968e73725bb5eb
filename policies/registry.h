// The explicit list of batching policies, by the names the command line uses. Adding a policy means
// adding one entry to kPolicies in registry.cc; nothing else dispatches on policy names.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "policies/policy.h"
#include "sim/result.h"

namespace servesim {

struct PolicyInfo {
  std::string_view name;
  std::string_view summary;       // one line: what it mirrors
  std::string_view options_help;  // its [policy] options, with defaults
  bool prefix_caching;            // the replicas' block managers cache prefixes for it
  // Builds one policy object (one per replica) from the [policy] table without its `name` key;
  // errors name the offending key and where it came from.
  Result<std::unique_ptr<Policy>> (*make)(const toml::table& options);
};

// Every registered policy, in a fixed order. Names are unique (checked by a test).
const std::vector<PolicyInfo>& policy_registry();

// The entry for `name`, or an error that lists the known names.
Result<const PolicyInfo*> find_policy(std::string_view name);

}  // namespace servesim
