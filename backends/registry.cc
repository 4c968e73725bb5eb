#include "backends/registry.h"

#include <string>

#include "backends/cpu_backend.h"
#include "backends/cuda_plugin.h"
#include "backends/roofline_backend.h"
#include "backends/unit.h"
#include "sim/config/registry_lookup.h"

namespace servesim {

const std::vector<BackendInfo>& backend_registry() {
  static const std::vector<BackendInfo> kBackends = [] {
    std::vector<BackendInfo> all = {
      {"roofline",
       "analytic GPU roofline: each operator's FLOPs and bytes against the hardware file's peaks "
       "(default A100-80GB, Llama-3-8B); KV blocks derived as vLLM does",
       &make_roofline_backend},
      {"cpu",
       "the real engine on the host: executes every batch with the float32 reference model (tiny "
       "models), measures it, and logs the roofline's prediction beside it",
       &make_cpu_backend, /*measures=*/true},
      {"cuda",
       "the real engine on one NVIDIA GPU: executes every batch (bf16, cuBLAS), measures it, and "
       "logs the roofline's prediction beside it",
       &load_cuda_backend, /*measures=*/true},
      {"unit", "every iteration costs one time unit; KV memory unlimited unless kv.blocks is set",
       [](const BackendSetup&) -> Result<std::unique_ptr<Backend>> {
         return std::unique_ptr<Backend>(std::make_unique<UnitBackend>());
       }},
    };
    // The CUDA engine is listed only where a CUDA toolkit built it.
    if (!cuda_engine_built()) {
      std::erase_if(all, [](const BackendInfo& b) { return b.name == "cuda"; });
    }
    return all;
  }();
  return kBackends;
}

Result<const BackendInfo*> find_backend(std::string_view name) {
  std::string known;
  if (const BackendInfo* b = find_by_name(backend_registry(), name, &known)) return b;
  std::string msg = "unknown backend '" + std::string(name) + "' (known: " + known + ")";
  if (name == "cuda") {
    msg = "backend 'cuda' is not built: no CUDA toolkit was found when servesim was built "
          "(available: " + known + ")";
  }
  return Error{msg};
}

bool is_measuring_backend(std::string_view name) {
  for (const BackendInfo& b : backend_registry()) {
    if (b.name == name) return b.measures;
  }
  return false;
}

}  // namespace servesim
