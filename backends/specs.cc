#include "backends/specs.h"

#include <string>
#include <utility>

#include "sim/config/presets.h"

namespace servesim {

static Result<Specs> load_specs_uncached(const BackendSetup& setup, const char* default_hardware,
                                  const char* default_model);

Result<Specs> load_specs(const BackendSetup& setup, const char* default_hardware,
                         const char* default_model) {
  std::string key;
  if (setup.specs_cache) {
    key = (setup.hardware.empty() ? default_hardware : setup.hardware) + std::string(1, '\0') +
          (setup.model.empty() ? default_model : setup.model) + std::string(1, '\0') + std::to_string(setup.tp) +
          "/" + std::to_string(setup.hardware_sample);
    const std::lock_guard<std::mutex> lock(setup.specs_cache->mutex);
    const auto found = setup.specs_cache->loaded.find(key);
    if (found != setup.specs_cache->loaded.end()) return found->second;
  }
  Result<Specs> specs = load_specs_uncached(setup, default_hardware, default_model);
  if (specs.ok() && setup.specs_cache) {
    const std::lock_guard<std::mutex> lock(setup.specs_cache->mutex);
    setup.specs_cache->loaded.emplace(key, specs.value());
  }
  return specs;
}

static Result<Specs> load_specs_uncached(const BackendSetup& setup, const char* default_hardware,
                                  const char* default_model) {
  Result<std::string> hw_path = resolve_preset(
      setup.hardware.empty() ? default_hardware : setup.hardware, PresetKind::kHardware, "--hardware");
  if (!hw_path.ok()) return hw_path.error();
  Result<HardwareSpec> hw = load_hardware(hw_path.value());
  if (!hw.ok()) return hw.error();
  if (setup.hardware_sample >= 0) {
    hw = with_calibration_sample(hw.value(), setup.hardware_sample);
    if (!hw.ok()) return Error{"hardware_sample: " + hw.error().message};
  }
  Result<std::string> model_path = resolve_preset(
      setup.model.empty() ? default_model : setup.model, PresetKind::kModel, "--model");
  if (!model_path.ok()) return model_path.error();
  Result<ModelSpec> model = load_model(model_path.value());
  if (!model.ok()) return model.error();
  if (Status s = check_tensor_parallel(model.value(), setup.tp); !s.ok()) return s.error();
  return Specs{std::move(hw.value()), std::move(model.value())};
}

Status check_engine_model(const ModelSpec& m, const char* engine) {
  std::string lacks;
  if (m.num_layers_of(AttentionKind::kFull) != m.num_layers) lacks = attention_summary(m) + " layers";
  else if (m.is_moe()) lacks = "a mixture of experts";
  else if (!m.quantization.method.empty()) lacks = m.quantization.method + " weights";
  else if (m.attention_sinks || m.attention_output_gate || m.o_bias) lacks = "its attention's extras";
  if (lacks.empty()) return Ok{};
  return Error{std::string("the ") + engine + " engine executes dense Llama / Qwen2-family decoders with full "
               "attention; " + m.name + " has " + lacks + ": price it with --backend roofline"};
}

MemoryOptions memory_options(const BackendSetup& setup, DType weights, DType kv) {
  MemoryOptions mo;
  mo.tp = setup.tp;
  mo.weights = weights;
  mo.kv = kv;
  mo.gpu_memory_utilization = setup.gpu_memory_utilization;
  mo.block_size = setup.block_size;
  mo.max_num_seqs = setup.max_num_seqs;
  mo.max_num_batched_tokens = setup.max_num_batched_tokens;
  return mo;
}

Result<ModelWeights> load_weights(const BackendSetup& setup, const ModelSpec& model) {
  if (!setup.weights.empty()) return load_safetensors(setup.weights, model);
  return random_weights(model, setup.seed);
}

}  // namespace servesim
