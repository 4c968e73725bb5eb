// Paged attention on the device (cpu::paged_attention's twin) for a batch that mixes prefill
// chunks and decodes. One thread block per (query token, head, partition): its warps walk the
// partition's cache positions with an online softmax in float32. Long contexts are split into
// partitions of kPartitionSize positions whose partial results are merged by a second kernel,
// so a small decode batch still fills the device; the last partition runs to the query's
// position, so one partition covers the whole context.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace servesim::cuda {

struct PagedAttentionShape {
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // divides num_heads
  int64_t head_dim = 0;      // at most 256; at most 32 or a multiple of 8
  int64_t block_size = 0;    // cache slots per block
};

// Cache positions per partition.
constexpr int64_t kPartitionSize = 512;

// How many partitions to split each query's context into, given the batch's longest context.
int paged_attention_partitions(int64_t num_tokens, int64_t num_heads, int64_t max_context_len);

// Float32 scratch the launcher needs for `num_partitions` (0 when it is 1).
size_t paged_attention_workspace_floats(int64_t num_tokens, const PagedAttentionShape& shape,
                                        int num_partitions);

// Semantics of cpu::paged_attention: sequence s owns query rows cu_seqlens_q[s] ..
// cu_seqlens_q[s+1] - 1; its row j sits at position context_lens[s] - q_len + j and attends to
// cache positions 0..that, looked up through block_tables [num_seqs, max_blocks_per_seq].
// q: [num_tokens] rows of q_stride bf16 elements, head h at offset h * head_dim (so q may be
// the q part of a fused qkv row); caches: [num_slots, num_kv_heads, head_dim] bf16;
// out: [num_tokens, num_heads, head_dim] bf16; workspace: paged_attention_workspace_floats()
// floats (null when that is 0). All pointers are device pointers.
// REQUIRES: every sequence's positions are covered by its block table (the caller checks).
void paged_attention(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* k_cache,
                     const __nv_bfloat16* v_cache, const int32_t* cu_seqlens_q, int64_t num_seqs,
                     const int32_t* context_lens, const int32_t* block_tables,
                     int64_t max_blocks_per_seq, int64_t num_tokens,
                     const PagedAttentionShape& shape, int num_partitions, float* workspace,
                     __nv_bfloat16* out, cudaStream_t stream);

}  // namespace servesim::cuda
