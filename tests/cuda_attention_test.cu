// The attention-side CUDA kernels against their CPU twins: rope_and_cache against
// rotary_embedding + reshape_and_cache (with Q/K/V biases and a padding slot), and paged_attention
// against cpu::paged_attention on a batch mixing a prefill chunk, a long decode and a whole
// prompt, with and without context partitions, for several head sizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_ops.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/rope_cache.cuh"

namespace servesim::cuda {
namespace {

using bf16 = __nv_bfloat16;

std::vector<float> random_bf16_values(size_t n, uint64_t seed, float stddev = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return from_bf16(to_bf16(x));
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(double{want[i]}))) << "index " << i;
}

TEST(CudaAttentionTest, RopeAndCache) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  const int64_t T = 6, heads = 4, kv = 2, hd = 64, slots = 32;
  const int64_t Q = heads * hd, KV = kv * hd, W = Q + 2 * KV;
  const std::vector<int32_t> positions = {0, 1, 2, 100, 3000, 7};
  const std::vector<int32_t> slot_mapping = {5, 9, -1, 0, 31, 17};
  const std::vector<float> qkv = random_bf16_values(T * W, 11);
  const std::vector<float> bias = random_bf16_values(W, 12, 0.1f);
  // Reference: bias, split, rotate, cache.
  std::vector<float> q(T * Q), k(T * KV), v(T * KV);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < W; ++j) {
      const float x = qkv[t * W + j] + bias[j];
      if (j < Q) q[t * Q + j] = x;
      else if (j < Q + KV) k[t * KV + j - Q] = x;
      else v[t * KV + j - Q - KV] = x;
    }
  cpu::rotary_embedding(positions, q, k, heads, kv, hd, 1e6);
  std::vector<float> k_cache(slots * KV, 0.0f), v_cache(slots * KV, 0.0f);
  cpu::reshape_and_cache(k, v, slot_mapping, k_cache, v_cache, kv, hd);

  auto d_qkv = to_device(to_bf16(qkv));
  auto d_bias = to_device(bias);
  auto d_pos = to_device(positions);
  auto d_slots = to_device(slot_mapping);
  auto d_k = to_device(to_bf16(std::vector<float>(slots * KV, 0.0f)));
  auto d_v = to_device(to_bf16(std::vector<float>(slots * KV, 0.0f)));
  rope_and_cache(d_qkv.get(), d_bias.get(), d_pos.get(), d_slots.get(), T,
                 RopeCacheShape{heads, kv, hd, slots, 1e6f}, d_k.get(), d_v.get(), nullptr);
  const std::vector<float> got_qkv = from_bf16(to_host(d_qkv.get(), d_qkv.size()));
  std::vector<float> got_q;
  for (int64_t t = 0; t < T; ++t)
    got_q.insert(got_q.end(), got_qkv.begin() + t * W, got_qkv.begin() + t * W + Q);
  expect_close(got_q, q, 2e-2);
  expect_close(from_bf16(to_host(d_k.get(), d_k.size())), k_cache, 2e-2);
  expect_close(from_bf16(to_host(d_v.get(), d_v.size())), v_cache, 1e-2);
}

// head_dim, and whether to split contexts into partitions.
class CudaPagedAttentionTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CudaPagedAttentionTest, MatchesCpu) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  const auto [hd, split] = GetParam();
  const int64_t heads = 4, kv = 2, bs = 16, num_blocks = 80;
  // A prefill chunk (5 new of 9), a decode at 700 (two partitions), a whole 3-token prompt.
  const std::vector<int32_t> cu = {0, 5, 6, 9}, ctx = {9, 700, 3};
  const int64_t T = 9, S = 3, max_blocks = 44;
  std::vector<int32_t> perm(num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(13));
  std::vector<int32_t> tables(S * max_blocks, -1);
  size_t next = 0;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t b = 0; b * bs < ctx[s]; ++b) tables[s * max_blocks + b] = perm[next++];
  const int64_t KV = kv * hd, Q = heads * hd;
  const std::vector<float> k_cache = random_bf16_values(num_blocks * bs * KV, 14);
  const std::vector<float> v_cache = random_bf16_values(num_blocks * bs * KV, 15);
  const std::vector<float> q = random_bf16_values(T * Q, 16, 0.5f);
  std::vector<float> want(T * Q);
  cpu::paged_attention(q, k_cache, v_cache, cu, ctx, tables, max_blocks,
                       cpu::AttentionShape{heads, kv, hd, bs}, want);

  const PagedAttentionShape shape{heads, kv, hd, bs};
  const int parts = split ? paged_attention_partitions(T, heads, 700) : 1;
  if (split) ASSERT_EQ(parts, 2);
  auto d_q = to_device(to_bf16(q));
  auto d_k = to_device(to_bf16(k_cache));
  auto d_v = to_device(to_bf16(v_cache));
  auto d_cu = to_device(cu);
  auto d_ctx = to_device(ctx);
  auto d_tables = to_device(tables);
  DeviceBuffer<float> d_ws(paged_attention_workspace_floats(T, shape, parts));
  DeviceBuffer<bf16> d_out(want.size());
  paged_attention(d_q.get(), Q, d_k.get(), d_v.get(), d_cu.get(), S, d_ctx.get(),
                  d_tables.get(), max_blocks, T, shape, parts, d_ws.get(), d_out.get(), nullptr);
  expect_close(from_bf16(to_host(d_out.get(), d_out.size())), want, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, CudaPagedAttentionTest,
                         ::testing::Combine(::testing::Values(16, 64, 128),
                                            ::testing::Bool()));

}  // namespace
}  // namespace servesim::cuda
