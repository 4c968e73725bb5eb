#include "backends/model.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_util.h"

namespace servesim {
namespace {

std::string model_path(const std::string& name) {
  return std::string(SERVESIM_PROJECT_DIR) + "/data/models/" + name + ".json";
}

ModelSpec load(const std::string& name) {
  Result<ModelSpec> m = load_model(model_path(name));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m.value() : ModelSpec{};
}

// Writes `text` to a fresh file under the test temp directory and returns its path.
std::string write_config(const std::string& file, const std::string& text) {
  return servesim::testing::write_temp(file, text);
}

Error load_error(const std::string& file, const std::string& text) {
  Result<ModelSpec> m = load_model(write_config(file, text));
  EXPECT_FALSE(m.ok());
  return m.ok() ? Error{} : m.error();
}

std::string model_path_of(const std::string& file) { return servesim::testing::temp_path(file); }

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Model, EveryShippedConfigLoads) {
  for (const char* name : {"qwen2.5-0.5b", "qwen2.5-7b", "llama-2-7b", "llama-3-8b", "llama-3-70b",
                           "mistral-7b", "mixtral-8x7b"}) {
    SCOPED_TRACE(name);
    ModelSpec m = load(name);
    EXPECT_EQ(m.name, name);
    EXPECT_GT(m.num_params(), 0);
  }
}

TEST(Model, ShapesMatchTheConfigs) {
  ModelSpec qwen = load("qwen2.5-0.5b");
  EXPECT_EQ(qwen.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(qwen.hidden_size, 896);
  EXPECT_EQ(qwen.head_dim, 64);
  EXPECT_TRUE(qwen.tie_word_embeddings);
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_EQ(qwen.sliding_window, 0);  // use_sliding_window is false
  EXPECT_DOUBLE_EQ(qwen.rope_theta, 1e6);
  EXPECT_EQ(qwen.dtype, DType::kBf16);

  ModelSpec llama2 = load("llama-2-7b");
  EXPECT_EQ(llama2.dtype, DType::kFp16);
  EXPECT_FALSE(llama2.qkv_bias);
  EXPECT_DOUBLE_EQ(llama2.rope_theta, 1e4);  // absent from the file: LlamaConfig's default

  EXPECT_EQ(load("mistral-7b").sliding_window, 4096);
  ModelSpec mixtral = load("mixtral-8x7b");
  EXPECT_EQ(mixtral.sliding_window, 0);  // null
  EXPECT_EQ(mixtral.num_experts, 8);
  EXPECT_EQ(mixtral.experts_per_token, 2);
}

TEST(Model, KvBytesPerTokenAt16Bits) {
  EXPECT_EQ(load("qwen2.5-0.5b").kv_bytes_per_token(DType::kBf16), 12288);
  EXPECT_EQ(43 * load("qwen2.5-0.5b").kv_bytes_per_token(DType::kBf16), 528384);
  EXPECT_EQ(load("qwen2.5-7b").kv_bytes_per_token(DType::kBf16), 57344);
  EXPECT_EQ(load("llama-2-7b").kv_bytes_per_token(DType::kFp16), 524288);
  EXPECT_EQ(load("llama-3-8b").kv_bytes_per_token(DType::kBf16), 131072);
  EXPECT_EQ(load("mistral-7b").kv_bytes_per_token(DType::kBf16), 131072);
  EXPECT_EQ(load("mixtral-8x7b").kv_bytes_per_token(DType::kBf16), 131072);
  EXPECT_EQ(load("llama-3-70b").kv_bytes_per_token(DType::kBf16), 327680);
  EXPECT_EQ(4096 * load("llama-3-70b").kv_bytes_per_token(DType::kBf16), 1342177280.0);
  EXPECT_EQ(load("llama-3-8b").kv_bytes_per_token(DType::kFp8), 65536);
  EXPECT_EQ(load("llama-3-8b").kv_bytes_per_token(DType::kFp32), 262144);
}

TEST(Model, GroupedQueryAttentionShrinksTheKvCache) {
  ModelSpec gqa = load("llama-3-70b");
  ModelSpec mha = gqa;
  mha.num_kv_heads = mha.num_heads;
  EXPECT_EQ(gqa.kv_bytes_per_token(DType::kBf16) * 8, mha.kv_bytes_per_token(DType::kBf16));
}

TEST(Model, ParameterCountsMatchThePublishedOnes) {
  struct Known {
    const char* name;
    double params;
    double active;
  };
  for (const Known& k :
       {Known{"qwen2.5-0.5b", 0.494e9, 0.494e9}, Known{"qwen2.5-7b", 7.62e9, 7.62e9},
        Known{"llama-2-7b", 6.74e9, 6.74e9}, Known{"llama-3-8b", 8.03e9, 8.03e9},
        Known{"llama-3-70b", 70.6e9, 70.6e9}, Known{"mistral-7b", 7.24e9, 7.24e9},
        Known{"mixtral-8x7b", 46.7e9, 12.9e9}}) {
    SCOPED_TRACE(k.name);
    ModelSpec m = load(k.name);
    EXPECT_NEAR(m.num_params(), k.params, 0.01 * k.params);
    EXPECT_NEAR(m.active_params(), k.active, 0.01 * k.active);
  }
  // Exact counts of the safetensors checkpoints.
  EXPECT_EQ(load("llama-2-7b").num_params(), 6738415616.0);
  EXPECT_EQ(load("qwen2.5-0.5b").num_params(), 494032768.0);
  EXPECT_EQ(load("mixtral-8x7b").num_params(), 46702792704.0);
}

TEST(Model, TiedEmbeddingIsCountedOnce) {
  ModelSpec qwen = load("qwen2.5-0.5b");
  ModelSpec untied = qwen;
  untied.tie_word_embeddings = false;
  EXPECT_EQ(untied.num_params() - qwen.num_params(), 151936.0 * 896);  // 136 M
  EXPECT_NEAR(qwen.weight_bytes(DType::kBf16), 0.99e9, 0.01e9);
  // int4: the linear layers in 4 bits with a scale and zero point per 128; the tied embedding, the
  // norms and the QKV biases (896 + 2 x 128 per layer) in bf16.
  const double plain = 151936.0 * 896 + (24 * 2 + 1) * 896.0 + 24 * 1152.0;
  EXPECT_NEAR(qwen.weight_bytes(DType::kInt4), plain * 2 + (qwen.num_params() - plain) * (0.5 + 2.5 / 128), 1e3);
}

TEST(Model, MinimalConfigTakesLlamaDefaults) {
  Result<ModelSpec> r =
      load_model(write_config("minimal.json", R"({"architectures": ["LlamaForCausalLM"]})"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelSpec& m = r.value();
  EXPECT_EQ(m.name, "minimal");
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.intermediate_size, 11008);
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 32);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_EQ(m.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e4);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-6);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.num_experts, 1);
}

TEST(Model, ModelTypeAndDefaultsOfTheOtherFamilies) {
  Result<ModelSpec> mixtral = load_model(write_config("mt.json", R"({"model_type": "mixtral"})"));
  ASSERT_TRUE(mixtral.ok()) << mixtral.error().message;
  EXPECT_EQ(mixtral.value().architecture, "MixtralForCausalLM");
  EXPECT_EQ(mixtral.value().num_kv_heads, 8);
  EXPECT_EQ(mixtral.value().max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(mixtral.value().rms_norm_eps, 1e-5);
  EXPECT_EQ(mixtral.value().num_experts, 8);

  Result<ModelSpec> qwen = load_model(write_config("q.json", R"({"model_type": "qwen2"})"));
  ASSERT_TRUE(qwen.ok()) << qwen.error().message;
  EXPECT_EQ(qwen.value().intermediate_size, 22016);
  EXPECT_EQ(qwen.value().vocab_size, 151936);
  EXPECT_TRUE(qwen.value().qkv_bias);

  Result<ModelSpec> explicit_head_dim = load_model(write_config(
      "hd.json", R"({"architectures": ["MistralForCausalLM"], "head_dim": 256})"));
  ASSERT_TRUE(explicit_head_dim.ok()) << explicit_head_dim.error().message;
  EXPECT_EQ(explicit_head_dim.value().head_dim, 256);
  EXPECT_EQ(explicit_head_dim.value().sliding_window, 4096);
}

TEST(Model, UnknownArchitectureListsTheSupportedOnes) {
  Error e = load_error("gpt2.json", R"({"architectures": ["GPT2LMHeadModel"]})");
  EXPECT_TRUE(contains(e.message, "GPT2LMHeadModel")) << e.message;
  for (const char* arch : {"LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM",
                           "Qwen2ForCausalLM"})
    EXPECT_TRUE(contains(e.message, arch)) << e.message;
}

TEST(Model, MalformedJsonGivesTheLine) {
  const std::string path = write_config("bad.json", "{\n  \"hidden_size\": 4096,\n  oops\n}\n");
  Result<ModelSpec> m = load_model(path);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(contains(m.error().message, path + ":3:")) << m.error().message;
  EXPECT_TRUE(contains(m.error().message, "malformed JSON")) << m.error().message;
}

TEST(Model, WrongTypesNameTheKey) {
  Error e =
      load_error("t.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "4096"})");
  EXPECT_TRUE(contains(e.message, "\"hidden_size\"")) << e.message;
  e = load_error("t.json", R"({"architectures": ["LlamaForCausalLM"], "rope_theta": "big"})");
  EXPECT_TRUE(contains(e.message, "\"rope_theta\"")) << e.message;
  e = load_error("t.json", R"({"architectures": ["LlamaForCausalLM"], "tie_word_embeddings": 1})");
  EXPECT_TRUE(contains(e.message, "\"tie_word_embeddings\"")) << e.message;
  e = load_error("t.json", R"({"architectures": "LlamaForCausalLM"})");
  EXPECT_TRUE(contains(e.message, "\"architectures\"")) << e.message;
  e = load_error("t.json", R"({"architectures": ["LlamaForCausalLM"], "torch_dtype": "int7"})");
  EXPECT_TRUE(contains(e.message, "\"torch_dtype\"")) << e.message;
  e = load_error("t.json", R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 0})");
  EXPECT_TRUE(contains(e.message, "\"num_hidden_layers\"")) << e.message;
}

// Regressions of hostile configs: each used to abort (an uncaught range error, a stack overflow
// in the message) or to wrap around; now each is an error naming the key and the bound.
TEST(Model, HostileConfigsAreCleanErrors) {
  const std::string llama = R"({"architectures": ["LlamaForCausalLM"], )";
  EXPECT_EQ(load_error("t.json", llama + R"("rope_theta": 1e400})").message,
            model_path_of("t.json") + ": malformed JSON: number overflow parsing '1e400'");
  const std::string deep = llama + "\"x\": " + std::string(5000, '[') + std::string(5000, ']') + "}";
  Error e = load_error("t.json", deep);
  EXPECT_TRUE(contains(e.message, "malformed JSON: arrays and objects nested more than 100 levels"))
      << e.message;
  e = load_error("t.json", llama + R"("hidden_size": [[[1]]]})");
  EXPECT_TRUE(contains(e.message, "\"hidden_size\": expected an integer from 1 to 1048576, got "
                                  "an array of 1 values"))
      << e.message;
  e = load_error("t.json", llama + R"("head_dim": 18446744073709551615})");
  EXPECT_TRUE(contains(e.message, "\"head_dim\": expected an integer from 1 to 16384, got number "
                                  "18446744073709551615"))
      << e.message;
  e = load_error("t.json", llama + R"("num_hidden_layers": 2147483647})");
  EXPECT_TRUE(contains(e.message, "\"num_hidden_layers\": expected an integer from 1 to 4096"))
      << e.message;
  e = load_error("t.json", llama + R"("max_position_embeddings": 4294967296})");
  EXPECT_TRUE(contains(e.message, "\"max_position_embeddings\": expected an integer from 1 to "
                                  "100000000"))
      << e.message;
  e = load_error("t.json", llama + R"("rms_norm_eps": -1})");
  EXPECT_TRUE(contains(e.message, "\"rms_norm_eps\": expected a number > 0 and <= 1")) << e.message;
  e = load_error("t.json", llama + "\"torch_dtype\": \"\xff\xfe\"}");  // not UTF-8
  EXPECT_TRUE(contains(e.message, "malformed JSON")) << e.message;
  const std::string huge(kMaxModelConfigBytes + 1, ' ');
  e = load_error("t.json", huge);
  EXPECT_TRUE(contains(e.message, "the most this reads is")) << e.message;
  Result<ModelSpec> dir = load_model("/tmp");
  ASSERT_FALSE(dir.ok());
  EXPECT_TRUE(contains(dir.error().message, "it is a directory")) << dir.error().message;
}

TEST(Model, MissingFileIsAnError) {
  Result<ModelSpec> m = load_model(model_path("no-such-model"));
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(contains(m.error().message, "no-such-model.json")) << m.error().message;
}

TEST(DType, ParsesTheCliAndConfigSpellings) {
  for (auto [s, d] :
       {std::pair<const char*, DType>{"fp32", DType::kFp32}, {"float32", DType::kFp32},
        {"fp16", DType::kFp16}, {"float16", DType::kFp16}, {"bf16", DType::kBf16},
        {"bfloat16", DType::kBf16}, {"fp8", DType::kFp8}, {"float8", DType::kFp8},
        {"int4", DType::kInt4}}) {
    Result<DType> r = parse_dtype(s);
    ASSERT_TRUE(r.ok()) << s;
    EXPECT_EQ(r.value(), d) << s;
  }
  EXPECT_FALSE(parse_dtype("int7").ok());
  EXPECT_EQ(dtype_bytes(DType::kFp32), 4);
  EXPECT_EQ(dtype_bytes(DType::kBf16), 2);
  EXPECT_EQ(dtype_bytes(DType::kFp8), 1);
  EXPECT_EQ(dtype_bytes(DType::kInt4), 0.5);
  EXPECT_STREQ(dtype_name(parse_dtype("bfloat16").value()), "bf16");
}

}  // namespace
}  // namespace servesim
