#include "backends/model.h"

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backends/model_reading.h"
#include "backends/quantization_config.h"
#include "sim/config/json_text.h"
#include "sim/request.h"
#include "sim/config/toml_fields.h"

namespace servesim {
using namespace model_reading;
namespace {

constexpr ArchDefaults kArchitectures[] = {
    {"LlamaForCausalLM", "llama", Family::kLlama, 4096, 11008, 32, 32, 0, 32000, 2048, 1e4, 1e-6,
     1, 1, 0, false},
    {"MistralForCausalLM", "mistral", Family::kMistral, 4096, 14336, 32, 32, 8, 32000, 4096 * 32,
     1e4, 1e-6, 1, 1, 4096, false},
    {"MixtralForCausalLM", "mixtral", Family::kMixtral, 4096, 14336, 32, 32, 8, 32000, 4096 * 32,
     1e6, 1e-5, 8, 2, 0, false},
    // Qwen2Config's sliding_window (4096) applies only with use_sliding_window, which defaults off.
    {"Qwen2ForCausalLM", "qwen2", Family::kQwen2, 4096, 22016, 32, 32, 32, 151936, 32768, 1e4,
     1e-6, 1, 1, 0, true},
    {"Qwen3ForCausalLM", "qwen3", Family::kQwen3, 4096, 22016, 32, 32, 32, 151936, 32768, 1e4,
     1e-6, 1, 1, 0, false, 128},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::kQwen3Moe, 2048, 6144, 24, 32, 4, 151936, 32768,
     1e4, 1e-6, 128, 8, 0, false, 0, 768},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::kDeepseekV3, 7168, 18432, 61, 128, 128,
     129280, 4096, 1e4, 1e-6, 256, 8, 0, false, 0, 2048},
    {"Llama4ForConditionalGeneration", "llama4", Family::kLlama4, 5120, 8192, 48, 40, 8, 202048,
     4096 * 32, 5e5, 1e-5, 16, 1, 0, false, 128, 0, true},
    {"GptOssForCausalLM", "gpt_oss", Family::kGptOss, 2880, 2880, 36, 64, 8, 201088, 131072,
     150000, 1e-5, 128, 4, 128, false, 64},
    {"Gemma3ForConditionalGeneration", "gemma3", Family::kGemma3, 2304, 9216, 26, 8, 4, 262208,
     131072, 1e6, 1e-6, 1, 1, 4096, false, 256, 0, true, true},
    {"Gemma3ForCausalLM", "gemma3_text", Family::kGemma3, 2304, 9216, 26, 8, 4, 262208, 131072,
     1e6, 1e-6, 1, 1, 4096, false, 256, 0, false, true},
    {"Qwen3NextForCausalLM", "qwen3_next", Family::kQwen3Next, 2048, 5632, 48, 16, 2, 151936,
     32768, 1e4, 1e-6, 512, 10, 0, false, 256, 512},
};

std::string supported_list() {
  std::string s;
  for (const auto& a : kArchitectures) {
    if (!s.empty()) s += ", ";
    s += a.architecture;
    s += " (model_type ";
    s += a.model_type;
    s += ")";
  }
  return s;
}


std::string file_stem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

}  // namespace

Status check_tensor_parallel(const ModelSpec& model, int64_t tp) {
  const auto works = [&](int64_t t) {
    const bool linear = !model.has(AttentionKind::kLinear) ||
                        (model.linear_key_heads % t == 0 && model.linear_value_heads % t == 0);
    return model.num_heads % t == 0 && linear &&
           (model.num_kv_heads % t == 0 || t % model.num_kv_heads == 0);
  };
  if (tp >= 1 && works(tp)) return Ok{};
  std::string good;
  for (int64_t t = 1; t <= model.num_heads; ++t) {
    if (works(t)) good += (good.empty() ? "" : ", ") + std::to_string(t);
  }
  return Error{"--tp " + std::to_string(tp) + ": " + model.name + " has " +
               std::to_string(model.num_heads) + " attention heads and " +
               std::to_string(model.num_kv_heads) + " KV heads, which " + std::to_string(tp) +
               " GPUs cannot share evenly" +
               (model.has(AttentionKind::kLinear)
                    ? " (or its " + std::to_string(model.linear_key_heads) + " and " +
                          std::to_string(model.linear_value_heads) + " linear-attention heads)"
                    : std::string()) +
               " (vLLM refuses it too); tp can be " + good};
}

namespace {

// The config.json's root object.
Result<json> parse_model_json(const std::string& path, const std::string& text) {
  json root;
  if (const auto failure = parse_json(text, root)) {
    std::string what = failure->message;
    // nlohmann's text repeats the position ("... at line 3, column 5: "); keep what follows.
    const size_t column = what.find("column");
    const size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
    if (column != std::string::npos && colon != std::string::npos) what = what.substr(colon + 2);
    if (failure->byte == 0) return Error{path + ": malformed JSON: " + what};
    const auto [line, col] = json_line_col(text, failure->byte);
    return Error{path + ":" + std::to_string(line) + ":" + std::to_string(col) +
                 ": malformed JSON: " + what};
  }
  if (!root.is_object()) return Error{path + ": expected a JSON object (a config.json)"};
  return root;
}

// The architecture: architectures[0], else model_type.
Result<const ArchDefaults*> find_architecture(const std::string& path, const json& root) {
  const ArchDefaults* arch = nullptr;
  std::string named;
  if (auto it = root.find("architectures"); it != root.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string())
      return Error{path + ": key \"architectures\": expected a list of strings, got " +
                   json_excerpt(*it)};
    named = (*it)[0].get<std::string>();
    for (const auto& a : kArchitectures)
      if (named == a.architecture) arch = &a;
  } else if (auto mt = root.find("model_type"); mt != root.end() && !mt->is_null()) {
    if (!mt->is_string())
      return Error{path + ": key \"model_type\": expected a string, got " + json_excerpt(*mt)};
    named = mt->get<std::string>();
    for (const auto& a : kArchitectures)
      if (named == a.model_type) arch = &a;
  } else {
    return Error{path + ": neither \"architectures\" nor \"model_type\" is given; supported: " +
                 supported_list()};
  }
  if (arch == nullptr)
    return Error{path + ": unsupported architecture \"" + named + "\"; supported: " +
                 supported_list()};
  return arch;
}

// The model's shape, each key defaulting to its architecture's (errors collect in f.error).
void read_shape(Fields& f, const ArchDefaults& arch, ModelSpec& m) {
  m.hidden_size = f.integer("hidden_size", arch.hidden, 1, kMaxModelHidden);
  // Llama-4: intermediate_size is an expert's, intermediate_size_mlp the dense layers'.
  const bool llama4 = arch.family == Family::kLlama4;
  m.intermediate_size = f.integer(llama4 ? "intermediate_size_mlp" : "intermediate_size",
                                  llama4 ? 16384 : arch.intermediate, 1, kMaxModelHidden * 8);
  m.num_layers = f.integer("num_hidden_layers", arch.layers, 1, kMaxModelLayers);
  m.num_heads = f.integer("num_attention_heads", arch.heads, 1, kMaxModelHeads);
  const int64_t kv_default = arch.kv_heads > 0 ? arch.kv_heads : m.num_heads;
  m.num_kv_heads = f.integer("num_key_value_heads", kv_default, 1, kMaxModelHeads);
  m.vocab_size = f.integer("vocab_size", arch.vocab, 1, kMaxModelVocab);
  m.max_position_embeddings =
      f.integer("max_position_embeddings", arch.max_positions, 1, kMaxTokens);
  // transformers 5 moves rope_theta into rope_parameters.
  const json* rope = f.find("rope_theta");
  if (rope == nullptr)
    if (const json* rp = f.find("rope_parameters"); rp != nullptr && rp->is_object())
      if (auto it = rp->find("rope_theta"); it != rp->end() && !it->is_null()) rope = &*it;
  m.rope_theta = f.positive(rope, "rope_theta", arch.rope_theta, 1e30);
  m.rms_norm_eps = f.positive("rms_norm_eps", arch.rms_norm_eps, 1.0);
  m.tie_word_embeddings = f.boolean("tie_word_embeddings", arch.tie_word_embeddings);
  // Qwen2 always has Q, K and V biases; attention_bias adds them (its o_proj bias is not counted,
  // but gpt-oss's is).
  const bool attention_bias = f.boolean("attention_bias", arch.family == Family::kGptOss);
  m.qkv_bias = arch.qkv_bias || attention_bias;
  m.o_bias = attention_bias && arch.family == Family::kGptOss;
  m.attention_sinks = arch.family == Family::kGptOss;
  m.attention_output_gate = arch.family == Family::kQwen3Next;
  m.sliding_window = f.integer("sliding_window", arch.sliding_window, 0, kMaxTokens);
}

// The routed and shared experts (errors collect in f.error).
void read_experts(Fields& f, const ArchDefaults& arch, ModelSpec& m) {
  const char* experts_key = arch.family == Family::kDeepseekV3 ? "n_routed_experts"
                            : arch.family == Family::kQwen3Moe || arch.family == Family::kQwen3Next
                                ? "num_experts"
                                : "num_local_experts";
  m.num_experts = f.integer(experts_key, arch.num_experts, 1, kMaxModelExperts);
  const char* top_key = arch.family == Family::kGptOss && f.find("num_experts_per_tok") == nullptr
                            ? "experts_per_token"
                            : "num_experts_per_tok";
  m.experts_per_token = f.integer(top_key, arch.experts_per_token, 1, kMaxModelExperts);
  if (m.num_experts <= 1) return;
  const int64_t h8 = kMaxModelHidden * 8;
  switch (arch.family) {
    case Family::kMixtral:
    case Family::kGptOss:
      m.moe_intermediate_size = m.intermediate_size;
      m.expert_bias = arch.family == Family::kGptOss;
      break;
    case Family::kLlama4:  // one shared expert of an expert's size
      m.moe_intermediate_size = f.integer("intermediate_size", arch.intermediate, 1, h8);
      m.num_shared_experts = 1;
      m.shared_intermediate_size = m.moe_intermediate_size;
      break;
    case Family::kDeepseekV3:
      m.moe_intermediate_size = f.integer("moe_intermediate_size", arch.moe_intermediate, 1, h8);
      m.num_shared_experts = f.integer("n_shared_experts", 1, 0, kMaxModelExperts);
      m.shared_intermediate_size = m.num_shared_experts * m.moe_intermediate_size;
      break;
    default:  // Qwen3-MoE, Qwen3-Next
      m.moe_intermediate_size = f.integer("moe_intermediate_size", arch.moe_intermediate, 1, h8);
      m.shared_intermediate_size = f.integer("shared_expert_intermediate_size", 0, 0, h8);
      m.num_shared_experts = m.shared_intermediate_size > 0 ? 1 : 0;
      m.shared_expert_gate = m.num_shared_experts > 0;
  }
}


// DeepSeek's multi-head latent attention.
void read_mla(Fields& f, ModelSpec& m) {
  m.q_lora_rank = f.integer("q_lora_rank", 1536, 0, kMaxModelHidden);
  m.kv_lora_rank = f.integer("kv_lora_rank", 512, 1, kMaxModelHidden);
  m.qk_rope_head_dim = f.integer("qk_rope_head_dim", 64, 1, kMaxModelHeadDim);
  m.qk_nope_head_dim = f.integer("qk_nope_head_dim", 128, 1, kMaxModelHeadDim);
  m.v_head_dim = f.integer("v_head_dim", 128, 1, kMaxModelHeadDim);
}

// Gated DeltaNet's shapes (Qwen3-Next).
void read_linear_attention(Fields& f, ModelSpec& m) {
  m.linear_key_heads = f.integer("linear_num_key_heads", 16, 1, kMaxModelHeads);
  m.linear_value_heads = f.integer("linear_num_value_heads", 32, 1, kMaxModelHeads);
  m.linear_key_head_dim = f.integer("linear_key_head_dim", 128, 1, kMaxModelHeadDim);
  m.linear_value_head_dim = f.integer("linear_value_head_dim", 128, 1, kMaxModelHeadDim);
  m.linear_conv_kernel = f.integer("linear_conv_kernel_dim", 4, 1, 64);
}

// The heads' split, and head_dim (given, or hidden_size over the heads).
Status read_heads(Fields& f, const ArchDefaults& arch, ModelSpec& m) {
  if (m.num_heads % m.num_kv_heads != 0)
    return f.error_at("num_key_value_heads", std::to_string(m.num_kv_heads) +
                                                 " does not divide num_attention_heads " +
                                                 std::to_string(m.num_heads));
  if (m.experts_per_token > m.num_experts)
    return f.error_at(arch.family == Family::kGptOss ? "experts_per_token" : "num_experts_per_tok",
                      std::to_string(m.experts_per_token) + " exceeds the " +
                          std::to_string(m.num_experts) + " routed experts");
  if (m.has(AttentionKind::kLinear) && m.linear_value_heads % m.linear_key_heads != 0)
    return f.error_at("linear_num_value_heads", std::to_string(m.linear_value_heads) +
                                                    " is not a multiple of linear_num_key_heads " +
                                                    std::to_string(m.linear_key_heads));
  if (arch.family == Family::kDeepseekV3) {
    m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
    return Ok{};
  }
  if (f.find("head_dim") != nullptr || arch.head_dim > 0) {
    m.head_dim = f.integer("head_dim", arch.head_dim, 1, kMaxModelHeadDim);
    if (f.error) return *f.error;
    return Ok{};
  }
  if (m.hidden_size % m.num_heads != 0)
    return f.error_at("num_attention_heads", std::to_string(m.num_heads) +
                                                 " does not divide hidden_size " +
                                                 std::to_string(m.hidden_size) + "; give head_dim");
  m.head_dim = m.hidden_size / m.num_heads;
  return Ok{};
}

// torch_dtype (renamed dtype in recent transformers); absent: the struct's default (bf16).
Status read_dtype(Fields& f, ModelSpec& m) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    const json* v = f.find(key);
    if (v == nullptr) continue;
    if (!v->is_string()) return f.error_at(key, "expected a string, got " + json_excerpt(*v));
    auto d = parse_dtype(v->get<std::string>());
    if (!d) return f.error_at(key, d.error().message);
    m.dtype = d.value();
    break;
  }
  return Ok{};
}

// The object the language model's keys are in: text_config for a multimodal model that has one.
const json& text_root(const json& root, const ArchDefaults& arch) {
  if (!arch.text_config) return root;
  auto it = root.find("text_config");
  return it != root.end() && it->is_object() ? *it : root;
}

// Everything but the quantization, from the language model's keys.
Status read_model(Fields& f, const ArchDefaults& arch, ModelSpec& m) {
  read_shape(f, arch, m);
  read_experts(f, arch, m);
  if (f.error) return *f.error;
  read_moe_layers(f, arch, m);
  if (arch.family == Family::kDeepseekV3) read_mla(f, m);
  if (Status s = read_layout(f, arch, m); !s.ok()) return s;
  if (m.has(AttentionKind::kLinear)) read_linear_attention(f, m);
  if (f.error) return *f.error;
  if (Status s = read_heads(f, arch, m); !s.ok()) return s;
  if (Status s = read_dtype(f, m); !s.ok()) return s;
  // A sliding window that no layer uses (Mistral, Qwen without use_sliding_window) is kept as the
  // file says, for information; only the layers' kinds count.
  if (arch.family == Family::kQwen2 && !f.boolean("use_sliding_window", false)) m.sliding_window = 0;
  return Ok{};
}

}  // namespace

Result<ModelSpec> load_model(const std::string& path) {
  Result<std::string> read = read_text_file(path, kMaxModelConfigBytes);
  if (!read.ok()) return read.error();
  Result<json> root = parse_model_json(path, read.value());
  if (!root.ok()) return root.error();
  Result<const ArchDefaults*> arch = find_architecture(path, root.value());
  if (!arch.ok()) return arch.error();

  const json& text = text_root(root.value(), *arch.value());
  Fields f(text, path, &text == &root.value() ? "" : "text_config.");
  ModelSpec m;
  m.name = file_stem(path);
  m.path = path;
  m.architecture = arch.value()->architecture;
  if (Status s = read_model(f, *arch.value(), m); !s.ok()) return s.error();
  Result<WeightFormat> quant = read_quantization_config(root.value(), path);
  if (!quant.ok()) return quant.error();
  m.quantization = quant.value();
  return m;
}

}  // namespace servesim
