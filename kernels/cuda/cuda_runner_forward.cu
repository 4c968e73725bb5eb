// CudaModelRunner::forward: the input checks, the upload of the flat inputs, and the layers.
#include <algorithm>
#include <vector>

#include "kernels/cpu_ops.h"
#include "kernels/cuda/argmax.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/cuda_runner_impl.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope_cache.cuh"
#include "kernels/cuda/silu_and_mul.cuh"

namespace servesim {

using cpu::require;

namespace {

size_t to_size(int64_t n) { return static_cast<size_t>(n); }


}  // namespace

namespace {

// The decode graphs' batch sizes, as in vLLM V1: 1, 2, 4, then every 8 up to kMaxGraphBatch.
int32_t graph_bucket(int64_t n) {
  if (n <= 1) return 1;
  if (n <= 2) return 2;
  if (n <= 4) return 4;
  return static_cast<int32_t>((n + 7) / 8 * 8);
}

// Offsets into Impl::graph_ints (and graph_staging).
constexpr int64_t kN = CudaModelRunner::kMaxGraphBatch;
constexpr int64_t kIds = 0, kPositions = kN, kSlots = 2 * kN, kCu = 3 * kN,
                  kContextLens = 4 * kN + 1, kRows = 5 * kN + 1, kTables = 6 * kN + 1;

// True when the step is decode-only (every sequence computes one token and samples it), small
// enough for a graph, and every context fits a graph's block table.
bool graph_step(const CudaModelRunner::Input& in, int32_t block_size, int32_t graph_max_blocks) {
  const size_t S = in.context_lens.size();
  if (S == 0 || S > to_size(kN) || in.input_ids.size() != S) return false;
  for (size_t s = 0; s < S; ++s) {
    if (in.cu_seqlens[s + 1] != static_cast<int32_t>(s + 1) || !in.sample[s]) return false;
    if ((in.context_lens[s] - 1) / block_size >= graph_max_blocks) return false;
  }
  return true;
}

}  // namespace

void CudaModelRunner::Impl::reserve_activations(int64_t T, int64_t R, int parts) {
  const size_t t = to_size(T);
  const cuda::PagedAttentionShape attn_shape{model.num_heads, model.num_kv_heads, model.head_dim,
                                             block_size};
  const void* before[] = {x.get(),       h.get(),   residual.get(), qkv.get(),
                          attn.get(),    gate_up.get(), act.get(),  workspace.get(),
                          last_h.get(),  logits.get(),  tokens.get()};
  x.reserve(t * H); h.reserve(t * H); residual.reserve(t * H);
  qkv.reserve(t * qkv_width()); attn.reserve(t * Q);
  gate_up.reserve(t * 2 * I); act.reserve(t * I);
  workspace.reserve(cuda::paged_attention_workspace_floats(T, attn_shape, parts));
  last_h.reserve(to_size(R * H)); logits.reserve(to_size(R * V)); tokens.reserve(to_size(R));
  const void* after[] = {x.get(),       h.get(),   residual.get(), qkv.get(),
                         attn.get(),    gate_up.get(), act.get(),  workspace.get(),
                         last_h.get(),  logits.get(),  tokens.get()};
  if (!std::equal(std::begin(before), std::end(before), std::begin(after))) drop_graphs();
}

CudaModelRunner::Output CudaModelRunner::forward(const Input& in, bool return_logits) {
  Impl& m = *impl_;
  const int32_t longest = check_runner_input(in, m.num_blocks, m.block_size, m.V);
  const int64_t T = static_cast<int64_t>(in.input_ids.size());
  const int64_t S = static_cast<int64_t>(in.context_lens.size());
  Output out;
  if (T == 0) return out;
  cudaStream_t st = m.stream;
  int64_t R = 0;  // sampled rows whose results come back
  SERVESIM_CUDA_CHECK(cudaEventRecord(m.step_start, st));  // the step: upload, layers, download

  if (m.use_graphs && graph_step(in, m.block_size, m.graph_max_blocks)) {
    // Padded to the bucket: padding rows read token 0 at position 0 through block 0 (context 1)
    // and write no K/V (slot -1); their tokens and logits are not copied back.
    const int32_t B = graph_bucket(S);
    const int64_t cap = m.graph_max_blocks;
    const int64_t copy = std::min<int64_t>(in.max_blocks_per_seq, cap);
    std::vector<int32_t>& h = m.graph_staging;
    h.assign(to_size(kTables + B * cap), 0);
    for (int64_t s = 0; s < B; ++s) {
      const bool real = s < S;
      const size_t i = to_size(s);
      h[to_size(kIds + s)] = real ? in.input_ids[i] : 0;
      h[to_size(kPositions + s)] = real ? in.positions[i] : 0;
      h[to_size(kSlots + s)] = real ? in.slot_mapping[i] : -1;
      h[to_size(kContextLens + s)] = real ? in.context_lens[i] : 1;
      h[to_size(kRows + s)] = static_cast<int32_t>(s);
      if (real)
        std::copy_n(in.block_tables.begin() + static_cast<std::ptrdiff_t>(s * in.max_blocks_per_seq),
                    copy, h.begin() + kTables + s * cap);
    }
    for (int64_t s = 0; s <= B; ++s) h[to_size(kCu + s)] = static_cast<int32_t>(s);
    m.graph_ints.reserve(to_size(kTables + kN * cap));
    SERVESIM_CUDA_CHECK(cudaMemcpyAsync(m.graph_ints.get(), h.data(), h.size() * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, st));
    // The attention's partitioning is fixed by the capacity, not by this step's contexts:
    // partitions past a context's end contribute nothing.
    const int parts = cuda::paged_attention_partitions(B, m.model.num_heads, cap * m.block_size);
    m.reserve_activations(B, B, parts);  // drops the graphs if a buffer moved
    auto it = std::find_if(m.graphs.begin(), m.graphs.end(),
                           [&](const Impl::Graph& g) { return g.batch == B; });
    if (it == m.graphs.end()) {
      const int32_t* g = m.graph_ints.get();
      const Impl::StepInputs gin{g + kIds,          g + kPositions, g + kSlots, g + kCu,
                                 g + kContextLens, g + kTables,    g + kRows,  cap};
      // A warm-up run first (cuBLAS picks and sets up its kernels outside the capture); it
      // computes this very step, and the replay below rewrites the same K and V.
      m.enqueue_forward(gin, B, B, B, parts);
      Impl::Graph graph{B, nullptr};
      cudaGraph_t captured = nullptr;
      SERVESIM_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      try {
        m.enqueue_forward(gin, B, B, B, parts);
      } catch (...) {
        cudaStreamEndCapture(st, &captured);
        if (captured != nullptr) cudaGraphDestroy(captured);
        throw;
      }
      SERVESIM_CUDA_CHECK(cudaStreamEndCapture(st, &captured));
      const cudaError_t made = cudaGraphInstantiate(&graph.exec, captured, 0);
      cudaGraphDestroy(captured);
      SERVESIM_CUDA_CHECK(made);
      m.graphs.push_back(graph);
      it = m.graphs.end() - 1;
    }
    SERVESIM_CUDA_CHECK(cudaGraphLaunch(it->exec, st));
    R = S;
  } else {
    std::vector<int32_t> rows;  // the last token of each sampled sequence
    for (int64_t s = 0; s < S; ++s)
      if (in.sample[to_size(s)]) rows.push_back(in.cu_seqlens[to_size(s + 1)] - 1);
    R = static_cast<int64_t>(rows.size());
    // One upload: ids | positions | slots | cu_seqlens | context_lens | block_tables | rows.
    std::vector<int32_t> ints;
    const std::vector<int32_t>* parts_of_ints[] = {&in.input_ids, &in.positions,
                                                   &in.slot_mapping, &in.cu_seqlens,
                                                   &in.context_lens, &in.block_tables, &rows};
    for (const std::vector<int32_t>* v : parts_of_ints)
      ints.insert(ints.end(), v->begin(), v->end());
    m.ints.reserve(ints.size());
    SERVESIM_CUDA_CHECK(cudaMemcpyAsync(m.ints.get(), ints.data(), ints.size() * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, st));
    const size_t t = to_size(T);
    Impl::StepInputs ein{};
    ein.ids = m.ints.get();
    ein.positions = ein.ids + t;
    ein.slots = ein.positions + t;
    ein.cu_seqlens = ein.slots + t;
    ein.context_lens = ein.cu_seqlens + S + 1;
    ein.block_tables = ein.context_lens + S;
    ein.rows = ein.block_tables + in.block_tables.size();
    ein.max_blocks_per_seq = in.max_blocks_per_seq;
    const int parts = cuda::paged_attention_partitions(T, m.model.num_heads, longest);
    m.reserve_activations(T, R, parts);
    m.enqueue_forward(ein, T, S, R, parts);
  }

  if (R > 0) {
    out.next_tokens.resize(to_size(R));
    SERVESIM_CUDA_CHECK(cudaMemcpyAsync(out.next_tokens.data(), m.tokens.get(),
                                        to_size(R) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                        st));
    if (return_logits) {
      out.logits.resize(to_size(R * m.V));
      SERVESIM_CUDA_CHECK(cudaMemcpyAsync(out.logits.data(), m.logits.get(),
                                          out.logits.size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, st));
    }
  }
  SERVESIM_CUDA_CHECK(cudaEventRecord(m.step_end, st));
  SERVESIM_CUDA_CHECK(cudaStreamSynchronize(st));
  float ms = 0;
  SERVESIM_CUDA_CHECK(cudaEventElapsedTime(&ms, m.step_start, m.step_end));
  m.last_step_seconds = ms / 1e3;
  return out;
}

void CudaModelRunner::Impl::enqueue_forward(const StepInputs& in, int64_t T, int64_t S,
                                            int64_t R, int parts) {
  const int64_t W = qkv_width();
  const cuda::PagedAttentionShape attn_shape{model.num_heads, model.num_kv_heads, model.head_dim,
                                             block_size};
  const cuda::RopeCacheShape rope{model.num_heads, model.num_kv_heads, model.head_dim,
                                  int64_t{num_blocks} * block_size,
                                  static_cast<float>(model.rope_theta)};
  const float eps = static_cast<float>(model.rms_norm_eps);
  cudaStream_t st = stream;

  cuda::embedding(in.ids, embed.get(), T, V, H, x.get(), st);
  // The first layer's add starts the residual stream at the embeddings.
  SERVESIM_CUDA_CHECK(cudaMemsetAsync(residual.get(), 0, to_size(T * H) * sizeof(float), st));
  for (Layer& l : layers) {
    cuda::fused_add_rms_norm(x.get(), residual.get(), l.input_layernorm.get(), nullptr, T, H,
                             eps, h.get(), st);
    cuda::linear(cublas, h.get(), l.qkv.get(), T, H, W, qkv.get(), CUDA_R_16BF);
    cuda::rope_and_cache(qkv.get(), l.qkv_bias.size() > 0 ? l.qkv_bias.get() : nullptr,
                         in.positions, in.slots, T, rope, l.k_cache.get(), l.v_cache.get(), st);
    cuda::paged_attention(qkv.get(), W, l.k_cache.get(), l.v_cache.get(), in.cu_seqlens, S,
                          in.context_lens, in.block_tables, in.max_blocks_per_seq, T, attn_shape,
                          parts, workspace.get(), attn.get(), st);
    cuda::linear(cublas, attn.get(), l.o.get(), T, Q, H, x.get(), CUDA_R_16BF);
    cuda::fused_add_rms_norm(x.get(), residual.get(), l.post_attention_layernorm.get(), nullptr,
                             T, H, eps, h.get(), st);
    cuda::linear(cublas, h.get(), l.gate_up.get(), T, H, 2 * I, gate_up.get(), CUDA_R_16BF);
    cuda::silu_and_mul(gate_up.get(), T, I, act.get(), st);
    cuda::linear(cublas, act.get(), l.down.get(), T, I, H, x.get(), CUDA_R_16BF);
  }
  if (R > 0) {  // final norm and LM head on the sampled rows only
    cuda::fused_add_rms_norm(x.get(), residual.get(), norm.get(), in.rows, R, H, eps,
                             last_h.get(), st);
    cuda::linear(cublas, last_h.get(), output_matrix(), R, H, V, logits.get(), CUDA_R_32F);
    cuda::argmax(logits.get(), R, V, tokens.get(), st);
  }
}

}  // namespace servesim
