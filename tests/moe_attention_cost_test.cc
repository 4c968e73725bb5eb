// Mixture routing and attention by kind: the closed forms against brute force, and a batch-1
// decode of a mixture reading only the experts it touches.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/attention_cost.h"
#include "backends/hardware.h"
#include "backends/moe_routing.h"
#include "backends/roofline.h"

namespace servesim {
namespace {

const std::string kMoeData = std::string(SERVESIM_PROJECT_DIR) + "/data/";

// Distinct experts that `tokens` tokens touch, each picking k distinct experts at random with
// popularity ~ (i + 1)^-skew (picks weighted without replacement), averaged over trials.
double simulate_routing(int E, int k, int tokens, double skew, int trials) {
  std::mt19937_64 rng(7);
  std::vector<double> weight(E);
  for (int i = 0; i < E; ++i) weight[i] = std::pow(i + 1.0, -skew);
  double sum = 0;
  for (int t = 0; t < trials; ++t) {
    std::set<int> touched;
    for (int j = 0; j < tokens; ++j) {
      std::vector<double> w = weight;
      for (int pick = 0; pick < k; ++pick) {
        std::discrete_distribution<int> d(w.begin(), w.end());
        const int e = d(rng);
        touched.insert(e);
        w[e] = 0;
      }
    }
    sum += static_cast<double>(touched.size());
  }
  return sum / trials;
}

TEST(MoeRouting, UniformExpectationMatchesRandomRouting) {
  for (int tokens : {1, 4, 32, 256}) {
    SCOPED_TRACE(tokens);
    EXPECT_NEAR(expected_experts(256, 8, tokens), simulate_routing(256, 8, tokens, 0, 400),
                0.02 * expected_experts(256, 8, tokens) + 0.1);
  }
  EXPECT_DOUBLE_EQ(expected_experts(256, 8, 1), 8);  // one token touches exactly its k
}

TEST(MoeRouting, SkewedRoutingTouchesFewerExperts) {
  // The independent-inclusion approximation of weighted picks without replacement: within 6 %.
  for (int tokens : {8, 64}) {
    SCOPED_TRACE(tokens);
    const double model = expected_experts(128, 8, tokens, 0.8);
    EXPECT_NEAR(model, simulate_routing(128, 8, tokens, 0.8, 300), 0.06 * model);
    EXPECT_LT(model, expected_experts(128, 8, tokens));
  }
}

TEST(AttentionCost, WindowedAndChunkedPairsMatchCounting) {
  for (int ctx : {0, 5, 127, 128, 300}) {
    for (int n : {1, 7, 128, 200}) {
      double window = 0, chunked = 0;
      for (int p = ctx; p < ctx + n; ++p) {
        window += std::min(128, p + 1);
        chunked += p % 96 + 1;
      }
      EXPECT_DOUBLE_EQ(windowed_pairs(n, ctx, 128), window) << ctx << " " << n;
      EXPECT_DOUBLE_EQ(chunked_pairs(n, ctx, 96), chunked) << ctx << " " << n;
    }
  }
}

TEST(AttentionCost, SlidingWindowBoundsTheKvRead) {
  const ModelSpec oss = load_model(kMoeData + "models/gpt-oss-20b.json").value();
  const AttentionShapes s(oss, 1, DType::kBf16, DType::kBf16);
  const AttentionWork near = s.work(AttentionKind::kSlidingWindow, 1, 1000);
  const AttentionWork far = s.work(AttentionKind::kSlidingWindow, 1, 100000);
  EXPECT_DOUBLE_EQ(near.bytes, far.bytes);  // 128 tokens whatever the context
  EXPECT_LT(near.bytes, s.work(AttentionKind::kFull, 1, 1000).bytes / 7);
}

TEST(AttentionCost, MlaDecodeReadsTheLatentOnce) {
  const ModelSpec ds = load_model(kMoeData + "models/deepseek-v3.json").value();
  const AttentionShapes s(ds, 8, DType::kBf16, DType::kBf16);
  const AttentionShapes::Affine a = s.decode_affine(AttentionKind::kMla);
  EXPECT_DOUBLE_EQ(a.bytes_per_context, 576 * 2);                // one latent per token
  EXPECT_DOUBLE_EQ(a.flops_per_context, 2 * 16 * (2 * 512 + 64));  // 16 heads per GPU, absorbed
}

// Qwen3-30B-A3B, one decode on an H100: the GEMMs read the attention projections, the router and
// only the 8 experts the token picked, every layer (memory-bound at one row).
TEST(RooflineMoe, BatchOneDecodeReadsOnlyTouchedExperts) {
  const ModelSpec m = load_model(kMoeData + "models/qwen3-30b-a3b.json").value();
  const HardwareSpec hw = load_hardware(kMoeData + "hardware/h100-sxm.toml").value();
  const RooflineModel r(hw, m, RooflineOptions{});
  const RooflineModel::Item one{1, 100, true};
  const double h = 2048, q = 32 * 128, kv = 4 * 128, mi = 768;
  // Each projection at one row, its weights plus its input and output rows, in bf16.
  const double per_layer = (h * (q + 2 * kv) + (h + q + 2 * kv)) + (q * h + (q + h)) +  // qkv, o
                           (h * 128 + h) +                                              // router
                           8 * (h * 2 * mi) + 8 * (h + 2 * mi) + 8 * (mi * h) + 8 * (mi + h) +  // experts
                           (8 + 1) * h;  // the 8 routed rows read and summed into one
  const double want = 48 * per_layer * 2 / (hw.memory_bandwidth * hw.memory_efficiency);
  EXPECT_NEAR(r.price(&one, 1).gemm, want, want * 1e-9);
}

}  // namespace
}  // namespace servesim
