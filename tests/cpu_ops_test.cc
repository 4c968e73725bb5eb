// Each reference operator against a direct computation on small inputs.
#include "kernels/cpu_ops.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace servesim::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(CpuOpsTest, EmbeddingCopiesRows) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // [3, 2]
  const std::vector<int32_t> ids = {2, 0, 2};
  std::vector<float> out(6);
  embedding(ids, table, 2, out);
  EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1, 20, 21}));
}

TEST(CpuOpsTest, RmsNormOfConstantVectorIsWeight) {
  const std::vector<float> x(8, 3.0f), w = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> out(8);
  rms_norm(x, w, 0.0, out);
  for (size_t i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], w[i]);
  const std::vector<float> neg(8, -0.5f);
  rms_norm(neg, w, 0.0, out);
  for (size_t i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], -w[i]);
}

TEST(CpuOpsTest, RmsNormMatchesFormulaPerRow) {
  const size_t rows = 3, hidden = 5;
  const auto x = random_vector(rows * hidden, 1), w = random_vector(hidden, 2);
  const double eps = 1e-5;
  std::vector<float> out(x.size());
  rms_norm(x, w, eps, out);
  for (size_t t = 0; t < rows; ++t) {
    double ms = 0;
    for (size_t i = 0; i < hidden; ++i) ms += x[t * hidden + i] * x[t * hidden + i] / 5.0;
    for (size_t i = 0; i < hidden; ++i)
      EXPECT_NEAR(out[t * hidden + i], x[t * hidden + i] / std::sqrt(ms + eps) * w[i], 1e-6);
  }
}

TEST(CpuOpsTest, FusedAddRmsNormUpdatesResidualAndNormalizesTheSum) {
  const auto x = random_vector(12, 3), r0 = random_vector(12, 4), w = random_vector(6, 5);
  std::vector<float> residual = r0, out(12), sum(12), expected(12);
  for (size_t i = 0; i < 12; ++i) sum[i] = x[i] + r0[i];
  rms_norm(sum, w, 1e-6, expected);
  fused_add_rms_norm(x, residual, w, 1e-6, out);
  EXPECT_EQ(residual, sum);
  EXPECT_EQ(out, expected);
  // In place on x, as vLLM calls it.
  std::vector<float> inplace = x;
  residual = r0;
  fused_add_rms_norm(inplace, residual, w, 1e-6, inplace);
  EXPECT_EQ(inplace, expected);
}

TEST(CpuOpsTest, LinearIsXWTransposePlusBias) {
  const std::vector<float> x = {1, 2, 3, -1, 0, 1};        // [2, 3]
  const std::vector<float> w = {1, 0, 0, 0, 1, 1};         // [2, 3]
  const std::vector<float> b = {10, 20};
  std::vector<float> y(4);
  linear(x, w, b, 3, 2, y);
  EXPECT_EQ(y, (std::vector<float>{11, 25, 9, 21}));
  linear(x, w, {}, 3, 2, y);
  EXPECT_EQ(y, (std::vector<float>{1, 5, -1, 1}));
}

TEST(CpuOpsTest, RopeAtPositionZeroIsIdentity) {
  const auto q0 = random_vector(2 * 4 * 8, 6), k0 = random_vector(2 * 2 * 8, 7);
  auto q = q0, k = k0;
  rotary_embedding(std::vector<int32_t>{0, 0}, q, k, 4, 2, 8, 10000.0);
  EXPECT_EQ(q, q0);
  EXPECT_EQ(k, k0);
}

TEST(CpuOpsTest, RopeRotatesHalvesByPositionTimesInvFreq) {
  const int64_t hd = 8;
  const auto q0 = random_vector(2 * hd, 8), k0 = random_vector(hd, 9);  // 2 heads, 1 KV head
  auto q = q0, k = k0;
  const int32_t pos = 7;
  const double theta = 500.0;
  rotary_embedding(std::vector<int32_t>{pos}, q, k, 2, 1, hd, theta);
  auto check = [&](const std::vector<float>& before, const std::vector<float>& after, size_t h) {
    for (size_t i = 0; i < 4; ++i) {
      const double a = pos * std::pow(theta, -2.0 * static_cast<double>(i) / hd);
      const double x1 = before[h * 8 + i], x2 = before[h * 8 + i + 4];
      EXPECT_NEAR(after[h * 8 + i], x1 * std::cos(a) - x2 * std::sin(a), 1e-5);
      EXPECT_NEAR(after[h * 8 + i + 4], x2 * std::cos(a) + x1 * std::sin(a), 1e-5);
    }
  };
  check(q0, q, 0);
  check(q0, q, 1);
  check(k0, k, 0);
}

TEST(CpuOpsTest, RopeScoresDependOnlyOnRelativePosition) {
  const auto q0 = random_vector(16, 10), k0 = random_vector(16, 11);
  auto score = [&](int32_t pq, int32_t pk) {
    auto q = q0, k = k0, unused_q = q0, unused_k = k0;
    rotary_embedding(std::vector<int32_t>{pq}, q, unused_k, 1, 1, 16, 10000.0);
    rotary_embedding(std::vector<int32_t>{pk}, unused_q, k, 1, 1, 16, 10000.0);
    double s = 0;
    for (size_t i = 0; i < 16; ++i) s += q[i] * k[i];
    return s;
  };
  EXPECT_NEAR(score(5, 2), score(103, 100), 1e-4);
  EXPECT_NEAR(score(0, 0), score(50, 50), 1e-4);
}

TEST(CpuOpsTest, ReshapeAndCacheWritesSlotsAndSkipsPadding) {
  const std::vector<float> k = {1, 2, 3, 4, 5, 6}, v = {-1, -2, -3, -4, -5, -6};  // [3, 1, 2]
  std::vector<float> kc(8, 0.0f), vc(8, 0.0f);  // 2 blocks of 2 slots, 1 KV head, head_dim 2
  reshape_and_cache(k, v, std::vector<int32_t>{3, -1, 0}, kc, vc, 1, 2);
  EXPECT_EQ(kc, (std::vector<float>{5, 6, 0, 0, 0, 0, 1, 2}));
  EXPECT_EQ(vc, (std::vector<float>{-5, -6, 0, 0, 0, 0, -1, -2}));
}

TEST(CpuOpsTest, AttentionWithOneKeyReturnsItsValue) {
  const AttentionShape shape{2, 2, 4, 4};
  const auto q = random_vector(8, 12);
  std::vector<float> kc = random_vector(4 * 8, 13), vc = random_vector(4 * 8, 14), out(8);
  // Block 0, slot 0 holds the one token.
  paged_attention(q, kc, vc, std::vector<int32_t>{0, 1}, std::vector<int32_t>{1},
                  std::vector<int32_t>{0}, 1, shape, out);
  for (size_t i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], vc[i]);
}

TEST(CpuOpsTest, AttentionGqaMapsQueryHeadToKvHead) {
  // 4 query heads, 2 KV heads: heads 0, 1 read KV head 0; heads 2, 3 read KV head 1.
  const AttentionShape shape{4, 2, 2, 1};
  const std::vector<float> q(8, 1.0f);
  const std::vector<float> kc(4, 0.0f), vc = {1, 2, 3, 4};  // 1 slot: [2 kv heads, 2]
  std::vector<float> out(8);
  paged_attention(q, kc, vc, std::vector<int32_t>{0, 1}, std::vector<int32_t>{1},
                  std::vector<int32_t>{0}, 1, shape, out);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
}

// Paged attention against dense causal attention over contiguous keys, for a batch of a decode,
// a chunk after cached context and a whole prefill, with scattered blocks.
TEST(CpuOpsTest, PagedAttentionMatchesDenseCausalAttention) {
  const AttentionShape shape{4, 2, 8, 3};
  const size_t heads = 4, kvh = 2, hd = 8, bs = 3, num_blocks = 12, max_blocks = 4;
  const std::vector<int32_t> q_lens = {1, 4, 5}, ctx = {7, 10, 5};
  const std::vector<int32_t> tables = {5, 2, 9, -1, 0, 11, 3, 7, 8, 1, -1, -1};
  const std::vector<int32_t> cu = {0, 1, 5, 10};
  const size_t kv_row = kvh * hd, q_row = heads * hd;
  const auto q = random_vector(10 * q_row, 15);
  // Dense keys and values of each sequence, and the caches they scatter into.
  std::vector<std::vector<float>> dense_k, dense_v;
  std::vector<float> kc(num_blocks * bs * kv_row, NAN), vc(kc.size(), NAN);
  for (size_t s = 0; s < 3; ++s) {
    dense_k.push_back(random_vector(ctx[s] * kv_row, 100 + s));
    dense_v.push_back(random_vector(ctx[s] * kv_row, 200 + s));
    for (size_t c = 0; c < static_cast<size_t>(ctx[s]); ++c) {
      const size_t slot = static_cast<size_t>(tables[s * max_blocks + c / bs]) * bs + c % bs;
      for (size_t i = 0; i < kv_row; ++i) {
        kc[slot * kv_row + i] = dense_k[s][c * kv_row + i];
        vc[slot * kv_row + i] = dense_v[s][c * kv_row + i];
      }
    }
  }
  std::vector<float> out(q.size());
  paged_attention(q, kc, vc, cu, ctx, tables, max_blocks, shape, out);

  for (size_t s = 0; s < 3; ++s) {
    for (int32_t j = 0; j < q_lens[s]; ++j) {
      const size_t t = static_cast<size_t>(cu[s] + j);
      const size_t pos = static_cast<size_t>(ctx[s] - q_lens[s] + j);
      for (size_t h = 0; h < heads; ++h) {
        const size_t g = h / 2;
        std::vector<double> p(static_cast<size_t>(ctx[s]));
        double mx = -INFINITY, sum = 0;
        for (size_t c = 0; c < p.size(); ++c) {
          double d = 0;
          for (size_t i = 0; i < hd; ++i)
            d += q[t * q_row + h * hd + i] * dense_k[s][c * kv_row + g * hd + i];
          p[c] = c <= pos ? d / std::sqrt(8.0) : -INFINITY;  // causal mask
          mx = std::max(mx, p[c]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (size_t i = 0; i < hd; ++i) {
          double o = 0;
          for (size_t c = 0; c < p.size(); ++c) o += p[c] / sum * dense_v[s][c * kv_row + g * hd + i];
          EXPECT_NEAR(out[t * q_row + h * hd + i], o, 1e-5) << "seq " << s << " row " << j;
        }
      }
    }
  }
}

TEST(CpuOpsTest, AttentionSoftmaxIsStableForLargeScores) {
  const AttentionShape shape{1, 1, 1, 2};
  const std::vector<float> q = {1000.0f}, kc = {1.0f, 0.99f}, vc = {3.0f, 5.0f};
  std::vector<float> out(1);
  paged_attention(q, kc, vc, std::vector<int32_t>{0, 1}, std::vector<int32_t>{2},
                  std::vector<int32_t>{0}, 1, shape, out);
  const double w1 = 1.0 / (1.0 + std::exp(-10.0));  // scores 1000 and 990
  EXPECT_NEAR(out[0], 3.0 * w1 + 5.0 * (1 - w1), 1e-5);
}

TEST(CpuOpsTest, SiluAndMulUsesGateThenUpHalves) {
  const std::vector<float> x = {0, 1, -2, 2, 3, 4, 1, 1, 1, 1, 1, 1};  // [2, 2*3]
  std::vector<float> out(6);
  silu_and_mul(x, 3, out);
  auto silu = [](double g) { return g / (1 + std::exp(-g)); };
  const std::vector<double> expected = {silu(0) * 2, silu(1) * 3, silu(-2) * 4,
                                        silu(1), silu(1), silu(1)};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(out[i], expected[i], 1e-6);
}

TEST(CpuOpsTest, ArgmaxTakesLowestIndexOnTies) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 2, 3}), 1);
  EXPECT_EQ(argmax(std::vector<float>{5, 5, 5}), 0);
  EXPECT_EQ(argmax(std::vector<float>{-2, -1, -1}), 1);
  EXPECT_EQ(argmax(std::vector<float>{0.5f}), 0);
}

}  // namespace
}  // namespace servesim::cpu
