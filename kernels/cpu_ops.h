// Float32 reference operators of a Llama / Qwen2-family decoder, on the host: the CPU engine runs
// with them, and every device kernel is checked against them. Each is a plain loop over flat
// row-major arrays whose sizes are explicit; the caller owns every buffer. Shapes are checked on
// entry (a mismatch is a programming error: it reports the call and aborts, in every build).
// Each output row depends only on its own inputs, in a fixed order, so results do not change with
// how tokens are batched. Names follow vLLM's (slot_mapping, block_tables, cu_seqlens).
#pragma once

#include <cstdint>
#include <span>

namespace servesim::cpu {

// Where a call was made. As default arguments, __builtin_FILE / __builtin_FUNCTION /
// __builtin_LINE take the caller's (std::source_location without needing a compiler that has it:
// clang 14 with libstdc++ does not).
struct CallSite {
  const char* file;
  const char* function;
  unsigned line;
};
inline CallSite here(const char* file = __builtin_FILE(), const char* function = __builtin_FUNCTION(),
                     unsigned line = __builtin_LINE()) {
  return {file, function, line};
}

// Aborts with the caller's file and line and `what` unless `ok`: for shape and index checks that
// must hold in release builds too (a wrong slot would write outside the KV cache).
void require(bool ok, const char* what, CallSite where = here());

// out[t, :] = table[ids[t], :].
// table: [vocab, hidden]; out: [ids.size(), hidden]. REQUIRES: 0 <= ids[t] < vocab.
void embedding(std::span<const int32_t> ids, std::span<const float> table, int64_t hidden,
               std::span<float> out);

// RMSNorm of each row: out[t, i] = x[t, i] / sqrt(mean_j(x[t, j]^2) + eps) * weight[i].
// x, out: [T, hidden] with hidden = weight.size(); out may be x.
void rms_norm(std::span<const float> x, std::span<const float> weight, double eps,
              std::span<float> out);

// vLLM's fused_add_rms_norm: residual = x + residual, then out = rms_norm(residual) * weight.
// x, residual, out: [T, hidden]; out may be x.
void fused_add_rms_norm(std::span<const float> x, std::span<float> residual,
                        std::span<const float> weight, double eps, std::span<float> out);

// y = x W^T + b. x: [T, in]; weight: [out, in] (Hugging Face's layout); bias: [out] or empty;
// y: [T, out]. Each dot product is summed in index order.
void linear(std::span<const float> x, std::span<const float> weight, std::span<const float> bias,
            int64_t in_features, int64_t out_features, std::span<float> y);

// Rotary position embedding, neox style as Hugging Face's Llama and Qwen2 apply it: for each head
// and i < head_dim / 2, with angle = positions[t] * theta^(-2i / head_dim),
//   x'[i]            = x[i] cos(angle) - x[i + head_dim/2] sin(angle)
//   x'[i + head_dim/2] = x[i + head_dim/2] cos(angle) + x[i] sin(angle).
// In place on q: [T, num_heads, head_dim] and k: [T, num_kv_heads, head_dim].
// REQUIRES: head_dim even; positions[t] >= 0.
void rotary_embedding(std::span<const int32_t> positions, std::span<float> q, std::span<float> k,
                      int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, double theta);

// vLLM's reshape_and_cache: writes token t's key and value into cache slot slot_mapping[t]
// (slot = block * block_size + offset). A negative slot is padding and is skipped.
// k, v: [T, num_kv_heads, head_dim]; k_cache, v_cache: [num_blocks, block_size, num_kv_heads,
// head_dim], that is [num_slots, num_kv_heads, head_dim]. REQUIRES: slot < num_slots.
void reshape_and_cache(std::span<const float> k, std::span<const float> v,
                       std::span<const int32_t> slot_mapping, std::span<float> k_cache,
                       std::span<float> v_cache, int64_t num_kv_heads, int64_t head_dim);

// Heads and block size of paged attention.
struct AttentionShape {
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // divides num_heads; query head h reads KV head h / (heads / kv)
  int64_t head_dim = 0;
  int64_t block_size = 0;    // KV cache slots per block
};

// Paged attention over a batch of sequences whose query tokens are concatenated.
// Sequence s owns query rows cu_seqlens_q[s] .. cu_seqlens_q[s+1] - 1 (q_len of them), and
// context_lens[s] tokens in the cache, this step's included (so q_len <= context_lens[s]); its
// query row j sits at position p = context_lens[s] - q_len + j and attends causally to cache
// positions 0..p: a prefill chunk is causal within the chunk and sees all of the earlier context,
// a decode sees everything. Cache position c lives in slot
//   block_tables[s * max_blocks_per_seq + c / block_size] * block_size + c % block_size.
// Softmax of q.k / sqrt(head_dim), with the maximum subtracted first; sums in double.
// q, out: [cu_seqlens_q.back(), num_heads, head_dim]; caches as for reshape_and_cache;
// block_tables: [num_seqs, max_blocks_per_seq] int32.
void paged_attention(std::span<const float> q, std::span<const float> k_cache,
                     std::span<const float> v_cache, std::span<const int32_t> cu_seqlens_q,
                     std::span<const int32_t> context_lens, std::span<const int32_t> block_tables,
                     int64_t max_blocks_per_seq, const AttentionShape& shape, std::span<float> out);

// vLLM's silu_and_mul: x: [T, 2 * d] holding gate then up on each row; out[t, i] =
// silu(gate[t, i]) * up[t, i] with silu(g) = g / (1 + exp(-g)); out: [T, d].
void silu_and_mul(std::span<const float> x, int64_t d, std::span<float> out);

// The index of the largest value, the lowest such index on ties. REQUIRES: !x.empty().
int32_t argmax(std::span<const float> x);

}  // namespace servesim::cpu
