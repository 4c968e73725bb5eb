// The CUDA engine's model runner: CpuModelRunner's twin on one NVIDIA GPU. Same Input and Output
// (kernels/model_runner.h); weights live on the device in bf16, activations in bf16 with a
// float32 residual stream, GEMMs run through cuBLAS with float32 accumulation, and the paged KV
// cache (bf16, [num_blocks, block_size, num_kv_heads, head_dim] per layer) is device memory.
//
// Ownership: the runner owns its device copy of the weights, the KV cache, a stream and a cuBLAS
// handle; the caller owns block allocation, exactly as for CpuModelRunner. This header is plain
// C++ (no CUDA types), so host code can hold a runner.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/model.h"
#include "kernels/model_runner.h"
#include "kernels/weights.h"

namespace servesim {

namespace cuda {
// True when a CUDA device is present. Never aborts, even without a driver.
bool cuda_device_available();
}  // namespace cuda
using cuda::cuda_device_available;

class CudaModelRunner {
 public:
  using Input = CpuModelRunner::Input;
  using Output = CpuModelRunner::Output;

  // Uploads the weights (converted to bf16) once; the host weights may be freed afterwards.
  // REQUIRES: a CUDA device; the weights have the model's shapes; num_blocks, block_size > 0.
  // With use_cuda_graphs, decode-only steps (one token per sequence, every sequence sampled) of
  // up to kMaxGraphBatch sequences replay a CUDA graph captured once per bucketed batch size
  // (1, 2, 4, then multiples of 8), as vLLM V1 does; other steps run eagerly.
  CudaModelRunner(const ModelSpec& model, const ModelWeights& weights, int32_t num_blocks,
                  int32_t block_size, bool use_cuda_graphs = true);
  // Seeded random bf16 weights generated on the device (not the values of random_weights()):
  // for benchmarks of large models, whose float32 host copy would be too slow to build.
  CudaModelRunner(const ModelSpec& model, uint64_t seed, int32_t num_blocks, int32_t block_size,
                  bool use_cuda_graphs = true);
  ~CudaModelRunner();
  CudaModelRunner(const CudaModelRunner&) = delete;
  CudaModelRunner& operator=(const CudaModelRunner&) = delete;

  // CpuModelRunner::forward's contract. With return_logits false, Output::logits stays empty
  // (the logits are still computed on the device; only the copy back is skipped).
  Output forward(const Input& input, bool return_logits = true);

  // The device time of the last forward (CUDA events around its upload, layers and download).
  double last_step_seconds() const;
  int32_t num_blocks() const;
  int32_t block_size() const;
  // The largest batch a decode graph serves, and how many graphs have been captured so far.
  static constexpr int32_t kMaxGraphBatch = 256;
  int32_t num_cuda_graphs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servesim
