#include "kernels/cuda/rms_norm.cuh"

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {
namespace {

constexpr int kThreads = 256;

// Sum over the block; every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  return total;
}

// One block per output row. Pass 1 adds and sums squares; pass 2 normalises (re-reading the
// residual row, which the same thread wrote).
__global__ void fused_add_rms_norm_kernel(const __nv_bfloat16* x, float* residual,
                                          const __nv_bfloat16* weight, const int32_t* rows,
                                          int64_t hidden, float eps, __nv_bfloat16* out) {
  const int64_t r = blockIdx.x;
  const int64_t i = rows != nullptr ? rows[r] : r;
  float* res = residual + i * hidden;
  float sum_sq = 0;
  for (int64_t j = threadIdx.x; j < hidden; j += kThreads) {
    float v = res[j];
    if (x != nullptr) {
      v += __bfloat162float(x[i * hidden + j]);
      res[j] = v;
    }
    sum_sq += v * v;
  }
  const float inv_rms = rsqrtf(block_sum(sum_sq) / static_cast<float>(hidden) + eps);
  for (int64_t j = threadIdx.x; j < hidden; j += kThreads)
    out[r * hidden + j] = __float2bfloat16(res[j] * inv_rms * __bfloat162float(weight[j]));
}

}  // namespace

void fused_add_rms_norm(const __nv_bfloat16* x, float* residual, const __nv_bfloat16* weight,
                        const int32_t* rows, int64_t num_rows, int64_t hidden, float eps,
                        __nv_bfloat16* out, cudaStream_t stream) {
  SERVESIM_CUDA_REQUIRE(num_rows >= 0 && hidden > 0 && eps >= 0);
  SERVESIM_CUDA_REQUIRE(residual != nullptr && weight != nullptr && out != nullptr);
  if (num_rows == 0) return;
  fused_add_rms_norm_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      x, residual, weight, rows, hidden, eps, out);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servesim::cuda
