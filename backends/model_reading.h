// Reading a config.json (backends/model.cc) in parts: the architectures' families and defaults,
// the reader of a JSON object's fields, and each family's layer patterns (model_layers.cc).
// Internal to the model's reading.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/model.h"
#include "sim/config/json_text.h"
#include "sim/format_number.h"
#include "sim/request.h"
#include "sim/result.h"

namespace servesim::model_reading {

using nlohmann::json;

// The families servesim models, each with its own reading of the layers' kinds.
enum class Family { kLlama, kMistral, kMixtral, kQwen2, kQwen3, kQwen3Moe, kDeepseekV3, kLlama4,
                    kGptOss, kGemma3, kQwen3Next };

// Hugging Face's defaults for one configuration class (transformers' LlamaConfig, MistralConfig,
// MixtralConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig, DeepseekV3Config, Llama4TextConfig,
// GptOssConfig, Gemma3TextConfig, Qwen3NextConfig __init__ arguments). kv_heads 0 = same as the
// attention heads; head_dim 0 = hidden / heads; moe_intermediate 0 = intermediate.
struct ArchDefaults {
  const char* architecture;
  const char* model_type;
  Family family;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab, max_positions;
  double rope_theta, rms_norm_eps;
  int64_t num_experts, experts_per_token;
  int64_t sliding_window;  // 0 = None
  bool qkv_bias;
  int64_t head_dim = 0, moe_intermediate = 0;
  bool text_config = false;  // a multimodal config: the language model's keys are in text_config
  bool tie_word_embeddings = false;
};


// Reads optional fields from the root object; the first wrong type is kept in `error`.
class Fields {
 public:
  // `prefix` names the object the keys are in ("text_config." for a multimodal model's).
  Fields(const json& root, const std::string& path, std::string prefix = "")
      : root_(root), path_(path), prefix_(std::move(prefix)) {}

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

  // A list of integers (each in [lo, hi]), or nullopt when absent.
  std::optional<std::vector<int64_t>> integers(const char* key, int64_t lo, int64_t hi) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    std::vector<int64_t> out;
    if (!v->is_array()) {
      fail(key, "a list of integers", *v);
      return out;
    }
    for (const json& e : *v) {
      if (!e.is_number_integer() || e.get<int64_t>() < lo || e.get<int64_t>() > hi) {
        fail(key, ("a list of integers from " + std::to_string(lo) + " to " + std::to_string(hi)).c_str(), *v);
        return out;
      }
      out.push_back(e.get<int64_t>());
    }
    return out;
  }

  // The error text for `key` (with its prefix).
  Error error_at(const std::string& key, const std::string& what) const {
    return Error{path_ + ": key \"" + prefix_ + key + "\": " + what};
  }

  void fail(const std::string& key, const char* expected, const json& got) {
    if (error) return;
    error = Error{path_ + ": key \"" + prefix_ + key + "\": expected " + expected + ", got " +
                  (got.is_structured() ? json_excerpt(got)
                                       : std::string(got.type_name()) + " " + json_excerpt(got))};
  }

  std::optional<Error> error;

 private:
  const json& root_;
  const std::string& path_;
  const std::string prefix_;
};

// The layers' attention kinds (layer_types, else the family's pattern) and the windows they need.
Status read_layout(Fields& f, const ArchDefaults& arch, ModelSpec& m);
// Which layers are mixtures of experts, as each family's vLLM model builds them.
void read_moe_layers(Fields& f, const ArchDefaults& arch, ModelSpec& m);

}  // namespace servesim::model_reading
