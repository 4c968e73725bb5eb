// Fuzz target: the run configuration (TOML, as --config reads it) with one --set assignment (the
// input's first line), and the policy and router options it names (the replica groups' own
// policies too).
#include <string_view>

#include "policies/registry.h"
#include "routers/registry.h"
#include "sim/config/config.h"
#include "sim/config/toml_fields.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servesim;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t newline = text.find('\n');
  const std::string_view assignment = text.substr(0, newline);
  const std::string_view file = newline == std::string_view::npos ? "" : text.substr(newline + 1);
  Result<toml::table> table = parse_toml(file, "config.toml");
  if (!table.ok()) return 0;
  if (!apply_set(table.value(), assignment).ok()) return 0;
  Result<RunConfig> config = resolve_config(std::move(table.value()));
  if (!config.ok()) return 0;
  // The router it names, with its options.
  if (Result<const RouterInfo*> router = find_router(config.value().router); router.ok()) {
    (void)router.value()->make(config.value().router_options, 1);
  }
  for (const ReplicaGroup& g : config.value().replica_groups) {
    if (!g.has_policy) continue;
    Result<const PolicyInfo*> own = find_policy(g.policy.empty() ? config.value().policy : g.policy);
    if (own.ok()) (void)own.value()->make(g.policy_options);
  }
  Result<const PolicyInfo*> policy = find_policy(config.value().policy);
  if (!policy.ok()) return 0;
  Result<std::unique_ptr<Policy>> made = policy.value()->make(config.value().policy_options);
  if (made.ok()) (void)config_to_toml(config.value(), made.value()->options());
  return 0;
}
