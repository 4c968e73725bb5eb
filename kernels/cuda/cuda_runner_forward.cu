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

// CpuModelRunner's checks, plus those that keep the kernels inside their buffers: token ids in
// the vocabulary, and every block a sequence's context reads inside the cache.
// Returns the longest context.
int32_t check_input(const CudaModelRunner::Input& in, int32_t num_blocks, int32_t block_size,
                    int64_t vocab) {
  const size_t num_tokens = in.input_ids.size();
  require(in.positions.size() == num_tokens, "positions has one entry per token");
  require(in.slot_mapping.size() == num_tokens, "slot_mapping has one entry per token");
  require(!in.cu_seqlens.empty() && in.cu_seqlens.front() == 0, "cu_seqlens starts at 0");
  require(to_size(in.cu_seqlens.back()) == num_tokens, "cu_seqlens ends at num_tokens");
  const size_t num_seqs = in.cu_seqlens.size() - 1;
  require(in.context_lens.size() == num_seqs, "context_lens has one entry per sequence");
  require(in.sample.size() == num_seqs, "sample has one entry per sequence");
  require(in.max_blocks_per_seq >= 0 &&
              in.block_tables.size() == num_seqs * to_size(in.max_blocks_per_seq),
          "block_tables is [num_seqs, max_blocks_per_seq]");
  for (int32_t id : in.input_ids) require(id >= 0 && id < vocab, "token id in [0, vocab)");
  int32_t longest = 0;
  for (size_t s = 0; s < num_seqs; ++s) {
    const int32_t first = in.cu_seqlens[s], last = in.cu_seqlens[s + 1];
    const int32_t ctx = in.context_lens[s];
    require(first <= last && last - first <= ctx, "context_lens[s] counts this step's tokens too");
    require(last > first || !in.sample[s], "a sampled sequence has a token this step");
    const int32_t* table = in.block_tables.data() + s * to_size(in.max_blocks_per_seq);
    if (last > first) {  // attention reads blocks 0 .. (ctx - 1) / block_size
      require((ctx - 1) / block_size < in.max_blocks_per_seq, "the block table covers the context");
      for (int32_t b = 0; b <= (ctx - 1) / block_size; ++b)
        require(table[b] >= 0 && table[b] < num_blocks, "block table entries are cache blocks");
    }
    longest = std::max(longest, ctx);
    for (int32_t t = first; t < last; ++t) {
      const int32_t pos = ctx - (last - t);
      require(in.positions[to_size(t)] == pos, "positions run up to context_lens[s] - 1");
      const int32_t slot = in.slot_mapping[to_size(t)];
      if (slot < 0) continue;  // padding
      require(slot == table[pos / block_size] * block_size + pos % block_size,
              "slot_mapping agrees with block_tables");
    }
  }
  return longest;
}

}  // namespace

CudaModelRunner::Output CudaModelRunner::forward(const Input& in, bool return_logits) {
  Impl& m = *impl_;
  const int32_t longest = check_input(in, m.num_blocks, m.block_size, m.V);
  const int64_t T = static_cast<int64_t>(in.input_ids.size());
  const int64_t S = static_cast<int64_t>(in.context_lens.size());
  const size_t t = to_size(T);
  std::vector<int32_t> rows;  // the last token of each sampled sequence
  for (int64_t s = 0; s < S; ++s)
    if (in.sample[to_size(s)]) rows.push_back(in.cu_seqlens[to_size(s + 1)] - 1);
  const int64_t R = static_cast<int64_t>(rows.size());
  Output out;
  if (T == 0) return out;

  // One upload: ids | positions | slots | cu_seqlens | context_lens | block_tables | rows.
  std::vector<int32_t> ints;
  const std::vector<int32_t>* parts_of_ints[] = {&in.input_ids, &in.positions, &in.slot_mapping,
                                                 &in.cu_seqlens, &in.context_lens,
                                                 &in.block_tables, &rows};
  for (const std::vector<int32_t>* v : parts_of_ints)
    ints.insert(ints.end(), v->begin(), v->end());
  m.ints.reserve(ints.size());
  cudaStream_t st = m.stream;
  SERVESIM_CUDA_CHECK(cudaMemcpyAsync(m.ints.get(), ints.data(), ints.size() * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, st));
  const int32_t* ids = m.ints.get();
  const int32_t* positions = ids + t;
  const int32_t* slots = positions + t;
  const int32_t* cu = slots + t;
  const int32_t* ctx = cu + S + 1;
  const int32_t* tables = ctx + S;
  const int32_t* rows_dev = tables + in.block_tables.size();

  const int64_t H = m.H, I = m.I, Q = m.Q, W = m.qkv_width();
  const cuda::PagedAttentionShape attn_shape{m.model.num_heads, m.model.num_kv_heads,
                                       m.model.head_dim, m.block_size};
  const cuda::RopeCacheShape rope{m.model.num_heads, m.model.num_kv_heads, m.model.head_dim,
                                  int64_t{m.num_blocks} * m.block_size,
                                  static_cast<float>(m.model.rope_theta)};
  const int parts = cuda::paged_attention_partitions(T, m.model.num_heads, longest);
  m.x.reserve(t * H); m.h.reserve(t * H); m.residual.reserve(t * H);
  m.qkv.reserve(t * W); m.attn.reserve(t * Q);
  m.gate_up.reserve(t * 2 * I); m.act.reserve(t * I);
  m.workspace.reserve(cuda::paged_attention_workspace_floats(T, attn_shape, parts));
  m.last_h.reserve(to_size(R * H)); m.logits.reserve(to_size(R * m.V)); m.tokens.reserve(to_size(R));
  const float eps = static_cast<float>(m.model.rms_norm_eps);

  cuda::embedding(ids, m.embed.get(), T, m.V, H, m.x.get(), st);
  // The first layer's add starts the residual stream at the embeddings.
  SERVESIM_CUDA_CHECK(cudaMemsetAsync(m.residual.get(), 0, t * H * sizeof(float), st));
  for (Impl::Layer& l : m.layers) {
    cuda::fused_add_rms_norm(m.x.get(), m.residual.get(), l.input_layernorm.get(), nullptr, T, H,
                             eps, m.h.get(), st);
    cuda::linear(m.cublas, m.h.get(), l.qkv.get(), T, H, W, m.qkv.get(), CUDA_R_16BF);
    cuda::rope_and_cache(m.qkv.get(), l.qkv_bias.size() > 0 ? l.qkv_bias.get() : nullptr,
                         positions, slots, T, rope, l.k_cache.get(), l.v_cache.get(), st);
    cuda::paged_attention(m.qkv.get(), W, l.k_cache.get(), l.v_cache.get(), cu, S, ctx, tables,
                          in.max_blocks_per_seq, T, attn_shape, parts, m.workspace.get(),
                          m.attn.get(), st);
    cuda::linear(m.cublas, m.attn.get(), l.o.get(), T, Q, H, m.x.get(), CUDA_R_16BF);
    cuda::fused_add_rms_norm(m.x.get(), m.residual.get(), l.post_attention_layernorm.get(),
                             nullptr, T, H, eps, m.h.get(), st);
    cuda::linear(m.cublas, m.h.get(), l.gate_up.get(), T, H, 2 * I, m.gate_up.get(), CUDA_R_16BF);
    cuda::silu_and_mul(m.gate_up.get(), T, I, m.act.get(), st);
    cuda::linear(m.cublas, m.act.get(), l.down.get(), T, I, H, m.x.get(), CUDA_R_16BF);
  }
  if (R > 0) {  // final norm and LM head on the sampled rows only
    cuda::fused_add_rms_norm(m.x.get(), m.residual.get(), m.norm.get(), rows_dev, R, H, eps,
                             m.last_h.get(), st);
    cuda::linear(m.cublas, m.last_h.get(), m.output_matrix(), R, H, m.V, m.logits.get(),
                 CUDA_R_32F);
    cuda::argmax(m.logits.get(), R, m.V, m.tokens.get(), st);
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
  SERVESIM_CUDA_CHECK(cudaStreamSynchronize(st));
  return out;
}

}  // namespace servesim
