#include "backends/hardware.h"

#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include <toml++/toml.h>

#include "sim/toml_fields.h"

namespace servesim {
namespace {

constexpr double kBytesPerGiB = 1073741824.0;  // 2^30
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

}  // namespace

Result<HardwareSpec> load_hardware(const std::string& path) {
  Result<std::string> text = read_text_file(path);
  if (!text) return text.error();
  auto parsed = parse_toml(text.value(), path);
  if (!parsed) return parsed.error();
  const toml::table& root = parsed.value();
  const TableFields f(root, path, "");

  if (Status s = f.check_known({"name", "memory_gib", "memory_bandwidth_gbs", "fp16_tflops",
                                "fp8_tflops", "fp32_tflops", "bf16", "interconnect_gbs",
                                "interconnect_latency_us", "gemm_efficiency", "memory_efficiency",
                                "attention_efficiency", "prefill_attention_efficiency",
                                "prefill_self_attention_efficiency",
                                "overhead_us", "attention_sequence_us", "gemm_half_rows", "gemm_tile_rows",
                                "price_per_hour_usd"});
      !s) {
    return s.error();
  }

  HardwareSpec hw;
  hw.path = path;
  if (Status s = f.require("name"); !s) return s.error();
  auto name = f.string("name");
  if (!name) return f.expected("name", "a non-empty string");
  hw.name = *name.value();

  struct NumberKey {
    std::string_view key;
    bool required;
    double min;
    bool min_inclusive;
    double max;
    double scale;
    double* out;
  };
  // Bounds far outside any real device (data/hardware/README.md), so that every time and size the
  // roofline derives stays finite and inside the simulation horizon.
  const NumberKey numbers[] = {
      {"memory_gib", true, 1e-3, true, 1e6, kBytesPerGiB, &hw.memory_bytes},
      {"memory_bandwidth_gbs", true, 1e-3, true, 1e6, kGiga, &hw.memory_bandwidth},
      {"fp16_tflops", true, 1e-6, true, 1e6, kTera, &hw.fp16_flops},
      {"fp8_tflops", false, 0, true, 1e6, kTera, &hw.fp8_flops},
      {"fp32_tflops", true, 1e-6, true, 1e6, kTera, &hw.fp32_flops},
      {"interconnect_gbs", true, 1e-3, true, 1e6, kGiga, &hw.interconnect_bandwidth},
      {"interconnect_latency_us", false, 0, true, 1e6, kMicro, &hw.interconnect_latency},
      {"gemm_efficiency", false, 1e-3, true, 1.0, 1.0, &hw.gemm_efficiency},
      {"memory_efficiency", false, 1e-3, true, 1.0, 1.0, &hw.memory_efficiency},
      {"attention_efficiency", false, 1e-3, true, 1.0, 1.0, &hw.attention_efficiency},
      {"prefill_attention_efficiency", false, 0, true, 1.0, 1.0, &hw.prefill_attention_efficiency},
      {"prefill_self_attention_efficiency", false, 0, true, 1.0, 1.0, &hw.prefill_self_attention_efficiency},
      {"overhead_us", false, 0, true, 1e6, kMicro, &hw.overhead},
      {"attention_sequence_us", false, 0, true, 1e3, kMicro, &hw.attention_sequence_overhead},
      {"gemm_half_rows", false, 0, true, 1e9, 1.0, &hw.gemm_half_rows},
      {"gemm_tile_rows", false, 0, true, 65536, 1.0, &hw.gemm_tile_rows},
      {"price_per_hour_usd", false, 0, true, 1e6, 1.0, &hw.price_per_hour_usd},
  };
  for (const NumberKey& n : numbers) {
    if (Status s = read_number(f, n.key, n.required, n.min, n.min_inclusive, n.max, n.scale, n.out);
        !s) {
      return s.error();
    }
  }

  // 0 means "as attention_efficiency"; between 0 and the other efficiencies' floor it means nothing.
  if (hw.prefill_attention_efficiency > 0 && hw.prefill_attention_efficiency < 1e-3) {
    return f.expected("prefill_attention_efficiency", "0 (as attention_efficiency) or a number in [0.001, 1]");
  }
  if (hw.prefill_self_attention_efficiency > 0 && hw.prefill_self_attention_efficiency < 1e-3) {
    return f.expected("prefill_self_attention_efficiency",
                      "0 (as prefill_attention_efficiency) or a number in [0.001, 1]");
  }
  if (const toml::node* bf16 = root.get("bf16")) {
    const auto* b = bf16->as_boolean();
    if (b == nullptr) return f.expected("bf16", "true or false");
    hw.bf16 = b->get();
  }
  return hw;
}

}  // namespace servesim
