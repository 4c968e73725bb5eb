#include "backends/registry.h"

#include <string>

#include "backends/unit.h"

namespace servesim {

const std::vector<BackendInfo>& backend_registry() {
  static const std::vector<BackendInfo> kBackends = {
      {"unit", "every iteration costs one time unit; KV memory unlimited unless kv.blocks is set",
       [] { return std::unique_ptr<Backend>(std::make_unique<UnitBackend>()); }},
  };
  return kBackends;
}

Result<const BackendInfo*> find_backend(std::string_view name) {
  std::string known;
  for (const BackendInfo& b : backend_registry()) {
    if (b.name == name) return &b;
    known += (known.empty() ? "" : ", ") + std::string(b.name);
  }
  std::string msg = "unknown backend '" + std::string(name) + "' (known: " + known + ")";
  if (name == "roofline" || name == "cpu" || name == "cuda") {
    msg = "backend '" + std::string(name) + "' is not available in this version (available: " +
          known + ")";
  }
  return Error{msg};
}

}  // namespace servesim
