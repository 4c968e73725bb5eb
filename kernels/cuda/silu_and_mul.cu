#include "kernels/cuda/silu_and_mul.cuh"

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {
namespace {

// Grid-stride over the T x d outputs.
__global__ void silu_and_mul_kernel(const __nv_bfloat16* x, int64_t n, int64_t d,
                                    __nv_bfloat16* out) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / d, i = k % d;
    const float g = __bfloat162float(x[t * 2 * d + i]);
    const float u = __bfloat162float(x[t * 2 * d + d + i]);
    out[k] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

void silu_and_mul(const __nv_bfloat16* x, int64_t num_tokens, int64_t d, __nv_bfloat16* out,
                  cudaStream_t stream) {
  SERVESIM_CUDA_REQUIRE(num_tokens >= 0 && d > 0 && x != nullptr && out != nullptr);
  const int64_t n = num_tokens * d;
  if (n == 0) return;
  const int64_t blocks = (n + 255) / 256;
  silu_and_mul_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0,
                        stream>>>(x, n, d, out);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servesim::cuda
