#include "backends/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "backends/engine_batch.h"
#include "backends/kv_memory.h"
#include "backends/roofline.h"
#include "kernels/cuda/cuda_runner.h"
#include "sim/presets.h"

namespace servesim {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(RooflineModel predictor, const ModelWeights& weights, int32_t num_blocks, int32_t block_size)
      : predictor_(std::move(predictor)),
        runner_(predictor_.model(), weights, num_blocks, block_size),
        batch_(predictor_.model().vocab_size, block_size) {}

  IterationResult run(const Batch& batch) override {
    const Time predicted = std::max<Time>(from_seconds(predictor_.price(batch).total()), 1);
    if (!batch_.build(batch)) return {predicted, predicted};  // only padding rows
    const CudaModelRunner::Output out = runner_.forward(batch_.input(), /*return_logits=*/false);
    batch_.record(out.next_tokens);
    // CUDA events on the runner's stream: the step's upload, layers and download.
    return {std::max<Time>(from_seconds(runner_.last_step_seconds()), 1), predicted};
  }
  int64_t kv_blocks(int32_t /*block_size*/) const override { return runner_.num_blocks(); }
  std::string_view name() const override { return "cuda"; }
  int64_t max_model_len() const override { return predictor_.model().max_position_embeddings; }
  std::string hardware_path() const override { return predictor_.hardware().path; }
  std::string model_path() const override { return predictor_.model().path; }

 private:
  RooflineModel predictor_;
  CudaModelRunner runner_;
  EngineBatch batch_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendSetup& setup) {
  if (!cuda_device_available()) return Error{"--backend cuda: no CUDA device is present"};
  if (setup.tp != 1) return Error{"--tp: the cuda engine runs on one GPU (tp 1)"};
  Result<std::string> hw_path = resolve_preset(setup.hardware.empty() ? "h200" : setup.hardware,
                                               PresetKind::kHardware, "--hardware");
  if (!hw_path.ok()) return hw_path.error();
  Result<HardwareSpec> hw = load_hardware(hw_path.value());
  if (!hw.ok()) return hw.error();
  Result<std::string> model_path = resolve_preset(setup.model.empty() ? "qwen2.5-0.5b" : setup.model,
                                                  PresetKind::kModel, "--model");
  if (!model_path.ok()) return model_path.error();
  Result<ModelSpec> model = load_model(model_path.value());
  if (!model.ok()) return model.error();

  ModelWeights weights;
  if (!setup.weights.empty()) {
    Result<ModelWeights> w = load_safetensors(setup.weights, model.value());
    if (!w.ok()) return w.error();
    weights = std::move(w.value());
  } else {
    weights = random_weights(model.value(), setup.seed);
  }
  // KV blocks from what the device really has free, as vLLM sizes its cache.
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    return Error{"--backend cuda: cannot read the device's memory"};
  }
  HardwareSpec device = hw.value();
  device.memory_bytes = static_cast<double>(free_bytes);
  MemoryOptions mo;
  mo.weights = mo.kv = DType::kBf16;
  mo.gpu_memory_utilization = setup.gpu_memory_utilization;
  mo.block_size = setup.block_size;
  mo.max_num_seqs = setup.max_num_seqs;
  mo.max_num_batched_tokens = setup.max_num_batched_tokens;
  Result<MemoryPlan> memory = plan_memory(device, model.value(), mo);
  if (!memory.ok()) return memory.error();
  int64_t blocks = memory.value().num_blocks;
  if (setup.kv_blocks > 0) blocks = std::min<int64_t>(blocks, setup.kv_blocks);
  RooflineOptions ro;  // bf16 throughout, as the engine computes
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(
      RooflineModel(std::move(hw.value()), std::move(model.value()), ro), weights,
      static_cast<int32_t>(blocks), setup.block_size));
}

}  // namespace servesim
