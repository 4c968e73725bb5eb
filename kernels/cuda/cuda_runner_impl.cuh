// The private state of CudaModelRunner, shared by cuda_runner.cu (construction, weights) and
// cuda_runner_forward.cu (the forward pass). Device memory only; nothing here is thread-safe.
#pragma once

#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_runner.h"
#include "kernels/cuda/device.cuh"

namespace servesim {

using bf16 = __nv_bfloat16;

struct CudaModelRunner::Impl {
  struct Layer {
    cuda::DeviceBuffer<bf16> input_layernorm, qkv, o, post_attention_layernorm, gate_up, down;
    cuda::DeviceBuffer<float> qkv_bias;  // empty when the model has none
    cuda::DeviceBuffer<bf16> k_cache, v_cache;
  };

  ModelSpec model;
  int32_t num_blocks, block_size;
  int64_t H, I, Q, KV, V;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cuda::DeviceBuffer<bf16> embed, norm, lm_head;  // lm_head empty when tied to embed
  std::vector<Layer> layers;
  // Activations, grown to the largest batch seen.
  cuda::DeviceBuffer<bf16> x, h, qkv, attn, gate_up, act, last_h;
  cuda::DeviceBuffer<float> residual, workspace, logits;
  cuda::DeviceBuffer<int32_t> ints, tokens;

  // Creates the stream, the cuBLAS handle and the zeroed KV cache; no weights yet.
  Impl(const ModelSpec& m, int32_t blocks, int32_t bs);
  ~Impl();

  const bf16* output_matrix() const { return lm_head.size() > 0 ? lm_head.get() : embed.get(); }
  int64_t qkv_width() const { return Q + 2 * KV; }
};

}  // namespace servesim
