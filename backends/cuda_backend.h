// The `cuda` backend: the real engine on one NVIDIA GPU. As the cpu backend, it executes every batch
// the policy forms (kernels/cuda/cuda_runner.h: bf16 weights and KV cache, cuBLAS GEMMs), on a KV
// cache laid out as the simulator's block manager allocates it and sized from the device's free
// memory x gpu_memory_utilization; the step's device time measured with CUDA events (the forward
// pass with its input upload and output download) drives the clock, and the roofline's prediction for the
// same batch (default hardware h200) is logged beside it. Built only with a CUDA toolkit.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "sim/result.h"

namespace servesim {

// Errors: no CUDA device, a model that does not fit, bad files.
Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendSetup& setup);

}  // namespace servesim
