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
  cudaEvent_t step_start = nullptr, step_end = nullptr;  // time each forward on the stream
  double last_step_seconds = 0;
  cublasHandle_t cublas = nullptr;
  cuda::DeviceBuffer<bf16> embed, norm, lm_head;  // lm_head empty when tied to embed
  std::vector<Layer> layers;
  // Activations, grown to the largest batch seen.
  cuda::DeviceBuffer<bf16> x, h, qkv, attn, gate_up, act, last_h;
  cuda::DeviceBuffer<float> residual, workspace, logits;
  cuda::DeviceBuffer<int32_t> ints, tokens;
  // cuBLAS's preallocated workspace, so that its GEMMs can be captured into a graph.
  cuda::DeviceBuffer<unsigned char> cublas_workspace;

  // Decode graphs. Every graph reads its inputs from graph_ints, laid out for kMaxGraphBatch
  // sequences: ids | positions | slots | cu_seqlens (+1) | context_lens | rows | block_tables
  // ([batch, graph_max_blocks], the table stride fixed at graph_max_blocks). The activation
  // buffers a graph writes must not move: growing one drops every graph (drop_graphs()).
  struct Graph {
    int32_t batch = 0;
    cudaGraphExec_t exec = nullptr;
  };
  bool use_graphs = true;
  int32_t graph_max_blocks = 0;  // block table capacity of a graph step's sequence
  cuda::DeviceBuffer<int32_t> graph_ints;
  std::vector<int32_t> graph_staging;  // the host side of graph_ints
  std::vector<Graph> graphs;

  // Creates the stream, the cuBLAS handle and the zeroed KV cache; no weights yet.
  Impl(const ModelSpec& m, int32_t blocks, int32_t bs, bool graphs);
  ~Impl();
  void drop_graphs();

  // Device pointers of one step's flat inputs.
  struct StepInputs {
    const int32_t *ids, *positions, *slots, *cu_seqlens, *context_lens, *block_tables, *rows;
    int64_t max_blocks_per_seq;
  };
  // Grows the activations for T tokens, R sampled rows and `parts` attention partitions;
  // drops the graphs when a buffer moves.
  void reserve_activations(int64_t T, int64_t R, int parts);
  // Enqueues the forward pass on `stream`, from the embeddings to the sampled tokens in
  // `tokens` and their logits in `logits`; no host work that a graph capture would miss.
  void enqueue_forward(const StepInputs& in, int64_t T, int64_t S, int64_t R, int parts);

  const bf16* output_matrix() const { return lm_head.size() > 0 ? lm_head.get() : embed.get(); }
  int64_t qkv_width() const { return Q + 2 * KV; }
};

}  // namespace servesim
