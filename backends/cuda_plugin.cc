#include "backends/cuda_plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <vector>

namespace servesim {

bool cuda_engine_built() {
#ifdef SERVESIM_CUDA_PLUGIN_BUILD
  return true;
#else
  return false;
#endif
}

Result<std::unique_ptr<Backend>> load_cuda_backend(const BackendSetup& setup) {
#ifndef SERVESIM_CUDA_PLUGIN_BUILD
  (void)setup;
  return Error{"backend 'cuda' is not built: no CUDA toolkit was found when servesim was built"};
#else
  // An installed `sim` loads the installed engine; one in its build folder, the one built beside it.
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  const bool installed = !ec && exe.rfind(SERVESIM_INSTALL_PREFIX, 0) == 0;
  std::vector<std::string> paths = {SERVESIM_CUDA_PLUGIN_BUILD, SERVESIM_CUDA_PLUGIN_INSTALL};
  if (installed) std::swap(paths[0], paths[1]);
  void* handle = nullptr;
  std::string why;
  for (const std::string& p : paths) {
    handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open: the backend's code lives there
    if (handle != nullptr) break;
    why += (why.empty() ? "" : "; ") + std::string(dlerror());
  }
  if (handle == nullptr) return Error{"--backend cuda: cannot load the CUDA engine (" + why + ")"};
  using Make = bool (*)(const BackendSetup*, std::unique_ptr<Backend>*, std::string*);
  auto make = reinterpret_cast<Make>(dlsym(handle, "servesim_cuda_make_backend"));
  if (make == nullptr) return Error{"--backend cuda: the CUDA engine library has no entry point"};
  std::unique_ptr<Backend> backend;
  std::string error;
  if (!make(&setup, &backend, &error)) return Error{error};
  return backend;
#endif
}

}  // namespace servesim
