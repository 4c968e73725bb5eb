#include "kernels/cuda/fill_random.cuh"

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {
namespace {

// splitmix64's finaliser: a good 64-bit mix of (seed, index).
__device__ uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_random_kernel(__nv_bfloat16* x, size_t n, uint64_t seed, float scale,
                                   float offset) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = mix(seed * 0x9e3779b97f4a7c15ull + i);
    const float u = static_cast<float>(r >> 40) * (1.0f / 8388608.0f) - 1.0f;  // 24 bits
    x[i] = __float2bfloat16(offset + scale * u);
  }
}

}  // namespace

void fill_random(__nv_bfloat16* x, size_t n, uint64_t seed, float scale, float offset,
                 cudaStream_t stream) {
  SERVESIM_CUDA_REQUIRE(x != nullptr || n == 0);
  if (n == 0) return;
  fill_random_kernel<<<1024, 256, 0, stream>>>(x, n, seed, scale, offset);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servesim::cuda
