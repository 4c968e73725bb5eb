#include "backends/roofline_backend.h"

#include <cassert>
#include <utility>

#include "sim/presets.h"

namespace servesim {

RooflineBackend::RooflineBackend(RooflineModel model, MemoryPlan memory)
    : model_(std::move(model)), memory_(memory) {}

IterationResult RooflineBackend::run(const Batch& batch) {
  const Time t = std::max<Time>(from_seconds(model_.price(batch).total()), 1);
  return {t, t};  // the prediction is the duration (iterations.predicted = duration)
}

int64_t RooflineBackend::kv_blocks(int32_t /*block_size*/) const { return memory_.num_blocks; }

Result<std::unique_ptr<Backend>> make_roofline_backend(const BackendSetup& setup) {
  Result<std::string> hw_path = resolve_preset(setup.hardware.empty() ? kDefaultHardware : setup.hardware,
                                               PresetKind::kHardware, "--hardware");
  if (!hw_path.ok()) return hw_path.error();
  Result<HardwareSpec> hw = load_hardware(hw_path.value());
  if (!hw.ok()) return hw.error();
  Result<std::string> model_path = resolve_preset(setup.model.empty() ? kDefaultModel : setup.model,
                                                  PresetKind::kModel, "--model");
  if (!model_path.ok()) return model_path.error();
  Result<ModelSpec> model = load_model(model_path.value());
  if (!model.ok()) return model.error();

  RooflineOptions ro;
  ro.tp = setup.tp;
  ro.weights = model.value().dtype;
  if (!setup.dtype.empty()) {
    Result<DType> d = parse_dtype(setup.dtype);
    if (!d.ok()) return Error{"dtype: " + d.error().message};
    ro.weights = d.value();
  }
  if (ro.weights == DType::kBf16 && !hw.value().bf16) ro.weights = DType::kFp16;  // T4: no BF16
  ro.activations = ro.weights == DType::kFp32 ? DType::kFp32
                   : ro.weights == DType::kBf16 ? DType::kBf16 : DType::kFp16;
  ro.kv = ro.activations;
  if (!setup.kv_dtype.empty()) {
    Result<DType> d = parse_dtype(setup.kv_dtype);
    if (!d.ok()) return Error{"kv.dtype: " + d.error().message};
    ro.kv = d.value();
  }
  MemoryOptions mo;
  mo.tp = setup.tp;
  mo.weights = ro.weights;
  mo.kv = ro.kv;
  mo.gpu_memory_utilization = setup.gpu_memory_utilization;
  mo.block_size = setup.block_size;
  mo.max_num_seqs = setup.max_num_seqs;
  mo.max_num_batched_tokens = setup.max_num_batched_tokens;
  Result<MemoryPlan> memory = plan_memory(hw.value(), model.value(), mo);
  if (!memory.ok()) return memory.error();
  return std::unique_ptr<Backend>(std::make_unique<RooflineBackend>(
      RooflineModel(std::move(hw.value()), std::move(model.value()), ro), memory.value()));
}

}  // namespace servesim
