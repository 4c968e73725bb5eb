// Error checking for CUDA runtime and cuBLAS calls. Each macro evaluates its argument exactly
// once; on failure it prints the statement, file, line and the library's error string, then aborts
// (in every build: a failed launch or copy leaves device state that nothing downstream can trust).
// After a kernel launch, check the launch with SERVESIM_CUDA_CHECK(cudaGetLastError()).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace servesim::cuda {

// Prints "file:line: CUDA error: <error> in `statement`" to stderr and aborts.
[[noreturn]] void check_failed(const char* library, const char* statement, const char* error,
                               const char* file, int line);

}  // namespace servesim::cuda

#define SERVESIM_CUDA_CHECK(expr)                                                             \
  do {                                                                                        \
    const cudaError_t servesim_err_ = (expr);                                                 \
    if (servesim_err_ != cudaSuccess)                                                         \
      ::servesim::cuda::check_failed("CUDA", #expr, cudaGetErrorString(servesim_err_),        \
                                     __FILE__, __LINE__);                                     \
  } while (0)

#define SERVESIM_CUBLAS_CHECK(expr)                                                           \
  do {                                                                                        \
    const cublasStatus_t servesim_status_ = (expr);                                           \
    if (servesim_status_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::servesim::cuda::check_failed("cuBLAS", #expr, cublasGetStatusString(servesim_status_), \
                                     __FILE__, __LINE__);                                     \
  } while (0)

// Shape and argument checks in launchers: like cpu::require, abort with the condition's text.
#define SERVESIM_CUDA_REQUIRE(cond)                                                           \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::servesim::cuda::check_failed("launcher", #cond, "requirement failed", __FILE__,       \
                                     __LINE__);                                               \
  } while (0)
