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
  // A real engine that measures each iteration (its runs log every iteration and batch, for
  // `sim validate` and `sim calibrate`, and never share the machine with another run's points).
  bool measures = false;
};

// True for a backend of that name that measures (false for an unknown name).
bool is_measuring_backend(std::string_view name);

const std::vector<BackendInfo>& backend_registry();

// The entry for `name`, or an error listing the known backends (and saying which are planned).
Result<const BackendInfo*> find_backend(std::string_view name);

}  // namespace servesim
