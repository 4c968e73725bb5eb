#include "kernels/cuda/cuda_runner.h"
#include "kernels/cuda/cuda_runner_impl.cuh"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu_ops.h"
#include "kernels/cuda/argmax.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/fill_random.cuh"
#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope_cache.cuh"
#include "kernels/cuda/silu_and_mul.cuh"

namespace servesim {

using cpu::require;
using cuda::DeviceBuffer;

namespace {

size_t to_size(int64_t n) { return static_cast<size_t>(n); }

// Rows of several [rows, in] matrices stacked into one [sum rows, in] bf16 matrix.
DeviceBuffer<bf16> stacked(std::initializer_list<const Tensor*> parts) {
  std::vector<float> all;
  for (const Tensor* t : parts) all.insert(all.end(), t->data.begin(), t->data.end());
  return cuda::to_device(cuda::to_bf16(all));
}

}  // namespace

CudaModelRunner::Impl::Impl(const ModelSpec& m, int32_t blocks, int32_t bs, bool graphs)
    : model(m), num_blocks(blocks), block_size(bs), H(m.hidden_size), I(m.intermediate_size),
      Q(m.num_heads * m.head_dim), KV(m.num_kv_heads * m.head_dim), V(m.vocab_size),
      use_graphs(graphs) {
  require(blocks > 0 && bs > 0, "num_blocks and block_size are positive");
  require(m.num_experts == 1, "the CUDA runner runs dense models only");
  SERVESIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SERVESIM_CUDA_CHECK(cudaEventCreate(&step_start));
  SERVESIM_CUDA_CHECK(cudaEventCreate(&step_end));
  SERVESIM_CUBLAS_CHECK(cublasCreate(&cublas));
  SERVESIM_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  // After cublasSetStream, which resets the workspace: a fixed one keeps cuBLAS from allocating
  // inside a graph capture (32 MiB, what cuBLAS recommends for Hopper).
  cublas_workspace = DeviceBuffer<unsigned char>(size_t{32} << 20);
  SERVESIM_CUBLAS_CHECK(
      cublasSetWorkspace(cublas, cublas_workspace.get(), cublas_workspace.size()));
  // A graph step's block table holds the longest sequence the model allows, and no more blocks
  // than the cache has.
  const int64_t by_positions = m.max_position_embeddings > 0
                                   ? (m.max_position_embeddings + bs - 1) / bs
                                   : int64_t{blocks};
  graph_max_blocks = static_cast<int32_t>(std::min<int64_t>(by_positions, blocks));
  layers.resize(to_size(m.num_layers));
  const size_t cache = to_size(int64_t{blocks} * bs * KV);
  for (Layer& l : layers) {
    l.k_cache = DeviceBuffer<bf16>(cache);
    l.v_cache = DeviceBuffer<bf16>(cache);
    SERVESIM_CUDA_CHECK(cudaMemsetAsync(l.k_cache.get(), 0, cache * sizeof(bf16), stream));
    SERVESIM_CUDA_CHECK(cudaMemsetAsync(l.v_cache.get(), 0, cache * sizeof(bf16), stream));
  }
}

void CudaModelRunner::Impl::drop_graphs() {
  for (Graph& g : graphs)
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  graphs.clear();
}

CudaModelRunner::Impl::~Impl() {
  drop_graphs();
  if (cublas != nullptr) cublasDestroy(cublas);
  if (step_start != nullptr) cudaEventDestroy(step_start);
  if (step_end != nullptr) cudaEventDestroy(step_end);
  if (stream != nullptr) cudaStreamDestroy(stream);
}


CudaModelRunner::CudaModelRunner(const ModelSpec& model, const ModelWeights& w,
                                 int32_t num_blocks, int32_t block_size, bool use_cuda_graphs)
    : impl_(std::make_unique<Impl>(model, num_blocks, block_size, use_cuda_graphs)) {
  Impl& m = *impl_;
  require(w.embed_tokens.data.size() == to_size(m.V * m.H), "embed_tokens is [vocab, hidden]");
  require(w.output_matrix().data.size() == to_size(m.V * m.H), "lm_head is [vocab, hidden]");
  require(w.norm.data.size() == to_size(m.H), "norm is [hidden]");
  require(w.layers.size() == m.layers.size(), "one LayerWeights per layer");
  m.embed = cuda::to_device(cuda::to_bf16(w.embed_tokens.data));
  if (!w.lm_head.data.empty()) m.lm_head = cuda::to_device(cuda::to_bf16(w.lm_head.data));
  m.norm = cuda::to_device(cuda::to_bf16(w.norm.data));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    Impl::Layer& d = m.layers[i];
    require(l.input_layernorm.data.size() == to_size(m.H), "input_layernorm is [hidden]");
    require(l.q_proj.data.size() == to_size(m.Q * m.H), "q_proj is [heads * head_dim, hidden]");
    require(l.k_proj.data.size() == to_size(m.KV * m.H), "k_proj is [kv * head_dim, hidden]");
    require(l.v_proj.data.size() == to_size(m.KV * m.H), "v_proj is [kv * head_dim, hidden]");
    require(l.o_proj.data.size() == to_size(m.H * m.Q), "o_proj is [hidden, heads * head_dim]");
    require(l.gate_proj.data.size() == to_size(m.I * m.H), "gate_proj is [inter, hidden]");
    require(l.up_proj.data.size() == to_size(m.I * m.H), "up_proj is [inter, hidden]");
    require(l.down_proj.data.size() == to_size(m.H * m.I), "down_proj is [hidden, inter]");
    require(l.post_attention_layernorm.data.size() == to_size(m.H), "norm is [hidden]");
    d.input_layernorm = cuda::to_device(cuda::to_bf16(l.input_layernorm.data));
    d.post_attention_layernorm = cuda::to_device(cuda::to_bf16(l.post_attention_layernorm.data));
    d.qkv = stacked({&l.q_proj, &l.k_proj, &l.v_proj});
    d.o = cuda::to_device(cuda::to_bf16(l.o_proj.data));
    d.gate_up = stacked({&l.gate_proj, &l.up_proj});
    d.down = cuda::to_device(cuda::to_bf16(l.down_proj.data));
    if (!l.q_bias.data.empty() || !l.k_bias.data.empty() || !l.v_bias.data.empty()) {
      std::vector<float> bias(to_size(m.qkv_width()), 0.0f);  // a missing part is zero
      auto put = [&](const Tensor& t, int64_t at, int64_t n) {
        require(t.data.empty() || t.data.size() == to_size(n), "a bias is [out] or empty");
        std::copy(t.data.begin(), t.data.end(), bias.begin() + at);
      };
      put(l.q_bias, 0, m.Q);
      put(l.k_bias, m.Q, m.KV);
      put(l.v_bias, m.Q + m.KV, m.KV);
      d.qkv_bias = cuda::to_device(bias);
    }
  }
  SERVESIM_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy-stream copies before our stream
}

CudaModelRunner::CudaModelRunner(const ModelSpec& model, uint64_t seed, int32_t num_blocks,
                                 int32_t block_size, bool use_cuda_graphs)
    : impl_(std::make_unique<Impl>(model, num_blocks, block_size, use_cuda_graphs)) {
  Impl& m = *impl_;
  uint64_t stream_id = seed * 1000;
  auto matrix = [&](int64_t rows, int64_t cols) {  // uniform with variance ~ 1 / (3 cols)
    DeviceBuffer<bf16> b(to_size(rows * cols));
    cuda::fill_random(b.get(), b.size(), ++stream_id, 1.0f / std::sqrt(float(cols)), 0.0f,
                      m.stream);
    return b;
  };
  auto ones = [&](int64_t n) {
    DeviceBuffer<bf16> b(to_size(n));
    cuda::fill_random(b.get(), b.size(), ++stream_id, 0.0f, 1.0f, m.stream);
    return b;
  };
  m.embed = matrix(m.V, m.H);
  if (!model.tie_word_embeddings) m.lm_head = matrix(m.V, m.H);
  m.norm = ones(m.H);
  for (Impl::Layer& d : m.layers) {
    d.input_layernorm = ones(m.H);
    d.post_attention_layernorm = ones(m.H);
    d.qkv = matrix(m.qkv_width(), m.H);
    d.o = matrix(m.H, m.Q);
    d.gate_up = matrix(2 * m.I, m.H);
    d.down = matrix(m.H, m.I);
    if (model.qkv_bias) d.qkv_bias = cuda::to_device(std::vector<float>(to_size(m.qkv_width())));
  }
  SERVESIM_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy-stream copies before our stream
}

CudaModelRunner::~CudaModelRunner() = default;

double CudaModelRunner::last_step_seconds() const { return impl_->last_step_seconds; }
int32_t CudaModelRunner::num_blocks() const { return impl_->num_blocks; }
int32_t CudaModelRunner::block_size() const { return impl_->block_size; }
int32_t CudaModelRunner::num_cuda_graphs() const {
  return static_cast<int32_t>(impl_->graphs.size());
}

}  // namespace servesim
