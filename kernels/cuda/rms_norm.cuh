// vLLM's fused_add_rms_norm on the device (cpu::fused_add_rms_norm's twin), with the residual
// stream kept in float32 and the activations in bf16.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace servesim::cuda {

// For each output row r, with input row i = rows ? rows[r] : r:
//   residual[i, :] += x[i, :]            (skipped when x is null)
//   out[r, :] = residual[i, :] / sqrt(mean(residual[i, :]^2) + eps) * weight
// x: [T, hidden] bf16 or null; residual: [T, hidden] float32; weight: [hidden] bf16;
// out: [num_rows, hidden] bf16; rows: [num_rows] int32 or null (then num_rows = T).
// REQUIRES: rows, when given, are distinct (each residual row is updated once).
void fused_add_rms_norm(const __nv_bfloat16* x, float* residual, const __nv_bfloat16* weight,
                        const int32_t* rows, int64_t num_rows, int64_t hidden, float eps,
                        __nv_bfloat16* out, cudaStream_t stream);

}  // namespace servesim::cuda
