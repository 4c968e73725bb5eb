#include "kernels/weights.h"

#include <unistd.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "kernels/safetensors.h"

namespace servesim {
namespace {

ModelSpec llama_like() {
  ModelSpec m;
  m.name = "tiny-llama";
  m.architecture = "LlamaForCausalLM";
  m.hidden_size = 32;
  m.intermediate_size = 64;
  m.num_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 8;
  m.vocab_size = 50;
  return m;
}

ModelSpec qwen2_like() {
  ModelSpec m = llama_like();
  m.name = "tiny-qwen2";
  m.architecture = "Qwen2ForCausalLM";
  m.tie_word_embeddings = true;
  m.qkv_bias = true;
  return m;
}

std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("servesim_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
                    std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

using Shape = std::vector<int64_t>;

// Every tensor of `w`, in a fixed order (empty ones included), to compare whole models.
std::vector<const Tensor*> all(const ModelWeights& w) {
  std::vector<const Tensor*> v{&w.embed_tokens, &w.norm, &w.lm_head};
  for (const auto& l : w.layers) {
    for (const Tensor* t : {&l.input_layernorm, &l.q_proj, &l.k_proj, &l.v_proj, &l.q_bias, &l.k_bias,
                            &l.v_bias, &l.o_proj, &l.post_attention_layernorm, &l.gate_proj, &l.up_proj,
                            &l.down_proj})
      v.push_back(t);
  }
  return v;
}

// Bit-for-bit equality of every tensor, after `round` is applied to a's values.
template <class F>
void expect_equal(const ModelWeights& a, const ModelWeights& b, F round) {
  const auto ta = all(a), tb = all(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    ASSERT_EQ(ta[i]->shape, tb[i]->shape) << i;
    ASSERT_EQ(ta[i]->data.size(), tb[i]->data.size()) << i;
    for (size_t j = 0; j < ta[i]->data.size(); ++j)
      ASSERT_EQ(std::bit_cast<uint32_t>(round(ta[i]->data[j])), std::bit_cast<uint32_t>(tb[i]->data[j]))
          << "tensor " << i << " element " << j;
  }
}

void expect_identical(const ModelWeights& a, const ModelWeights& b) {
  expect_equal(a, b, [](float x) { return x; });
}

TEST(RandomWeights, ShapesLlamaLike) {
  const ModelWeights w = random_weights(llama_like(), 1);
  EXPECT_EQ(w.embed_tokens.shape, (Shape{50, 32}));
  ASSERT_EQ(w.layers.size(), 2u);
  for (const auto& l : w.layers) {
    EXPECT_EQ(l.input_layernorm.shape, (Shape{32}));
    EXPECT_EQ(l.q_proj.shape, (Shape{32, 32}));
    EXPECT_EQ(l.k_proj.shape, (Shape{16, 32}));
    EXPECT_EQ(l.v_proj.shape, (Shape{16, 32}));
    EXPECT_TRUE(l.q_bias.data.empty() && l.k_bias.data.empty() && l.v_bias.data.empty());
    EXPECT_EQ(l.o_proj.shape, (Shape{32, 32}));
    EXPECT_EQ(l.post_attention_layernorm.shape, (Shape{32}));
    EXPECT_EQ(l.gate_proj.shape, (Shape{64, 32}));
    EXPECT_EQ(l.up_proj.shape, (Shape{64, 32}));
    EXPECT_EQ(l.down_proj.shape, (Shape{32, 64}));
    EXPECT_EQ(l.input_layernorm.data, std::vector<float>(32, 1.0f));
  }
  EXPECT_EQ(w.norm.data, std::vector<float>(32, 1.0f));
  EXPECT_EQ(w.lm_head.shape, (Shape{50, 32}));
  EXPECT_EQ(&w.output_matrix(), &w.lm_head);
  for (const Tensor* t : all(w)) EXPECT_EQ(t->numel(), static_cast<int64_t>(t->data.size()));
}

TEST(RandomWeights, ShapesQwen2LikeWithBiasAndTiedHead) {
  const ModelWeights w = random_weights(qwen2_like(), 1);
  for (const auto& l : w.layers) {
    EXPECT_EQ(l.q_bias.shape, (Shape{32}));
    EXPECT_EQ(l.k_bias.shape, (Shape{16}));
    EXPECT_EQ(l.v_bias.shape, (Shape{16}));
    for (const Tensor* b : {&l.q_bias, &l.k_bias, &l.v_bias}) {
      ASSERT_EQ(b->data.size(), static_cast<size_t>(b->shape[0]));
      for (float x : b->data) EXPECT_LE(std::abs(x), 0.02f);
    }
  }
  EXPECT_TRUE(w.lm_head.data.empty());
  EXPECT_EQ(w.lm_head.numel(), 0);
  EXPECT_EQ(&w.output_matrix(), &w.embed_tokens);
}

TEST(RandomWeights, DeterministicPerSeedAndDifferentAcrossSeeds) {
  expect_identical(random_weights(llama_like(), 7), random_weights(llama_like(), 7));
  const ModelWeights a = random_weights(llama_like(), 7), b = random_weights(llama_like(), 8);
  EXPECT_NE(a.embed_tokens.data, b.embed_tokens.data);
  EXPECT_NE(a.layers[1].down_proj.data, b.layers[1].down_proj.data);
  // Tensors of one model differ from each other (each has its own stream).
  EXPECT_NE(a.layers[0].gate_proj.data, a.layers[0].up_proj.data);
  EXPECT_NE(a.layers[0].q_proj.data, a.layers[1].q_proj.data);
}

TEST(RandomWeights, ScaledForDepthAndFanIn) {
  const ModelSpec m = llama_like();
  const ModelWeights w = random_weights(m, 3);
  const double depth = 1.0 / std::sqrt(2.0 * 2);
  auto max_abs = [](const Tensor& t) {
    float x = 0;
    for (float v : t.data) x = std::max(x, std::abs(v));
    return static_cast<double>(x);
  };
  auto rms = [](const Tensor& t) {
    double s = 0;
    for (float v : t.data) s += static_cast<double>(v) * v;
    return std::sqrt(s / static_cast<double>(t.data.size()));
  };
  const auto& l = w.layers[0];
  EXPECT_LE(max_abs(l.q_proj), std::sqrt(3.0 / 32));
  EXPECT_GT(max_abs(l.q_proj), 0.9 * std::sqrt(3.0 / 32));
  EXPECT_LE(max_abs(l.o_proj), std::sqrt(3.0 / 32) * depth);
  EXPECT_LE(max_abs(l.down_proj), std::sqrt(3.0 / 64) * depth);
  EXPECT_NEAR(rms(l.gate_proj), 1 / std::sqrt(32.0), 0.1 / std::sqrt(32.0));     // variance 1/in
  EXPECT_NEAR(rms(l.down_proj), depth / std::sqrt(64.0), 0.1 * depth / std::sqrt(64.0));
}

// Logits of the normalised embedding of each token against the output matrix: O(1), and not the
// same winner for every input.
TEST(RandomWeights, LogitsAreOrderOneAndArgmaxVaries) {
  for (const ModelSpec& m : {llama_like(), qwen2_like()}) {
    const ModelWeights w = random_weights(m, 11);
    const Tensor& out = w.output_matrix();
    const auto h = static_cast<size_t>(m.hidden_size);
    std::set<size_t> winners;
    double sum_sq = 0;
    size_t n = 0;
    for (size_t t = 0; t < static_cast<size_t>(m.vocab_size); ++t) {
      std::vector<double> x(h);
      double ms = 0;
      for (size_t j = 0; j < h; ++j) ms += std::pow(w.embed_tokens.data[t * h + j], 2);
      const double inv = 1 / std::sqrt(ms / static_cast<double>(h) + 1e-6);
      for (size_t j = 0; j < h; ++j) x[j] = w.embed_tokens.data[t * h + j] * inv;
      size_t best = 0;
      double best_logit = -1e30;
      for (size_t v = 0; v < static_cast<size_t>(m.vocab_size); ++v) {
        double logit = 0;
        for (size_t j = 0; j < h; ++j) logit += x[j] * out.data[v * h + j];
        ASSERT_LT(std::abs(logit), 10.0);
        if (v != t) sum_sq += logit * logit, ++n;
        if (logit > best_logit) best_logit = logit, best = v;
      }
      winners.insert(best);
    }
    const double spread = std::sqrt(sum_sq / static_cast<double>(n));
    EXPECT_GT(spread, 0.5) << m.name;
    EXPECT_LT(spread, 2.0) << m.name;
    EXPECT_GT(winners.size(), 10u) << m.name;
  }
}

TEST(WeightsFile, Fp32RoundTripIsBitForBit) {
  for (const ModelSpec& m : {llama_like(), qwen2_like()}) {
    const ModelWeights w = random_weights(m, 5);
    const std::string path = temp_path(m.name + ".safetensors");
    ASSERT_TRUE(save_safetensors(path, w, DType::kFp32).ok());
    auto loaded = load_safetensors(path, m);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    expect_identical(w, loaded.value());
  }
}

TEST(WeightsFile, HalfPrecisionRoundTripsToTheRoundedValuesAndIsStable) {
  const ModelSpec m = qwen2_like();
  const ModelWeights w = random_weights(m, 5);
  for (DType d : {DType::kFp16, DType::kBf16}) {
    const std::string path = temp_path(std::string(dtype_name(d)) + ".safetensors");
    ASSERT_TRUE(save_safetensors(path, w, d).ok());
    auto once = load_safetensors(path, m);
    ASSERT_TRUE(once.ok()) << once.error().message;
    expect_equal(w, once.value(), [d](float x) {
      return d == DType::kFp16 ? fp16_to_fp32(fp32_to_fp16(x)) : bf16_to_fp32(fp32_to_bf16(x));
    });
    const std::string again = temp_path(std::string(dtype_name(d)) + "2.safetensors");
    ASSERT_TRUE(save_safetensors(again, once.value(), d).ok());
    auto twice = load_safetensors(again, m);
    ASSERT_TRUE(twice.ok()) << twice.error().message;
    expect_identical(once.value(), twice.value());
  }
}

TEST(WeightsFile, WritesHuggingFaceNames) {
  const std::string path = temp_path("w.safetensors");
  ASSERT_TRUE(save_safetensors(path, random_weights(qwen2_like(), 1), DType::kBf16).ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto& t = f.value().header().tensors;
  EXPECT_EQ(t.size(), 1 + 2 * 12 + 1u);  // no lm_head: tied
  for (const char* name : {"model.embed_tokens.weight", "model.layers.1.input_layernorm.weight",
                           "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.bias",
                           "model.layers.0.self_attn.o_proj.weight", "model.layers.0.post_attention_layernorm.weight",
                           "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.down_proj.weight",
                           "model.norm.weight"})
    EXPECT_TRUE(t.count(name)) << name;
  EXPECT_EQ(t.at("model.layers.1.self_attn.k_proj.weight").dtype, "BF16");
  EXPECT_EQ(f.value().header().metadata.at("format"), "pt");
}

TEST(WeightsFile, ShapeMismatchNamesFileAndTensor) {
  ModelWeights w = random_weights(llama_like(), 1);
  w.layers[1].up_proj.shape = {32, 64};
  const std::string path = temp_path("w.safetensors");
  ASSERT_TRUE(save_safetensors(path, w, DType::kFp32).ok());
  auto r = load_safetensors(path, llama_like());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            path + ": tensor 'model.layers.1.mlp.up_proj.weight': expected shape [64, 32], got [32, 64]");
}

TEST(WeightsFile, MissingTensorsAreErrors) {
  const std::string path = temp_path("llama.safetensors");
  ASSERT_TRUE(save_safetensors(path, random_weights(llama_like(), 1), DType::kFp32).ok());
  auto r = load_safetensors(path, qwen2_like());  // wants biases the file lacks
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path + ": tensor 'model.layers.0.self_attn.q_proj.bias' is missing");

  const std::string tied = temp_path("qwen.safetensors");
  ASSERT_TRUE(save_safetensors(tied, random_weights(qwen2_like(), 1), DType::kFp32).ok());
  ModelSpec untied = qwen2_like();
  untied.tie_word_embeddings = false;
  r = load_safetensors(tied, untied);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, tied + ": tensor 'lm_head.weight' is missing");

  ModelSpec deeper = llama_like();
  deeper.num_layers = 3;
  r = load_safetensors(path, deeper);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path + ": tensor 'model.layers.2.input_layernorm.weight' is missing");
}

TEST(WeightsFile, ExtraTensorsAndATiedModelsLmHeadAreIgnored) {
  ModelWeights w = random_weights(qwen2_like(), 1);  // biases the Llama-like spec does not want
  w.lm_head = random_weights(llama_like(), 2).lm_head;  // and an lm_head the tied spec ignores
  const std::string path = temp_path("w.safetensors");
  ASSERT_TRUE(save_safetensors(path, w, DType::kFp32).ok());
  ModelSpec tied_llama = llama_like();
  tied_llama.tie_word_embeddings = true;
  auto r = load_safetensors(path, tied_llama);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r.value().lm_head.data.empty());
  EXPECT_TRUE(r.value().layers[0].q_bias.data.empty());
  EXPECT_EQ(r.value().embed_tokens.data, w.embed_tokens.data);
}

TEST(WeightsFile, TruncatedAndMalformedFilesAreErrors) {
  const std::string path = temp_path("w.safetensors");
  ASSERT_TRUE(save_safetensors(path, random_weights(llama_like(), 1), DType::kBf16).ok());
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 1);
  auto r = load_safetensors(path, llama_like());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind(path + ": tensor '", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("lie outside"), std::string::npos) << r.error().message;

  std::filesystem::resize_file(path, 100);  // inside the header
  r = load_safetensors(path, llama_like());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not fit the file's 100 bytes"), std::string::npos) << r.error().message;

  r = load_safetensors(temp_path("absent.safetensors"), llama_like());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cannot open file (no such file)"), std::string::npos);

  auto s = save_safetensors(path, random_weights(llama_like(), 1), DType::kFp8);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, path + ": cannot write fp8 tensors (fp32, fp16 or bf16)");
}

}  // namespace
}  // namespace servesim
