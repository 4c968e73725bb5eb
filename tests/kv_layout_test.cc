// The KV layout as vLLM 0.33 plans it (backends/kv_layout.h), worked by hand for each attention
// kind; scripts/vllm_kv_xcheck.py checks the same numbers against vLLM's own planner.
#include "backends/kv_layout.h"

#include <gtest/gtest.h>

#include <string>

namespace servesim {
namespace {

ModelSpec layout_model(const std::string& name) {
  return load_model(std::string(SERVESIM_PROJECT_DIR) + "/data/models/" + name + ".json").value();
}

constexpr double kLayoutGiB = 1024.0 * 1024 * 1024;

TEST(KvLayout, DenseModelIsOneGroup) {
  const KvLayout l = kv_layout(layout_model("llama-3.1-8b"), KvLayoutOptions{});
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_FALSE(l.hybrid);
  EXPECT_EQ(l.groups[0].page_bytes, 16 * 2 * 8 * 128 * 2);
  EXPECT_EQ(l.bytes_per_block, 32 * 65536.0);
  EXPECT_EQ(l.num_blocks(10 * kLayoutGiB), 5120);  // vLLM: 5,120
  EXPECT_DOUBLE_EQ(l.max_concurrency(5120, 8192, 16384), 10.0);
}

TEST(KvLayout, MlaKeepsOneLatentPerTokenOnEveryGpu) {
  KvLayoutOptions o;
  o.tp = 8;
  const KvLayout l = kv_layout(layout_model("deepseek-v3"), o);
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].kind, AttentionKind::kMla);
  EXPECT_EQ(l.groups[0].page_bytes, 16 * 576 * 2);  // not split by tp
  EXPECT_EQ(l.num_blocks(10 * kLayoutGiB), 9549);         // vLLM: 9,549
}

TEST(KvLayout, SlidingAndFullLayersGroupByEqualCounts) {
  const KvLayout oss = kv_layout(layout_model("gpt-oss-20b"), KvLayoutOptions{});
  ASSERT_EQ(oss.groups.size(), 2u);  // 12 sliding (first: layer 0 slides), 12 full
  EXPECT_EQ(oss.groups[0].kind, AttentionKind::kSlidingWindow);
  EXPECT_EQ(oss.groups[0].layers.size(), 12u);
  EXPECT_EQ(oss.groups[0].page_bytes, 16 * 2 * 8 * 64 * 2);
  EXPECT_EQ(oss.num_blocks(10 * kLayoutGiB), 27306);  // vLLM: 27,306
  // A request of 8,192 tokens: 512 full blocks, and the window (127) plus 16,384 tokens in flight,
  // capped at 8,192: 512 + 1 sliding blocks.
  EXPECT_EQ(oss.blocks_per_request(8192, 16384), 512 + 513);
  // Gemma-3: 52 sliding layers in 6 groups (every 6th of them from its i-th), 10 full in one.
  const KvLayout gemma = kv_layout(layout_model("gemma-3-27b"), KvLayoutOptions{});
  ASSERT_EQ(gemma.groups.size(), 7u);
  EXPECT_EQ(gemma.groups[0].layers, (std::vector<int32_t>{0, 7, 14, 21, 28, 36, 43, 50, 57}));
  EXPECT_EQ(gemma.groups[5].layers.size(), 8u);
  EXPECT_EQ(gemma.groups[6].kind, AttentionKind::kFull);
  EXPECT_EQ(gemma.bytes_per_block, 10 * 131072.0);  // the largest group: 10 layers
}

TEST(KvLayout, WithoutTheHybridManagerSlidingLayersKeepFullKv) {
  KvLayoutOptions o;
  o.hybrid_manager = false;
  const KvLayout l = kv_layout(layout_model("gpt-oss-20b"), o);
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].kind, AttentionKind::kFull);
  EXPECT_EQ(l.groups[0].layers.size(), 24u);
  // Llama-4's chunked layers: vLLM turns the hybrid manager off for them by default.
  const KvLayout scout = kv_layout(layout_model("llama-4-scout"), KvLayoutOptions{});
  ASSERT_EQ(scout.groups.size(), 1u);
  EXPECT_EQ(scout.num_blocks(10 * kLayoutGiB), 3413);  // vLLM: 3,413
}

TEST(KvLayout, LinearAttentionStatesGrowTheBlockUntilAPageHoldsOne) {
  // Qwen3-Next at tp 1: a state of 1,097,728 bytes; a token of full attention 2 x 2 x 256 x 2 =
  // 2,048 bytes; blocks in multiples of lcm(16, 64) = 64: 64 x ceil(1,097,728 / 131,072) = 576.
  const KvLayout one = kv_layout(layout_model("qwen3-next-80b-a3b"), KvLayoutOptions{});
  EXPECT_EQ(one.block_size, 576);
  ASSERT_EQ(one.groups.size(), 4u);  // 3 linear groups of 12, one full
  EXPECT_EQ(one.groups[0].kind, AttentionKind::kLinear);
  EXPECT_EQ(one.groups[0].page_bytes, 576 * 2048.0);  // the state padded to the page
  EXPECT_EQ(one.num_blocks(10 * kLayoutGiB), 758);          // vLLM: 758
  KvLayoutOptions eight;
  eight.tp = 8;
  EXPECT_EQ(kv_layout(layout_model("qwen3-next-80b-a3b"), eight).block_size, 192);  // vLLM: 192
}

}  // namespace
}  // namespace servesim
