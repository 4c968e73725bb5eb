// Each CUDA kernel against its float32 CPU twin (kernels/cpu_ops.h) on seeded random inputs that
// are rounded to bf16 first, so both sides see the same values; outputs agree within what bf16
// storage allows. Without a device the kernel tests skip; the error-macro tests still run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_ops.h"
#include "kernels/cuda/argmax.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope_cache.cuh"
#include "kernels/cuda/silu_and_mul.cuh"

namespace servesim::cuda {
namespace {

constexpr double kTol = 2e-2;  // relative, against max(1, |reference|)

using bf16 = __nv_bfloat16;

// Normal values rounded to bf16, so the CPU reference sees exactly what the device stores.
std::vector<float> random_bf16_values(size_t n, uint64_t seed, float stddev = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return from_bf16(to_bf16(x));
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  double tol = kTol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(double{want[i]}))) << "index " << i;
}

std::vector<float> download_bf16(const DeviceBuffer<bf16>& d) {
  return from_bf16(to_host(d.get(), d.size()));
}

#define SKIP_WITHOUT_DEVICE() \
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device"

TEST(CudaCheckTest, EvaluatesOnce) {
  int calls = 0;
  auto succeed = [&] { ++calls; return cudaSuccess; };
  SERVESIM_CUDA_CHECK(succeed());
  EXPECT_EQ(calls, 1);
}

TEST(CudaCheckDeathTest, ReportsStatementFileAndLine) {
  EXPECT_DEATH(SERVESIM_CUDA_CHECK(cudaErrorInvalidValue),
               "cuda_ops_test.cu:[0-9]+: CUDA error: .* in `cudaErrorInvalidValue`");
  EXPECT_DEATH(SERVESIM_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE),
               "cuBLAS error: .* in `CUBLAS_STATUS_INVALID_VALUE`");
}

TEST(CudaDeviceTest, AvailabilityNeverAborts) {
  const bool available = cuda_device_available();
  EXPECT_EQ(available, cuda_device_available());
}

TEST(CudaOpsTest, Embedding) {
  SKIP_WITHOUT_DEVICE();
  const int64_t vocab = 50, hidden = 96;
  const std::vector<int32_t> ids = {3, 0, 49, 7, 7, 12, 1};
  const std::vector<float> table = random_bf16_values(vocab * hidden, 1);
  std::vector<float> want(ids.size() * hidden);
  cpu::embedding(ids, table, hidden, want);
  auto d_ids = to_device(ids);
  auto d_table = to_device(to_bf16(table));
  DeviceBuffer<bf16> d_out(want.size());
  embedding(d_ids.get(), d_table.get(), static_cast<int64_t>(ids.size()), vocab, hidden,
            d_out.get(), nullptr);
  expect_close(download_bf16(d_out), want, 0.0);
}

TEST(CudaOpsTest, FusedAddRmsNorm) {
  SKIP_WITHOUT_DEVICE();
  const int64_t T = 5, hidden = 300;  // not a multiple of the block size
  const std::vector<float> x = random_bf16_values(T * hidden, 2);
  std::vector<float> residual = random_bf16_values(T * hidden, 3);
  const std::vector<float> weight = random_bf16_values(hidden, 4);
  auto d_x = to_device(to_bf16(x));
  auto d_res = to_device(residual);
  auto d_w = to_device(to_bf16(weight));
  DeviceBuffer<bf16> d_out(x.size());
  std::vector<float> want(x.size());
  cpu::fused_add_rms_norm(x, residual, weight, 1e-6, want);
  fused_add_rms_norm(d_x.get(), d_res.get(), d_w.get(), nullptr, T, hidden, 1e-6f, d_out.get(),
                     nullptr);
  expect_close(download_bf16(d_out), want);
  expect_close(to_host(d_res.get(), d_res.size()), residual, 1e-6);

  // Selected rows, no add: rows 4 and 1 of the updated residual.
  auto d_rows = to_device(std::vector<int32_t>{4, 1});
  DeviceBuffer<bf16> d_sel(2 * hidden);
  fused_add_rms_norm(nullptr, d_res.get(), d_w.get(), d_rows.get(), 2, hidden, 1e-6f,
                     d_sel.get(), nullptr);
  std::vector<float> sel_want;
  for (int64_t r : {4, 1}) sel_want.insert(sel_want.end(), want.begin() + r * hidden,
                                           want.begin() + (r + 1) * hidden);
  expect_close(download_bf16(d_sel), sel_want);
}

TEST(CudaOpsTest, SiluAndMul) {
  SKIP_WITHOUT_DEVICE();
  const int64_t T = 3, d = 200;
  const std::vector<float> x = random_bf16_values(T * 2 * d, 5, 2.0f);
  std::vector<float> want(T * d);
  cpu::silu_and_mul(x, d, want);
  auto d_x = to_device(to_bf16(x));
  DeviceBuffer<bf16> d_out(want.size());
  silu_and_mul(d_x.get(), T, d, d_out.get(), nullptr);
  expect_close(download_bf16(d_out), want);
}

TEST(CudaOpsTest, ArgmaxTakesLowestIndexOnTies) {
  SKIP_WITHOUT_DEVICE();
  const int64_t rows = 4, cols = 1000;
  std::vector<float> x = random_bf16_values(rows * cols, 6);
  x[0 * cols + 700] = 9.0f;  // a tie: 300 wins
  x[0 * cols + 300] = 9.0f;
  x[2 * cols + 999] = 50.0f;
  std::fill(x.begin() + 3 * cols, x.end(), -1.0f);  // all equal: 0 wins
  auto d_x = to_device(x);
  DeviceBuffer<int32_t> d_out(rows);
  argmax(d_x.get(), rows, cols, d_out.get(), nullptr);
  const std::vector<int32_t> got = to_host(d_out.get(), rows);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(got[r], cpu::argmax(std::span<const float>(x).subspan(r * cols, cols)))
        << "row " << r;
  EXPECT_EQ(got[0], 300);
  EXPECT_EQ(got[3], 0);
}

TEST(CudaOpsTest, Linear) {
  SKIP_WITHOUT_DEVICE();
  const int64_t T = 5, in = 96, out = 40;
  const std::vector<float> x = random_bf16_values(T * in, 7);
  const std::vector<float> w = random_bf16_values(out * in, 8, 0.1f);
  std::vector<float> want(T * out);
  cpu::linear(x, w, {}, in, out, want);
  auto d_x = to_device(to_bf16(x));
  auto d_w = to_device(to_bf16(w));
  cublasHandle_t handle;
  SERVESIM_CUBLAS_CHECK(cublasCreate(&handle));
  DeviceBuffer<float> d_y32(want.size());
  DeviceBuffer<bf16> d_y16(want.size());
  linear(handle, d_x.get(), d_w.get(), T, in, out, d_y32.get(), CUDA_R_32F);
  linear(handle, d_x.get(), d_w.get(), T, in, out, d_y16.get(), CUDA_R_16BF);
  SERVESIM_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(to_host(d_y32.get(), d_y32.size()), want, 1e-3);
  expect_close(download_bf16(d_y16), want);
  SERVESIM_CUBLAS_CHECK(cublasDestroy(handle));
}

}  // namespace
}  // namespace servesim::cuda
