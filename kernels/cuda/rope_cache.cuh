// QKV bias, neox rotary embedding and vLLM's reshape_and_cache in one pass on the device (the twin
// of cpu::rotary_embedding followed by cpu::reshape_and_cache, with the Q/K/V biases added first).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace servesim::cuda {

struct RopeCacheShape {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;   // even
  int64_t num_slots = 0;  // num_blocks * block_size of the cache
  float theta = 10000;
};

// qkv: [T, (num_heads + 2 num_kv_heads) * head_dim] bf16, each row q | k | v as the fused QKV
// projection writes it. For each token t: adds bias (same layout, float32; null = none) to the
// row, rotates q and k by positions[t] (neox style) and writes q back in place; then, unless
// slot_mapping[t] < 0 (padding), stores k and v at slot slot_mapping[t] of k_cache / v_cache
// ([num_slots, num_kv_heads, head_dim] bf16). k and v in qkv are left as they were.
// REQUIRES: slot_mapping[t] < num_slots (checked by the caller on the host).
void rope_and_cache(__nv_bfloat16* qkv, const float* bias, const int32_t* positions,
                    const int32_t* slot_mapping, int64_t num_tokens, const RopeCacheShape& shape,
                    __nv_bfloat16* k_cache, __nv_bfloat16* v_cache, cudaStream_t stream);

}  // namespace servesim::cuda
