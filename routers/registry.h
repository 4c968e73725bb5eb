// The explicit list of routers, by the names the command line uses (`--router NAME`, options as
// `--set router.KEY=VALUE`). Adding a router means adding one entry to kRouters in registry.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "routers/router.h"
#include "sim/result.h"

namespace servesim {

struct RouterInfo {
  std::string_view name;
  std::string_view summary;       // one line: what it does, and whose it is
  std::string_view options_help;  // its [router] options besides session_affinity, with defaults
  bool needs_prefix_caching;      // reads the replicas' prefix caches
  // Builds the router from the [router] table without `name` and `session_affinity`; `seed` seeds
  // the randomised ones. Errors name the offending key.
  Result<std::unique_ptr<Router>> (*make)(const toml::table& options, uint64_t seed);
};

// Every registered router, in a fixed order.
const std::vector<RouterInfo>& router_registry();

// The entry for `name`, or an error that lists the known names.
Result<const RouterInfo*> find_router(std::string_view name);

}  // namespace servesim
