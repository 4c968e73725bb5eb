#include "kernels/cuda/linear.cuh"

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {

void linear(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* weight,
            int64_t num_tokens, int64_t in_features, int64_t out_features, void* y,
            cudaDataType_t y_type) {
  SERVESIM_CUDA_REQUIRE(num_tokens >= 0 && in_features > 0 && out_features > 0);
  SERVESIM_CUDA_REQUIRE(y_type == CUDA_R_16BF || y_type == CUDA_R_32F);
  SERVESIM_CUDA_REQUIRE(num_tokens < (int64_t{1} << 31) && out_features < (int64_t{1} << 31));
  if (num_tokens == 0) return;
  const float alpha = 1.0f, beta = 0.0f;
  const int m = static_cast<int>(out_features), n = static_cast<int>(num_tokens);
  const int k = static_cast<int>(in_features);
  // Column-major: W^T is [out, in] from the [in, out] view of W; x^T is [in, T].
  SERVESIM_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, weight,
                                     CUDA_R_16BF, k, x, CUDA_R_16BF, k, &beta, y, y_type, m,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace servesim::cuda
