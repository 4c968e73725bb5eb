#include "backends/kv_memory.h"

#include <gtest/gtest.h>

namespace servesim {
namespace {

const std::string kData = std::string(SERVESIM_PROJECT_DIR) + "/data/";

HardwareSpec hw(const char* name) { return load_hardware(kData + "hardware/" + name + ".toml").value(); }
ModelSpec mdl(const char* name) { return load_model(kData + "models/" + name + ".json").value(); }

TEST(KvMemory, BlocksAreWhatIsLeftAfterWeightsActivationsAndOverhead) {
  MemoryOptions o;
  const MemoryPlan p = plan_memory(hw("a100-80gb"), mdl("llama-3-8b"), o).value();
  EXPECT_DOUBLE_EQ(p.block_bytes, 16 * 131072.0);  // 16 tokens x 128 KiB
  const double left = p.budget - p.weights - p.activations - p.non_torch;
  EXPECT_EQ(p.num_blocks, static_cast<int64_t>(left / p.block_bytes) - 1);  // block 0 is reserved
  // About 55 GiB of KV: roughly 440,000 tokens of Llama-3-8B.
  EXPECT_GT(p.num_blocks * 16, 400000);
  EXPECT_LT(p.num_blocks * 16, 480000);
}

TEST(KvMemory, Int4KvHoldsAboutFourTimesTheRequestsOfFp16) {
  // Llama-3-70B on 4 A100-80GB, 4,096-token requests.
  MemoryOptions fp16;
  fp16.tp = 4;
  fp16.kv = DType::kBf16;
  MemoryOptions int4 = fp16;
  int4.kv = DType::kInt4;
  const MemoryPlan a = plan_memory(hw("a100-80gb"), mdl("llama-3-70b"), fp16).value();
  const MemoryPlan b = plan_memory(hw("a100-80gb"), mdl("llama-3-70b"), int4).value();
  const int64_t per_request = 4096 / 16;  // blocks
  const double fp16_requests = static_cast<double>(a.num_blocks / per_request);
  const double int4_requests = static_cast<double>(b.num_blocks / per_request);
  EXPECT_NEAR(int4_requests / fp16_requests, 4.0, 0.05);
  EXPECT_GT(fp16_requests, 10);  // and FP16 already holds a useful number
}

TEST(KvMemory, AModelThatDoesNotFitSaysWhatIsMissingAndWhichTpFits) {
  MemoryOptions o;
  o.weights = DType::kFp16;
  Result<MemoryPlan> p = plan_memory(hw("t4"), mdl("llama-3-70b"), o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("does not fit"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("missing"), std::string::npos);
  EXPECT_NE(p.error().message.find("--tp 16"), std::string::npos) << p.error().message;
}

TEST(KvMemory, TensorParallelismSplitsWeightsAndKvHeads) {
  MemoryOptions one, two;
  two.tp = 2;
  const MemoryPlan a = plan_memory(hw("a100-80gb"), mdl("llama-3-8b"), one).value();
  const MemoryPlan b = plan_memory(hw("a100-80gb"), mdl("llama-3-8b"), two).value();
  // Half, but for the norms, which every GPU holds whole (65 x 4,096 values).
  EXPECT_DOUBLE_EQ(b.weights, (a.weights - 65 * 4096 * 2.0) / 2 + 65 * 4096 * 2.0);
  EXPECT_DOUBLE_EQ(b.block_bytes, a.block_bytes / 2);
  EXPECT_GT(b.num_blocks, 2 * a.num_blocks);  // more room per GPU, and half the bytes per block
}

// Regressions: a huge memory over a tiny model overflowed the double -> int64 cast (and the - 1),
// and logged INT64_MAX blocks; a huge shortfall lost its unit in a 32-byte buffer.
TEST(KvMemory, HugeMemoryIsAnErrorAndHugeShortfallsKeepTheirUnit) {
  HardwareSpec big = hw("a100-80gb");
  big.memory_bytes = 1e6 * 1073741824.0;
  MemoryOptions o;
  o.block_size = 1;
  Result<MemoryPlan> p = plan_memory(big, mdl("tiny"), o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("more than 2147483647 blocks of 1 tokens"), std::string::npos)
      << p.error().message;
  ModelSpec huge = mdl("llama-3-8b");
  huge.num_layers = 4096;
  huge.hidden_size = 1 << 20;
  huge.intermediate_size = 8 << 20;
  huge.num_experts = 4096;
  Result<MemoryPlan> q = plan_memory(hw("t4"), huge, MemoryOptions{});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message.find("e+"), std::string::npos) << q.error().message;
  EXPECT_NE(q.error().message.find(" GiB missing"), std::string::npos) << q.error().message;
}

// vLLM refuses a tp that does not divide the attention heads, or that splits the KV heads unevenly.
TEST(KvMemory, TensorParallelDegreesThatDoNotDivideTheHeadsAreRefused) {
  const ModelSpec m = mdl("llama-3-8b");  // 32 heads, 8 KV heads
  for (int64_t tp : {1, 2, 4, 8, 16, 32}) EXPECT_TRUE(check_tensor_parallel(m, tp).ok()) << tp;
  for (int64_t tp : {3, 6, 12, 24, 64, 1024}) {
    Status s = check_tensor_parallel(m, tp);
    ASSERT_FALSE(s.ok()) << tp;
    EXPECT_NE(s.error().message.find("has 32 attention heads and 8 KV heads"), std::string::npos);
    EXPECT_NE(s.error().message.find("tp can be 1, 2, 4, 8, 16, 32"), std::string::npos)
        << s.error().message;
  }
}

}  // namespace
}  // namespace servesim
