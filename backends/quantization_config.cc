#include "backends/quantization_config.h"

#include <nlohmann/json.hpp>

#include "sim/config/json_text.h"

namespace servesim {
namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "fp8, fbgemm_fp8, mxfp4, modelopt (FP8, NVFP4), compressed-tensors, awq, gptq, awq_marlin, "
    "gptq_marlin";

Error key_error(const std::string& path, const std::string& key, const std::string& what) {
  return Error{path + ": key \"quantization_config." + key + "\": " + what};
}

// What modules_to_not_convert / ignore / exclude_modules leave unquantized, by name fragment.
void read_exclusions(const json& q, WeightFormat& f) {
  for (const char* key : {"modules_to_not_convert", "ignore", "exclude_modules"}) {
    auto it = q.find(key);
    if (it == q.end() || !it->is_array()) continue;
    for (const json& e : *it) {
      if (!e.is_string()) continue;
      const std::string name = e.get<std::string>();
      if (name.find("attn") != std::string::npos) f.attention = false;
      if (name.find("shared_expert") != std::string::npos) f.shared_experts = false;
      if (name.find("mlp") != std::string::npos && name.find("expert") == std::string::npos)
        f.dense_ffn = false;
    }
  }
}

// An integer key of q, or `fallback` when absent; -1 when it is there and not an integer.
int64_t int_key(const json& q, const char* key, int64_t fallback) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return fallback;
  return it->is_number_integer() ? it->get<int64_t>() : -1;
}

// AWQ and GPTQ: 4- or 8-bit integer weights in groups with an fp16 scale and a zero point.
Result<WeightFormat> integer_groups(const json& q, const std::string& path) {
  const char* bits_key = q.contains("w_bit") ? "w_bit" : "bits";
  const char* group_key = q.contains("q_group_size") ? "q_group_size" : "group_size";
  const int64_t bits = int_key(q, bits_key, 4), group = int_key(q, group_key, 128);
  if (bits != 4 && bits != 8) return key_error(path, bits_key, "expected 4 or 8, got " + std::to_string(bits));
  const bool typed = !q.contains(group_key) || q[group_key].is_number_integer();
  if (!typed || group == 0 || group < -1)
    return key_error(path, group_key, "expected a positive group size or -1 (per channel)");
  WeightFormat f;
  f.method = q.value("quant_method", std::string("awq"));
  f.dtype = bits == 4 ? DType::kInt4 : DType::kInt8;
  f.weight_only = true;
  // An fp16 scale and a zero point of `bits` bits per group (per output channel: negligible).
  f.scale_bytes = group > 0 ? (2.0 + static_cast<double>(bits) / 8.0) / static_cast<double>(group) : 0;
  return f;
}

// compressed-tensors: the first config group's weights (and whether activations are quantized).
Result<WeightFormat> compressed_tensors(const json& q, const std::string& path) {
  auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty() || !groups->begin()->is_object())
    return key_error(path, "config_groups", "expected an object of quantization groups");
  const json& g = *groups->begin();
  auto w = g.find("weights");
  if (w == g.end() || !w->is_object())
    return key_error(path, "config_groups." + groups->begin().key() + ".weights", "expected an object");
  const int64_t bits = int_key(*w, "num_bits", -1);
  const std::string type = w->value("type", std::string("int"));
  const int64_t group = int_key(*w, "group_size", 0);
  WeightFormat f;
  f.method = "compressed-tensors";
  auto acts = g.find("input_activations");
  f.weight_only = acts == g.end() || acts->is_null();
  const std::string where = "config_groups." + groups->begin().key() + ".weights.num_bits";
  if (type == "float" && bits == 8) {
    f.dtype = DType::kFp8;
  } else if (type == "float" && bits == 4) {  // NVFP4: an fp8 scale per group of 16
    f.dtype = DType::kFp4;
    f.scale_bytes = 1.0 / static_cast<double>(group > 0 ? group : 16);
  } else if (type == "int" && (bits == 8 || bits == 4)) {
    f.dtype = bits == 8 ? DType::kInt8 : DType::kInt4;
    f.scale_bytes = group > 0 ? 2.0 / static_cast<double>(group) : 0;
  } else {
    return key_error(path, where, "expected 8-bit float or int, 4-bit float or int weights, got " +
                                      std::to_string(bits) + "-bit " + type);
  }
  if (f.dtype == DType::kInt4) f.weight_only = true;
  return f;
}

// ModelOpt: FP8 (per tensor) or NVFP4 (an fp8 scale per 16 elements).
Result<WeightFormat> modelopt(const json& q, const std::string& path) {
  const json& inner = q.contains("quantization") && q["quantization"].is_object() ? q["quantization"] : q;
  const std::string algo = inner.value("quant_algo", std::string());
  WeightFormat f;
  f.method = "modelopt";
  if (algo == "FP8") {
    f.dtype = DType::kFp8;
  } else if (algo == "NVFP4") {
    f.dtype = DType::kFp4;
    f.scale_bytes = 1.0 / 16;
  } else {
    return key_error(path, "quant_algo", "expected FP8 or NVFP4, got \"" + algo + "\"");
  }
  read_exclusions(inner, f);
  return f;
}

Result<WeightFormat> by_method(const json& q, const std::string& method, const std::string& path) {
  WeightFormat f;
  f.method = method;
  if (method == "fp8" || method == "fbgemm_fp8") {
    f.dtype = DType::kFp8;
    auto block = q.find("weight_block_size");
    f.block_scaled = block != q.end() && block->is_array() && block->size() == 2;
    // One fp32 scale per block of 128 x 128 (DeepSeek-V3), else per tensor or channel.
    if (f.block_scaled && (*block)[0].is_number_integer() && (*block)[1].is_number_integer() &&
        (*block)[0].get<int64_t>() > 0 && (*block)[1].get<int64_t>() > 0) {
      f.scale_bytes = 4.0 / (static_cast<double>((*block)[0].get<int64_t>()) *
                             static_cast<double>((*block)[1].get<int64_t>()));
    } else if (f.block_scaled) {
      return key_error(path, "weight_block_size", "expected two positive integers, got " + json_excerpt(*block));
    }
  } else if (method == "mxfp4") {  // an 8-bit power-of-two scale per 32 elements
    f.dtype = DType::kFp4;
    f.scale_bytes = 1.0 / 32;
    f.weight_only = true;          // the kernels on Hopper and earlier dequantize to bf16
  } else if (method == "modelopt" || method == "modelopt_fp4") {
    return modelopt(q, path);
  } else if (method == "compressed-tensors") {
    return compressed_tensors(q, path);
  } else if (method == "awq" || method == "gptq" || method == "awq_marlin" || method == "gptq_marlin") {
    return integer_groups(q, path);
  } else {
    return key_error(path, "quant_method", "\"" + method + "\" is not modelled; supported: " + kSupported);
  }
  read_exclusions(q, f);
  return f;
}

}  // namespace

Result<WeightFormat> read_quantization_config(const json& root, const std::string& path) {
  auto it = root.find("quantization_config");
  if (it == root.end() || it->is_null()) return WeightFormat{};
  if (!it->is_object())
    return Error{path + ": key \"quantization_config\": expected an object, got " + json_excerpt(*it)};
  auto method = it->find("quant_method");
  if (method == it->end() || !method->is_string())
    return key_error(path, "quant_method", "expected a string naming the method (" +
                                               std::string(kSupported) + ")");
  Result<WeightFormat> f = by_method(*it, method->get<std::string>(), path);
  if (f.ok()) read_exclusions(*it, f.value());
  return f;
}

}  // namespace servesim
