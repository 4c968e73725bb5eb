#include "kernels/cuda/embedding.cuh"

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {
namespace {

// One block per token; threads stride over the hidden dimension.
__global__ void embedding_kernel(const int32_t* ids, const __nv_bfloat16* table, int64_t vocab,
                                 int64_t hidden, __nv_bfloat16* out) {
  const int64_t t = blockIdx.x;
  int64_t id = ids[t];
  id = id < 0 ? 0 : (id >= vocab ? vocab - 1 : id);
  const __nv_bfloat16* row = table + id * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) out[t * hidden + i] = row[i];
}

}  // namespace

void embedding(const int32_t* ids, const __nv_bfloat16* table, int64_t num_tokens, int64_t vocab,
               int64_t hidden, __nv_bfloat16* out, cudaStream_t stream) {
  SERVESIM_CUDA_REQUIRE(num_tokens >= 0 && vocab > 0 && hidden > 0);
  if (num_tokens == 0) return;
  embedding_kernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(ids, table, vocab,
                                                                           hidden, out);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servesim::cuda
