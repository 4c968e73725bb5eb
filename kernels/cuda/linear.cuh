// y = x W^T on the device through cuBLAS (cpu::linear's twin, without the bias: the runner adds
// Q/K/V biases inside rope_and_cache). bf16 operands, float32 accumulation.
#pragma once

#include <cstdint>

#include <cublas_v2.h>
#include <cuda_bf16.h>

namespace servesim::cuda {

// x: [T, in] bf16; weight: [out, in] bf16 (Hugging Face's layout); y: [T, out] of y_type
// (CUDA_R_16BF or CUDA_R_32F). Row-major throughout: cuBLAS, column-major, computes
// y^T = W x^T with W transposed. Runs on the handle's stream.
void linear(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* weight,
            int64_t num_tokens, int64_t in_features, int64_t out_features, void* y,
            cudaDataType_t y_type);

}  // namespace servesim::cuda
