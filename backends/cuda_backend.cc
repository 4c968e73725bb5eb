#include "backends/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "backends/cuda_plugin.h"
#include "backends/engine_batch.h"
#include "backends/kv_memory.h"
#include "backends/roofline.h"
#include "kernels/cuda/cuda_runner.h"
#include "backends/specs.h"

namespace servesim {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(RooflineModel predictor, const ModelWeights& weights, int32_t num_blocks, int32_t block_size)
      : predictor_(std::move(predictor)),
        runner_(predictor_.model(), weights, num_blocks, block_size),
        batch_(predictor_.model().vocab_size, block_size) {}

  IterationResult run(const Batch& batch) override {
    const Time predicted = priced_duration(predictor_.price(batch).total());
    if (!batch_.build(batch)) return {predicted, predicted};  // only padding rows
    const CudaModelRunner::Output out = runner_.forward(batch_.input(), /*return_logits=*/false);
    batch_.record(out.next_tokens);
    // CUDA events on the runner's stream: the step's upload, layers and download.
    return {priced_duration(runner_.last_step_seconds()), predicted};
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
  Result<Specs> specs = load_specs(setup, "h200", "qwen2.5-0.5b");
  if (!specs.ok()) return specs.error();
  if (Status s = check_engine_model(specs.value().model, "cuda"); !s.ok()) return s.error();
  Result<ModelWeights> weights = load_weights(setup, specs.value().model);
  if (!weights.ok()) return weights.error();
  // KV blocks from what the device really has free, as vLLM sizes its cache.
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    return Error{"--backend cuda: cannot read the device's memory"};
  }
  HardwareSpec device = specs.value().hardware;
  device.memory_bytes = static_cast<double>(free_bytes);
  Result<MemoryPlan> memory = plan_memory(device, specs.value().model,
                                          memory_options(setup, DType::kBf16, DType::kBf16));
  if (!memory.ok()) return memory.error();
  int64_t blocks = memory.value().num_blocks;
  if (setup.kv_blocks > 0) blocks = std::min<int64_t>(blocks, setup.kv_blocks);
  RooflineOptions ro;  // bf16 throughout, as the engine computes
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(
      RooflineModel(std::move(specs.value().hardware), std::move(specs.value().model), ro),
      weights.value(), static_cast<int32_t>(blocks), setup.block_size));
}

}  // namespace servesim

bool servesim_cuda_make_backend(const servesim::BackendSetup* setup,
                                std::unique_ptr<servesim::Backend>* out, std::string* error) {
  servesim::Result<std::unique_ptr<servesim::Backend>> b = servesim::make_cuda_backend(*setup);
  if (!b.ok()) {
    *error = b.error().message;
    return false;
  }
  *out = std::move(b.value());
  return true;
}
