// The `cpu` backend: the real engine on the host. Every batch the policy forms is executed by the
// float32 reference model runner (kernels/model_runner.h) over a paged KV cache laid out exactly as
// the simulator's block manager allocates it; the wall-clock time of the forward pass advances the
// simulated clock, and the roofline's prediction for the same batch (on the host's hardware file)
// is logged beside it. Meant for tiny models (data/models/tiny.json): it is the reference that
// validates cost models and the CUDA engine, not a fast engine.
// Token ids come from the prompt's content (engine_batch.h).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/engine_batch.h"
#include "backends/roofline.h"
#include "kernels/model_runner.h"
#include "kernels/weights.h"
#include "sim/result.h"

namespace servesim {

inline constexpr const char* kDefaultCpuModel = "tiny";
inline constexpr const char* kDefaultCpuHardware = "cpu-host";

class CpuBackend final : public Backend {
 public:
  CpuBackend(RooflineModel predictor, std::unique_ptr<ModelWeights> weights, int32_t num_blocks,
             int32_t block_size);

  IterationResult run(const Batch& batch) override;
  int64_t kv_blocks(int32_t block_size) const override;
  std::string_view name() const override { return "cpu"; }
  int64_t max_model_len() const override { return predictor_.model().max_position_embeddings; }
  std::string hardware_path() const override { return predictor_.hardware().path; }
  std::string model_path() const override { return predictor_.model().path; }

 private:
  RooflineModel predictor_;
  std::unique_ptr<ModelWeights> weights_;  // the runner keeps a reference
  CpuModelRunner runner_;
  EngineBatch batch_;
};

// Loads the model (default tiny) and hardware (default cpu-host), random weights from the run's
// seed or a safetensors file (setup.weights), and sizes the KV cache from the hardware's memory as
// the roofline backend does.
Result<std::unique_ptr<Backend>> make_cpu_backend(const BackendSetup& setup);

}  // namespace servesim
