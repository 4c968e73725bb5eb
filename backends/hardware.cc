#include "backends/hardware.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include <toml++/toml.h>

#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

constexpr double kBytesPerGiB = 1073741824.0;  // 2^30
constexpr double kBytesPerMiB = 1048576.0;     // 2^20
constexpr double kGiga = 1e9;                  // GB/s -> bytes/s
constexpr double kTera = 1e12;                 // TFLOP/s -> FLOP/s
constexpr double kMicro = 1e-6;                // us -> s


// Reads `key` as a number in (min, max] (or [min, max] when min_inclusive) into *out, scaled by
// `scale`. Leaves *out alone when the key is absent, unless `required`.
Status read_number(const TableFields& f, std::string_view key, bool required, double min,
                   bool min_inclusive, double max, double scale, double* out) {
  if (required) {
    if (Status s = f.require(key); !s) return s;
  }
  auto v = f.number(key, min, min_inclusive, max);
  if (!v) return v.error();
  if (v.value()) *out = *v.value() * scale;
  return Ok{};
}

struct NumberKey {
  std::string_view key;
  bool required;
  double min;
  bool min_inclusive;
  double max;
  double scale;
  double HardwareSpec::*field;
};
// Bounds far outside any real device (data/hardware/README.md), so that every time and size the
// roofline derives stays finite and inside the simulation horizon.
constexpr NumberKey kNumbers[] = {
    {"memory_gib", true, 1e-3, true, 1e6, kBytesPerGiB, &HardwareSpec::memory_bytes},
    {"memory_bandwidth_gbs", true, 1e-3, true, 1e6, kGiga, &HardwareSpec::memory_bandwidth},
    {"fp16_tflops", true, 1e-6, true, 1e6, kTera, &HardwareSpec::fp16_flops},
    {"fp8_tflops", false, 0, true, 1e6, kTera, &HardwareSpec::fp8_flops},
    {"fp4_tflops", false, 0, true, 1e6, kTera, &HardwareSpec::fp4_flops},
    {"int8_tops", false, 0, true, 1e6, kTera, &HardwareSpec::int8_ops},
    {"fp32_tflops", true, 1e-6, true, 1e6, kTera, &HardwareSpec::fp32_flops},
    {"interconnect_gbs", true, 1e-3, true, 1e6, kGiga, &HardwareSpec::interconnect_bandwidth},
    {"interconnect_latency_us", false, 0, true, 1e6, kMicro, &HardwareSpec::interconnect_latency},
    {"network_gbs", false, 1e-3, true, 1e6, kGiga, &HardwareSpec::network_bandwidth},
    {"network_latency_us", false, 0, true, 1e6, kMicro, &HardwareSpec::network_latency},
    {"nccl_latency_us", false, 0, true, 1e6, kMicro, &HardwareSpec::nccl_latency},
    {"nccl_busbw_gbs", false, 1e-3, true, 1e6, kGiga, &HardwareSpec::nccl_busbw},
    {"nccl_busbw_full_mib", false, 0, true, 1e6, kBytesPerMiB, &HardwareSpec::nccl_busbw_full_bytes},
    {"nccl_busbw_slope", false, 0, true, 1.0, 1.0, &HardwareSpec::nccl_busbw_slope},
    {"custom_all_reduce_latency_us", false, 0, true, 1e6, kMicro, &HardwareSpec::custom_all_reduce_latency},
    {"custom_all_reduce_gbs", false, 1e-3, true, 1e6, kGiga, &HardwareSpec::custom_all_reduce_bandwidth},
    {"nvlink_domain_gpus", false, 1, true, 1e6, 1.0, &HardwareSpec::nvlink_domain_gpus},
    {"p2p_latency_us", false, 0, true, 1e6, kMicro, &HardwareSpec::p2p_latency},
    {"p2p_gbs", false, 1e-3, true, 1e6, kGiga, &HardwareSpec::p2p_bandwidth},
    {"gemm_efficiency", false, 1e-3, true, 1.0, 1.0, &HardwareSpec::gemm_efficiency},
    {"fp8_gemm_efficiency", false, 0, true, 1.0, 1.0, &HardwareSpec::fp8_gemm_efficiency},
    {"fp4_gemm_efficiency", false, 0, true, 1.0, 1.0, &HardwareSpec::fp4_gemm_efficiency},
    {"int8_gemm_efficiency", false, 0, true, 1.0, 1.0, &HardwareSpec::int8_gemm_efficiency},
    {"memory_efficiency", false, 1e-3, true, 1.0, 1.0, &HardwareSpec::memory_efficiency},
    {"attention_efficiency", false, 1e-3, true, 1.0, 1.0, &HardwareSpec::attention_efficiency},
    {"prefill_attention_efficiency", false, 0, true, 1.0, 1.0, &HardwareSpec::prefill_attention_efficiency},
    {"prefill_self_attention_efficiency", false, 0, true, 1.0, 1.0,
     &HardwareSpec::prefill_self_attention_efficiency},
    {"mla_decode_compute_efficiency", false, 0, true, 1.0, 1.0, &HardwareSpec::mla_decode_compute_efficiency},
    {"overhead_us", false, 0, true, 1e6, kMicro, &HardwareSpec::overhead},
    {"attention_sequence_us", false, 0, true, 1e3, kMicro, &HardwareSpec::attention_sequence_overhead},
    {"gemm_half_rows", false, 0, true, 1e9, 1.0, &HardwareSpec::gemm_half_rows},
    {"gemm_tile_rows", false, 0, true, 65536, 1.0, &HardwareSpec::gemm_tile_rows},
    {"price_per_hour_usd", false, 0, true, 1e6, 1.0, &HardwareSpec::price_per_hour_usd},
    {"gpus_per_node", false, 1, true, 1024, 1.0, &HardwareSpec::gpus_per_node},
    {"node_price_per_hour_usd", false, 0, true, 1e7, 1.0, &HardwareSpec::node_price_per_hour_usd},
};

const NumberKey* number_key(std::string_view key) {
  for (const NumberKey& n : kNumbers) {
    if (n.key == key) return &n;
  }
  return nullptr;
}

// The [calibration] table: keys = [names], samples = [[values], ...], one value per key per row.
Status read_calibration(const toml::table& root, const std::string& path, HardwareSpec& hw) {
  const toml::node* node = root.get("calibration");
  if (node == nullptr) return Ok{};
  const TableFields top(root, path, "");
  const toml::table* table = node->as_table();
  if (table == nullptr) return top.expected("calibration", "a table with keys and samples (written by sim calibrate)");
  const TableFields f(*table, path, "calibration");
  if (Status s = f.check_known({"keys", "samples"}); !s) return s.error();
  if (Status s = f.require("keys"); !s) return s.error();
  if (Status s = f.require("samples"); !s) return s.error();
  const toml::array* keys = table->get_as<toml::array>("keys");
  if (keys == nullptr || keys->empty()) return f.expected("keys", "a non-empty array of hardware key names");
  for (const toml::node& k : *keys) {
    const auto* name = k.as_string();
    const NumberKey* known = name != nullptr ? number_key(name->get()) : nullptr;
    if (known == nullptr || known->required) {
      return f.error_at_key("keys", "expected names of optional number keys of this file (gemm_efficiency, "
                                    "overhead_us, ...), got " + (name != nullptr ? "'" + name->get() + "'" : std::string("a non-string")));
    }
    hw.calibration_keys.push_back(name->get());
  }
  const toml::array* samples = table->get_as<toml::array>("samples");
  if (samples == nullptr || samples->empty()) return f.expected("samples", "a non-empty array of rows of numbers");
  for (size_t r = 0; r < samples->size(); ++r) {
    const toml::array* row = (*samples)[r].as_array();
    const std::string where = "samples[" + std::to_string(r) + "]";
    if (row == nullptr || row->size() != hw.calibration_keys.size()) {
      return f.error_at_key("samples", where + ": expected a row of " + std::to_string(hw.calibration_keys.size()) +
                                           " numbers, one per key");
    }
    std::vector<double> values;
    for (size_t k = 0; k < row->size(); ++k) {
      const std::optional<double> v = (*row)[k].value<double>();
      const NumberKey* key = number_key(hw.calibration_keys[k]);
      if (!v || !(*v >= key->min) || *v > key->max || (!key->min_inclusive && *v == key->min)) {
        return f.error_at_key("samples", where + "[" + std::to_string(k) + "]: expected a value of " +
                                             std::string(key->key) + " in its bounds");
      }
      values.push_back(*v);
    }
    hw.calibration_samples.push_back(std::move(values));
  }
  return Ok{};
}

}  // namespace

Result<HardwareKeyBounds> hardware_key_bounds(std::string_view key) {
  const NumberKey* n = number_key(key);
  if (n == nullptr) return Error{"unknown hardware key '" + std::string(key) + "'"};
  return HardwareKeyBounds{n->min * n->scale, n->min_inclusive, n->max * n->scale};
}

Status set_hardware_number(HardwareSpec& hw, std::string_view key, double value) {
  const NumberKey* n = number_key(key);
  if (n == nullptr) return Error{"unknown hardware key '" + std::string(key) + "'"};
  if (!(value >= n->min) || value > n->max || (!n->min_inclusive && value == n->min)) {
    return Error{std::string(key) + " = " + std::to_string(value) + " is outside its bounds"};
  }
  hw.*(n->field) = value * n->scale;
  return Ok{};
}

std::vector<std::pair<std::string, double>> hardware_numbers(const HardwareSpec& hw) {
  const HardwareSpec defaults;
  std::vector<std::pair<std::string, double>> out;
  for (const NumberKey& n : kNumbers) {
    if (n.required || hw.*(n.field) != defaults.*(n.field)) out.emplace_back(std::string(n.key), hw.*(n.field) / n.scale);
  }
  return out;
}

std::vector<std::pair<std::string, bool>> hardware_booleans(const HardwareSpec& hw) {
  return {{"bf16", hw.bf16}, {"nvlink_full_mesh", hw.nvlink_full_mesh}};
}

Result<HardwareSpec> with_calibration_sample(const HardwareSpec& hw, int64_t sample) {
  if (sample < 0 || static_cast<size_t>(sample) >= hw.calibration_samples.size()) {
    return Error{hw.path + ": no calibration sample " + std::to_string(sample) + " (the file has " +
                 std::to_string(hw.calibration_samples.size()) + "; sim calibrate writes them into a [calibration] table)"};
  }
  HardwareSpec out = hw;
  for (size_t k = 0; k < hw.calibration_keys.size(); ++k) {
    if (Status s = set_hardware_number(out, hw.calibration_keys[k], hw.calibration_samples[static_cast<size_t>(sample)][k]);
        !s.ok()) {
      return Error{hw.path + ": calibration sample " + std::to_string(sample) + ": " + s.error().message};
    }
  }
  return out;
}

Result<HardwareSpec> load_hardware(const std::string& path) {
  Result<std::string> text = read_text_file(path);
  if (!text) return text.error();
  auto parsed = parse_toml(text.value(), path);
  if (!parsed) return parsed.error();
  const toml::table& root = parsed.value();
  const TableFields f(root, path, "");

  if (Status s = f.check_known({"name", "memory_gib", "memory_bandwidth_gbs", "fp16_tflops",
                                "fp8_tflops", "fp4_tflops", "int8_tops", "fp32_tflops", "bf16", "interconnect_gbs",
                                "interconnect_latency_us", "network_gbs", "network_latency_us", "nccl_latency_us",
                                "nccl_busbw_gbs", "nccl_busbw_full_mib", "nccl_busbw_slope",
                                "custom_all_reduce_latency_us", "custom_all_reduce_gbs", "nvlink_full_mesh",
                                "nvlink_domain_gpus", "p2p_latency_us", "p2p_gbs", "gemm_efficiency",
                                "fp8_gemm_efficiency", "fp4_gemm_efficiency", "int8_gemm_efficiency", "memory_efficiency",
                                "attention_efficiency", "prefill_attention_efficiency",
                                "prefill_self_attention_efficiency", "mla_decode_compute_efficiency", "calibration",
                                "overhead_us", "attention_sequence_us", "gemm_half_rows", "gemm_tile_rows",
                                "price_per_hour_usd", "gpus_per_node", "node_price_per_hour_usd"});
      !s) {
    return s.error();
  }

  HardwareSpec hw;
  hw.path = path;
  if (Status s = f.require("name"); !s) return s.error();
  auto name = f.string("name");
  if (!name) return f.expected("name", "a non-empty string");
  hw.name = *name.value();

  for (const NumberKey& n : kNumbers) {
    if (Status s = read_number(f, n.key, n.required, n.min, n.min_inclusive, n.max, n.scale, &(hw.*(n.field)));
        !s) {
      return s.error();
    }
  }
  if (Status s = read_calibration(root, path, hw); !s) return s.error();

  // 0 means "as attention_efficiency"; between 0 and the other efficiencies' floor it means nothing.
  if (hw.prefill_attention_efficiency > 0 && hw.prefill_attention_efficiency < 1e-3) {
    return f.expected("prefill_attention_efficiency", "0 (as attention_efficiency) or a number in [0.001, 1]");
  }
  if (hw.prefill_self_attention_efficiency > 0 && hw.prefill_self_attention_efficiency < 1e-3) {
    return f.expected("prefill_self_attention_efficiency",
                      "0 (as prefill_attention_efficiency) or a number in [0.001, 1]");
  }
  // The per-type GEMM efficiencies: 0 means "as gemm_efficiency"; below the floor it means nothing.
  for (const auto& [key, value] : {std::pair<std::string_view, double>{"fp8_gemm_efficiency", hw.fp8_gemm_efficiency},
                                   {"fp4_gemm_efficiency", hw.fp4_gemm_efficiency},
                                   {"int8_gemm_efficiency", hw.int8_gemm_efficiency}}) {
    if (value > 0 && value < 1e-3) return f.expected(key, "0 (as gemm_efficiency) or a number in [0.001, 1]");
  }
  if (hw.gpus_per_node != std::floor(hw.gpus_per_node)) {
    return f.expected("gpus_per_node", "a whole number of GPUs, e.g. 8");
  }
  for (const auto& [key, field] : {std::pair<std::string_view, bool HardwareSpec::*>{"bf16", &HardwareSpec::bf16},
                                    {"nvlink_full_mesh", &HardwareSpec::nvlink_full_mesh}}) {
    if (const toml::node* node = root.get(key)) {
      const auto* b = node->as_boolean();
      if (b == nullptr) return f.expected(key, "true or false");
      hw.*field = b->get();
    }
  }
  if (hw.nvlink_domain_gpus != std::floor(hw.nvlink_domain_gpus)) {
    return f.expected("nvlink_domain_gpus", "a whole number of GPUs, e.g. 72");
  }
  return hw;
}

}  // namespace servesim
