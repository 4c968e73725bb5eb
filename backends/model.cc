#include "backends/model.h"

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/config/json_text.h"
#include "sim/request.h"
#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

using nlohmann::json;

// Hugging Face's defaults for one configuration class (transformers' LlamaConfig, MistralConfig,
// MixtralConfig, Qwen2Config __init__ arguments). kv_heads 0 = same as the attention heads.
struct ArchDefaults {
  const char* architecture;
  const char* model_type;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab, max_positions;
  double rope_theta, rms_norm_eps;
  int64_t num_experts, experts_per_token;
  int64_t sliding_window;  // 0 = None
  bool qkv_bias;
};

constexpr ArchDefaults kArchitectures[] = {
    {"LlamaForCausalLM", "llama", 4096, 11008, 32, 32, 0, 32000, 2048, 1e4, 1e-6, 1, 1, 0,
     false},
    {"MistralForCausalLM", "mistral", 4096, 14336, 32, 32, 8, 32000, 4096 * 32, 1e4, 1e-6, 1, 1,
     4096, false},
    {"MixtralForCausalLM", "mixtral", 4096, 14336, 32, 32, 8, 32000, 4096 * 32, 1e6, 1e-5, 8, 2, 0,
     false},
    // Qwen2Config's sliding_window (4096) applies only with use_sliding_window, which defaults off.
    {"Qwen2ForCausalLM", "qwen2", 4096, 22016, 32, 32, 32, 151936, 32768, 1e4, 1e-6, 1, 1, 0, true},
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

// Reads optional fields from the root object; the first wrong type is kept in `error`.
class Fields {
 public:
  Fields(const json& root, const std::string& path) : root_(root), path_(path) {}

  // Absent or null: nullopt.
  const json* find(const char* key) const {
    auto it = root_.find(key);
    return it == root_.end() || it->is_null() ? nullptr : &*it;
  }

  // An integer in [lo, hi] (a float with an integral value counts: 4096.0).
  int64_t integer(const char* key, int64_t fallback, int64_t lo, int64_t hi) {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    double d = std::nan("");
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      const bool in_range = u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo;
      return in_range ? static_cast<int64_t>(u) : fail_range(key, lo, hi, *v);
    }
    if (v->is_number_integer()) {
      const int64_t i = v->get<int64_t>();
      return i >= lo && i <= hi ? i : fail_range(key, lo, hi, *v);
    }
    if (v->is_number_float()) d = v->get<double>();
    if (std::floor(d) == d && d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) {
      return static_cast<int64_t>(d);
    }
    return fail_range(key, lo, hi, *v);
  }

  int64_t fail_range(const char* key, int64_t lo, int64_t hi, const json& got) {
    const std::string want = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    fail(key, want.c_str(), got);
    return lo;
  }

  // A finite number in (0, hi].
  double positive(const json* v, const char* key, double fallback, double hi) {
    if (v == nullptr) return fallback;
    const double d = v->is_number() ? v->get<double>() : std::nan("");
    if (d > 0 && d <= hi) return d;
    const std::string want = "a number > 0 and <= " + format_number(hi);
    fail(key, want.c_str(), *v);
    return fallback;
  }
  double positive(const char* key, double fallback, double hi) {
    return positive(find(key), key, fallback, hi);
  }

  bool boolean(const char* key, bool fallback) {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (v->is_boolean()) return v->get<bool>();
    fail(key, "true or false", *v);
    return fallback;
  }

  void fail(const std::string& key, const char* expected, const json& got) {
    if (error) return;
    error = Error{path_ + ": key \"" + key + "\": expected " + expected + ", got " +
                  (got.is_structured() ? json_excerpt(got)
                                       : std::string(got.type_name()) + " " + json_excerpt(got))};
  }

  std::optional<Error> error;

 private:
  const json& root_;
  const std::string& path_;
};

std::string file_stem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

}  // namespace

double dtype_bytes(DType d) {
  switch (d) {
    case DType::kFp32: return 4;
    case DType::kFp16: return 2;
    case DType::kBf16: return 2;
    case DType::kFp8: return 1;
    case DType::kInt4: return 0.5;
  }
  return 2;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kInt4: return "int4";
  }
  return "?";
}

Result<DType> parse_dtype(const std::string& s) {
  if (s == "fp32" || s == "float32" || s == "float") return DType::kFp32;
  if (s == "fp16" || s == "float16" || s == "half") return DType::kFp16;
  if (s == "bf16" || s == "bfloat16") return DType::kBf16;
  if (s == "fp8" || s == "float8" || s == "float8_e4m3fn" || s == "float8_e5m2") return DType::kFp8;
  if (s == "int4") return DType::kInt4;
  return Error{"unknown dtype \"" + s +
               "\": expected fp32, fp16, bf16, fp8 or int4 (or float32, float16, bfloat16)"};
}

double ModelSpec::num_params() const {
  const double h = static_cast<double>(hidden_size);
  const double q = static_cast<double>(num_heads * head_dim);
  const double kv = static_cast<double>(num_kv_heads * head_dim);
  const double experts = static_cast<double>(num_experts);
  double layer = h * q + 2 * h * kv + q * h;     // q, k, v, o projections
  if (qkv_bias) layer += q + 2 * kv;
  layer += experts * 3 * h * static_cast<double>(intermediate_size);  // gate, up, down per expert
  if (num_experts > 1) layer += h * experts;     // router
  layer += 2 * h;                                // input and post-attention RMSNorm
  const double embedding = static_cast<double>(vocab_size) * h;
  return embedding + static_cast<double>(num_layers) * layer + h +
         (tie_word_embeddings ? 0 : embedding);
}

double ModelSpec::active_params() const {
  const double idle_experts = static_cast<double>(num_experts - experts_per_token);
  return num_params() - static_cast<double>(num_layers) * idle_experts * 3 *
                            static_cast<double>(hidden_size) *
                            static_cast<double>(intermediate_size);
}

double ModelSpec::weight_bytes(DType weights) const { return num_params() * dtype_bytes(weights); }

double ModelSpec::kv_bytes_per_token(DType kv) const {
  return 2 * static_cast<double>(num_layers * num_kv_heads * head_dim) * dtype_bytes(kv);
}

Status check_tensor_parallel(const ModelSpec& model, int64_t tp) {
  const auto works = [&](int64_t t) {
    return model.num_heads % t == 0 && (model.num_kv_heads % t == 0 || t % model.num_kv_heads == 0);
  };
  if (tp >= 1 && works(tp)) return Ok{};
  std::string good;
  for (int64_t t = 1; t <= model.num_heads; ++t) {
    if (works(t)) good += (good.empty() ? "" : ", ") + std::to_string(t);
  }
  return Error{"--tp " + std::to_string(tp) + ": " + model.name + " has " +
               std::to_string(model.num_heads) + " attention heads and " +
               std::to_string(model.num_kv_heads) + " KV heads, which " + std::to_string(tp) +
               " GPUs cannot share evenly (vLLM refuses it too); tp can be " + good};
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
  m.intermediate_size = f.integer("intermediate_size", arch.intermediate, 1, kMaxModelHidden * 8);
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
  m.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  // Qwen2 always has Q, K and V biases; attention_bias adds them (its o_proj bias is not counted).
  m.qkv_bias = arch.qkv_bias || f.boolean("attention_bias", false);
  m.num_experts = f.integer("num_local_experts", arch.num_experts, 1, kMaxModelExperts);
  m.experts_per_token = f.integer("num_experts_per_tok", arch.experts_per_token, 1, kMaxModelExperts);
  m.sliding_window = f.integer("sliding_window", arch.sliding_window, 0, kMaxTokens);
  if (m.architecture == std::string("Qwen2ForCausalLM") && !f.boolean("use_sliding_window", false))
    m.sliding_window = 0;
}

// The heads' split, and head_dim (given, or hidden_size over the heads).
Status read_heads(Fields& f, const std::string& path, ModelSpec& m) {
  if (m.num_heads % m.num_kv_heads != 0)
    return Error{path + ": key \"num_key_value_heads\": " + std::to_string(m.num_kv_heads) +
                 " does not divide num_attention_heads " + std::to_string(m.num_heads)};
  if (m.experts_per_token > m.num_experts)
    return Error{path + ": key \"num_experts_per_tok\": " + std::to_string(m.experts_per_token) +
                 " exceeds num_local_experts " + std::to_string(m.num_experts)};
  if (f.find("head_dim") != nullptr) {
    m.head_dim = f.integer("head_dim", 0, 1, kMaxModelHeadDim);
    if (f.error) return *f.error;
    return Ok{};
  }
  if (m.hidden_size % m.num_heads != 0)
    return Error{path + ": key \"num_attention_heads\": " + std::to_string(m.num_heads) +
                 " does not divide hidden_size " + std::to_string(m.hidden_size) +
                 "; give head_dim"};
  m.head_dim = m.hidden_size / m.num_heads;
  return Ok{};
}

// torch_dtype (renamed dtype in recent transformers); absent: the struct's default (bf16).
Status read_dtype(Fields& f, const std::string& path, ModelSpec& m) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    const json* v = f.find(key);
    if (v == nullptr) continue;
    if (!v->is_string())
      return Error{path + ": key \"" + key + "\": expected a string, got " + json_excerpt(*v)};
    auto d = parse_dtype(v->get<std::string>());
    if (!d) return Error{path + ": key \"" + key + "\": " + d.error().message};
    m.dtype = d.value();
    break;
  }
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

  Fields f(root.value(), path);
  ModelSpec m;
  m.name = file_stem(path);
  m.path = path;
  m.architecture = arch.value()->architecture;
  read_shape(f, *arch.value(), m);
  if (f.error) return *f.error;
  if (Status s = read_heads(f, path, m); !s.ok()) return s.error();
  if (Status s = read_dtype(f, path, m); !s.ok()) return s.error();
  return m;
}

}  // namespace servesim
