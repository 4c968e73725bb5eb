// vLLM's silu_and_mul on the device (cpu::silu_and_mul's twin).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace servesim::cuda {

// x: [T, 2d] bf16, each row gate | up (as the fused gate_up projection writes it);
// out[t, i] = silu(gate[t, i]) * up[t, i], computed in float32; out: [T, d] bf16.
void silu_and_mul(const __nv_bfloat16* x, int64_t num_tokens, int64_t d, __nv_bfloat16* out,
                  cudaStream_t stream);

}  // namespace servesim::cuda
