// The `cuda` backend as `sim` sees it: the CUDA engine lives in a shared library
// (libservesim_cuda.so, built when a CUDA toolkit is found) that is loaded only when a run asks for
// --backend cuda, so that other runs pay nothing for cuBLAS. The library exports one C function,
// servesim_cuda_make_backend, which builds the backend (backends/cuda_backend.h).
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "sim/result.h"

namespace servesim {

// True when this build has a CUDA engine to load.
bool cuda_engine_built();

// Loads the CUDA engine and builds its backend. Errors: not built, the library not found, no device.
Result<std::unique_ptr<Backend>> load_cuda_backend(const BackendSetup& setup);

}  // namespace servesim

// The library's entry point. Returns false and sets *error on failure.
extern "C" bool servesim_cuda_make_backend(const servesim::BackendSetup* setup,
                                           std::unique_ptr<servesim::Backend>* out,
                                           std::string* error);
