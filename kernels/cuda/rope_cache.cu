#include "kernels/cuda/rope_cache.cuh"

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {
namespace {

// One block per token. Threads stride over the rotation pairs of q and k heads, then over v.
__global__ void rope_and_cache_kernel(__nv_bfloat16* qkv, const float* bias,
                                      const int32_t* positions, const int32_t* slot_mapping,
                                      RopeCacheShape s, __nv_bfloat16* k_cache,
                                      __nv_bfloat16* v_cache) {
  const int64_t t = blockIdx.x;
  const int64_t hd = s.head_dim, half = hd / 2;
  const int64_t q_width = s.num_heads * hd, kv_width = s.num_kv_heads * hd;
  __nv_bfloat16* row = qkv + t * (q_width + 2 * kv_width);
  const float pos = static_cast<float>(positions[t]);
  const int64_t slot = slot_mapping[t];
  __nv_bfloat16* k_dst = slot >= 0 ? k_cache + slot * kv_width : nullptr;
  __nv_bfloat16* v_dst = slot >= 0 ? v_cache + slot * kv_width : nullptr;

  const int64_t pairs = (s.num_heads + s.num_kv_heads) * half;
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int64_t head = p / half, i = p % half;
    const int64_t col = head * hd + i;  // q heads then k heads: contiguous in the row
    float x1 = __bfloat162float(row[col]), x2 = __bfloat162float(row[col + half]);
    if (bias != nullptr) {
      x1 += bias[col];
      x2 += bias[col + half];
    }
    // inv_freq = theta^(-2i/d) in float32, as Hugging Face computes it.
    const float inv_freq = powf(s.theta, -2.0f * static_cast<float>(i) / static_cast<float>(hd));
    float sn, cs;
    sincosf(pos * inv_freq, &sn, &cs);
    const float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
    if (head < s.num_heads) {
      row[col] = __float2bfloat16(y1);
      row[col + half] = __float2bfloat16(y2);
    } else if (k_dst != nullptr) {
      const int64_t kc = col - q_width;
      k_dst[kc] = __float2bfloat16(y1);
      k_dst[kc + half] = __float2bfloat16(y2);
    }
  }
  if (v_dst == nullptr) return;
  const __nv_bfloat16* v = row + q_width + kv_width;
  for (int64_t j = threadIdx.x; j < kv_width; j += blockDim.x) {
    float x = __bfloat162float(v[j]);
    if (bias != nullptr) x += bias[q_width + kv_width + j];
    v_dst[j] = __float2bfloat16(x);
  }
}

}  // namespace

void rope_and_cache(__nv_bfloat16* qkv, const float* bias, const int32_t* positions,
                    const int32_t* slot_mapping, int64_t num_tokens, const RopeCacheShape& shape,
                    __nv_bfloat16* k_cache, __nv_bfloat16* v_cache, cudaStream_t stream) {
  SERVESIM_CUDA_REQUIRE(num_tokens >= 0 && shape.head_dim > 0 && shape.head_dim % 2 == 0);
  SERVESIM_CUDA_REQUIRE(shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0);
  SERVESIM_CUDA_REQUIRE(shape.num_slots > 0 && k_cache != nullptr && v_cache != nullptr);
  if (num_tokens == 0) return;
  rope_and_cache_kernel<<<static_cast<unsigned>(num_tokens), 128, 0, stream>>>(
      qkv, bias, positions, slot_mapping, shape, k_cache, v_cache);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servesim::cuda
