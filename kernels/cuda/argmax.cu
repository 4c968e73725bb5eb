#include "kernels/cuda/argmax.cuh"

#include <cmath>

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {
namespace {

constexpr int kThreads = 256;

// True when (v, i) beats (best, best_i): larger, or equal with a lower index.
__device__ bool better(float v, int32_t i, float best, int32_t best_i) {
  return v > best || (v == best && i < best_i);
}

// One block per row: each thread scans a stride, then a tree reduction.
__global__ void argmax_kernel(const float* x, int64_t cols, int32_t* out) {
  const float* row = x + blockIdx.x * cols;
  float best = -INFINITY;
  int32_t best_i = 0x7fffffff;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const float v = row[j];
    if (better(v, static_cast<int32_t>(j), best, best_i)) {
      best = v;
      best_i = static_cast<int32_t>(j);
    }
  }
  __shared__ float sv[kThreads];
  __shared__ int32_t si[kThreads];
  sv[threadIdx.x] = best;
  si[threadIdx.x] = best_i;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride && better(sv[threadIdx.x + stride], si[threadIdx.x + stride],
                                       sv[threadIdx.x], si[threadIdx.x])) {
      sv[threadIdx.x] = sv[threadIdx.x + stride];
      si[threadIdx.x] = si[threadIdx.x + stride];
    }
    __syncthreads();
  }
  // All -inf (or NaN) rows fall back to index 0, as the CPU scan does.
  if (threadIdx.x == 0) out[blockIdx.x] = si[0] == 0x7fffffff ? 0 : si[0];
}

}  // namespace

void argmax(const float* x, int64_t rows, int64_t cols, int32_t* out, cudaStream_t stream) {
  SERVESIM_CUDA_REQUIRE(rows >= 0 && cols > 0 && x != nullptr && out != nullptr);
  if (rows == 0) return;
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, cols, out);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servesim::cuda
