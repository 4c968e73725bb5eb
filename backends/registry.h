// The explicit list of backends, by the names the command line uses.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "sim/result.h"

namespace servesim {

struct BackendInfo {
  std::string_view name;
  std::string_view summary;
  // Builds one backend (one per replica); errors name the file, key or option at fault.
  Result<std::unique_ptr<Backend>> (*make)(const BackendSetup& setup);
};

const std::vector<BackendInfo>& backend_registry();

// The entry for `name`, or an error listing the known backends (and saying which are planned).
Result<const BackendInfo*> find_backend(std::string_view name);

}  // namespace servesim
