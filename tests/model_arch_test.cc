// Today's architectures: config.json reading (MLA, mixtures with shared experts, sliding-window,
// chunked-local and linear-attention layers, quantization_config), parameters against the
// published sizes, KV bytes per token by attention kind, and bad input.
#include <gtest/gtest.h>

#include <string>

#include "backends/model.h"
#include "backends/specs.h"
#include "test_util.h"

namespace servesim {
namespace {

ModelSpec arch_model(const std::string& name) {
  Result<ModelSpec> m = load_model(std::string(SERVESIM_PROJECT_DIR) + "/data/models/" + name + ".json");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m.value() : ModelSpec{};
}

Error arch_error(const std::string& text) {
  Result<ModelSpec> m = load_model(servesim::testing::write_temp("bad-config.json", text));
  EXPECT_FALSE(m.ok());
  return m.ok() ? Error{} : m.error();
}

bool arch_has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Published sizes (model cards; billions of parameters, total and active per token). Within 2 %:
// the cards round, and Llama-4's and Gemma-3's count their vision towers, which are not modelled.
TEST(ModelArch, ParametersMatchThePublishedSizes) {
  struct Published {
    const char* name;
    double total, active;
  };
  for (const Published& p : {Published{"deepseek-v3", 671, 37}, {"qwen3-8b", 8.2, 8.2}, {"qwen3-32b", 32.8, 32.8},
                             {"qwen3-30b-a3b", 30.5, 3.3}, {"qwen3-235b-a22b", 235, 22},
                             {"llama-3.1-8b", 8.03, 8.03}, {"llama-3.1-405b", 405, 405},
                             {"llama-3.3-70b", 70.6, 70.6}, {"llama-4-scout", 109, 17},
                             {"llama-4-maverick", 400, 17}, {"gpt-oss-20b", 20.9, 3.6},
                             {"gpt-oss-120b", 116.8, 5.1}, {"gemma-3-27b", 27.4, 27.4},
                             {"qwen3-next-80b-a3b", 80, 3}}) {
    SCOPED_TRACE(p.name);
    const ModelSpec m = arch_model(p.name);
    EXPECT_NEAR(m.num_params() / 1e9, p.total, 0.02 * p.total);
    // Active counts are given to one digit (3B, 17B, 22B) and include the embeddings: 25 %.
    EXPECT_NEAR(m.active_params() / 1e9, p.active, 0.25 * p.active + 0.5);
  }
}

TEST(ModelArch, LayerKindsFollowEachFamilysPattern) {
  const ModelSpec ds = arch_model("deepseek-v3");
  EXPECT_EQ(ds.num_layers_of(AttentionKind::kMla), 61);
  EXPECT_EQ(ds.num_moe_layers(), 58);  // first_k_dense_replace 3
  EXPECT_EQ(ds.layer_moe[2], 0);
  EXPECT_EQ(ds.layer_moe[3], 1);
  EXPECT_EQ(ds.num_experts, 256);
  EXPECT_EQ(ds.experts_per_token, 8);
  EXPECT_EQ(ds.shared_intermediate_size, 2048);

  const ModelSpec oss = arch_model("gpt-oss-20b");
  EXPECT_EQ(oss.layer_attention[0], AttentionKind::kSlidingWindow);
  EXPECT_EQ(oss.layer_attention[1], AttentionKind::kFull);
  EXPECT_EQ(oss.num_layers_of(AttentionKind::kSlidingWindow), 12);
  EXPECT_EQ(oss.sliding_window, 128);
  EXPECT_TRUE(oss.attention_sinks);

  const ModelSpec gemma = arch_model("gemma-3-27b");
  EXPECT_EQ(gemma.num_layers_of(AttentionKind::kSlidingWindow), 52);
  EXPECT_EQ(gemma.layer_attention[5], AttentionKind::kFull);
  EXPECT_EQ(gemma.sliding_window, 1024);
  EXPECT_EQ(gemma.hidden_size, 5376);  // from text_config

  const ModelSpec scout = arch_model("llama-4-scout");
  EXPECT_EQ(scout.num_layers_of(AttentionKind::kChunkedLocal), 36);
  EXPECT_EQ(scout.layer_attention[3], AttentionKind::kFull);  // NoPE layers attend globally
  EXPECT_EQ(scout.attention_chunk_size, 8192);
  EXPECT_EQ(scout.num_moe_layers(), 48);
  EXPECT_EQ(arch_model("llama-4-maverick").num_moe_layers(), 24);  // interleave_moe_layer_step 2

  const ModelSpec next = arch_model("qwen3-next-80b-a3b");
  EXPECT_EQ(next.num_layers_of(AttentionKind::kLinear), 36);
  EXPECT_EQ(next.layer_attention[3], AttentionKind::kFull);
  EXPECT_TRUE(next.attention_output_gate);
}

// KV bytes per token, by hand: layers x (2 x KV heads x head dim, or MLA's latent) x element size.
TEST(ModelArch, KvBytesPerTokenByAttentionKind) {
  EXPECT_EQ(arch_model("llama-3.1-8b").kv_bytes_per_token(DType::kBf16), 32 * 2 * 8 * 128 * 2);
  EXPECT_EQ(arch_model("deepseek-v3").kv_bytes_per_token(DType::kBf16), 61 * (512 + 64) * 2);
  EXPECT_EQ(arch_model("deepseek-v3").kv_bytes_per_token(DType::kFp8), 61 * 576);
  EXPECT_EQ(arch_model("gpt-oss-20b").kv_bytes_per_token(DType::kBf16), 24 * 2 * 8 * 64 * 2);
  EXPECT_EQ(arch_model("gemma-3-27b").kv_bytes_per_token(DType::kBf16), 62 * 2 * 16 * 128 * 2);
  EXPECT_EQ(arch_model("llama-4-scout").kv_bytes_per_token(DType::kBf16), 48 * 2 * 8 * 128 * 2);
  // Qwen3-Next: only its 12 full-attention layers grow with context (2 KV heads of 256).
  const ModelSpec next = arch_model("qwen3-next-80b-a3b");
  EXPECT_EQ(next.kv_bytes_per_token(DType::kBf16), 12 * 2 * 2 * 256 * 2);
  // Its Gated DeltaNet state per layer: conv (kernel 4 - 1) x (2 x 16 x 128 + 32 x 128), plus
  // recurrent 32 heads x 128 x 128.
  EXPECT_EQ(next.linear_state_values(), 3.0 * (2 * 16 * 128 + 32 * 128) + 32.0 * 128 * 128);
}

TEST(ModelArch, QuantizationConfigsGiveTheWeightsTheirSize) {
  const ModelSpec ds = arch_model("deepseek-v3");
  EXPECT_EQ(ds.quantization.method, "fp8");
  EXPECT_TRUE(ds.quantization.block_scaled);
  // fp8 linear layers (with a 4-byte scale per 128 x 128 block), bf16 embeddings: the published
  // checkpoint is 642 GiB... of which the MTP layer is 11.5 GB: 671B in about 690 GB.
  EXPECT_NEAR(ds.weight_bytes(ds.quantization) / 1e9, 673, 10);
  const ModelSpec oss = arch_model("gpt-oss-120b");
  EXPECT_EQ(oss.quantization.method, "mxfp4");
  EXPECT_FALSE(oss.quantization.attention);  // modules_to_not_convert: self_attn
  // MXFP4 experts (4.25 bits), the rest bf16: 60.8 GiB (65.3 GB) published by OpenAI.
  EXPECT_NEAR(oss.weight_bytes(oss.quantization) / 1e9, 65.3, 1.5);
  const ModelSpec fp8 = arch_model("qwen3-30b-a3b-fp8");
  EXPECT_EQ(fp8.quantization.dtype, DType::kFp8);
  EXPECT_NEAR(fp8.weight_bytes(fp8.quantization) / arch_model("qwen3-30b-a3b").weight_bytes(DType::kBf16), 0.51, 0.02);
}

TEST(ModelArch, WeightsPerGpuKeepReplicatedPartsWhole) {
  const ModelSpec ds = arch_model("deepseek-v3");
  const double one = ds.weight_bytes_per_gpu(ds.quantization, 1);
  const double eight = ds.weight_bytes_per_gpu(ds.quantization, 8);
  EXPECT_DOUBLE_EQ(one, ds.weight_bytes(ds.quantization));
  EXPECT_GT(eight, one / 8);  // MLA's compressions, routers and norms are on every GPU
  EXPECT_LT(eight, one / 8 * 1.02);
}

TEST(ModelArch, UnsupportedArchitectureNamesItAndTheSupportedOnes) {
  const Error e = arch_error(R"({"architectures": ["FalconMambaForCausalLM"], "hidden_size": 64})");
  EXPECT_TRUE(arch_has(e.message, "FalconMambaForCausalLM")) << e.message;
  EXPECT_TRUE(arch_has(e.message, "DeepseekV3ForCausalLM")) << e.message;
  EXPECT_TRUE(arch_has(e.message, "Qwen3NextForCausalLM")) << e.message;
}

TEST(ModelArch, InconsistentFieldsNameTheKey) {
  EXPECT_TRUE(arch_has(arch_error(R"({"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 8,
                                 "num_experts_per_tok": 9})").message, "num_experts_per_tok"));
  EXPECT_TRUE(arch_has(arch_error(R"({"architectures": ["GptOssForCausalLM"], "sliding_window": 0})").message,
                  "\"sliding_window\""));
  EXPECT_TRUE(arch_has(arch_error(R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
                                 "layer_types": ["full_attention"]})").message, "\"layer_types\""));
  EXPECT_TRUE(arch_has(arch_error(R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
                                 "layer_types": ["full_attention", "local"]})").message, "layer_types[1]"));
  const Error q = arch_error(R"({"architectures": ["LlamaForCausalLM"],
                                 "quantization_config": {"quant_method": "bitsandbytes"}})");
  EXPECT_TRUE(arch_has(q.message, "quantization_config.quant_method")) << q.message;
  EXPECT_TRUE(arch_has(q.message, "mxfp4")) << q.message;
  EXPECT_TRUE(arch_has(arch_error(R"({"architectures": ["LlamaForCausalLM"],
                                 "quantization_config": {"quant_method": "awq", "bits": 3}})").message,
                  "quantization_config.bits"));
  EXPECT_TRUE(arch_has(arch_error(R"({"architectures": ["Llama4ForConditionalGeneration"],
                                 "text_config": {"num_attention_heads": 40, "num_key_value_heads": 7}})").message,
                  "text_config.num_key_value_heads"));
}

// The real engines execute dense full-attention decoders only: the others are refused with the way
// out, never run as if they were dense.
TEST(ModelArch, EnginesRefuseWhatTheyDoNotExecute) {
  EXPECT_TRUE(check_engine_model(arch_model("qwen2.5-0.5b"), "cpu").ok());
  for (const char* name : {"gpt-oss-20b", "deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b-fp8", "qwen3-next-80b-a3b"}) {
    SCOPED_TRACE(name);
    const Status s = check_engine_model(arch_model(name), "cpu");
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(arch_has(s.error().message, "--backend roofline")) << s.error().message;
  }
}

}  // namespace
}  // namespace servesim
