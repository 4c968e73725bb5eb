// Seeded random fill of bf16 device arrays, for benchmarks that need weights of a model's shapes
// without building them in float32 on the host (Llama-3-8B would take 32 GB and minutes there).
// Not the same values as random_weights(): use it only where values do not matter.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace servesim::cuda {

// x[i] = offset + scale * u_i with u_i uniform in [-1, 1), a hash of (seed, i).
void fill_random(__nv_bfloat16* x, size_t n, uint64_t seed, float scale, float offset,
                 cudaStream_t stream);

}  // namespace servesim::cuda
