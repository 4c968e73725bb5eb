// The `roofline` backend: prices every iteration with RooflineModel on a hardware file and a model
// config (by default an A100-80GB and Llama-3-8B), adds the serving engine's host and launch costs
// (engine_profile.h: an iteration's GEMMs compute its CUDA graph's padded tokens), and sizes the KV
// cache as vLLM would (kv_memory.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/engine_profile.h"
#include "backends/kv_memory.h"
#include "backends/roofline.h"
#include "sim/result.h"

namespace servesim {

inline constexpr const char* kDefaultHardware = "a100-80gb";
inline constexpr const char* kDefaultModel = "llama-3-8b";

class RooflineBackend final : public Backend {
 public:
  // `capture_sizes`: the CUDA graphs' (cudagraph_capture_sizes), empty when eager.
  RooflineBackend(RooflineModel model, MemoryPlan memory, EngineProfile engine = EngineProfile::none(),
                  std::vector<int32_t> capture_sizes = {});

  IterationResult run(const Batch& batch) override;
  bool prices_decode_groups() const override { return stages_.empty() && model_.prices_decode_groups(); }
  bool decode_run(const Batch& batch, DecodeDurations& out) override;
  int64_t kv_blocks(int32_t block_size) const override;
  Time request_overhead(int32_t prompt_tokens) const override;
  bool steps_with_ranks() const override { return model_.options().dp > 1; }
  KvGroups kv_groups() const override;
  // A policy with a prefix cache: Mamba groups are not held by the block manager (see kv_layout.h).
  void set_prefix_caching(bool on) { prefix_caching_ = on; }
  std::string_view name() const override { return "roofline"; }
  int64_t max_model_len() const override { return model_.model().max_position_embeddings; }
  std::string hardware_path() const override { return model_.hardware().path; }
  std::string model_path() const override { return model_.model().path; }
  double kv_bytes_per_block() const override {
    return (stages_.empty() ? memory_.block_bytes : memory_.pipeline_block_bytes) * model_.options().tp;
  }
  // Pipeline parallelism (roofline_stages.cc): the stages' models, each over its layers (empty: none).
  void set_pipeline(std::vector<RooflineModel> stages) { stages_ = std::move(stages); }
  int32_t pipeline_stages() const override { return stages_.empty() ? 1 : static_cast<int32_t>(stages_.size()); }
  void run_stages(const Batch& batch, std::span<Time> stage, std::span<Time> send) override;
  double gpu_price_per_hour() const override { return model_.hardware().price_per_hour_usd; }
  int32_t gpus_per_node() const override { return static_cast<int32_t>(model_.hardware().gpus_per_node); }
  double node_price_per_hour() const override { return model_.hardware().node_price(); }
  double network_bandwidth() const override { return model_.hardware().network_bandwidth; }
  double network_latency() const override { return model_.hardware().network_latency; }

  const RooflineModel& roofline() const { return model_; }
  const MemoryPlan& memory() const { return memory_; }
  const EngineProfile& engine() const { return engine_; }

 private:
  // pp > 1: run() as the stages and sends added up.
  IterationResult run_pipeline(const Batch& batch);
  // Everything but the attention, for `tokens` tokens of `seqs` sequences of which `emitting` sample
  // one (all one-token decodes when `uniform_decode`): the kernels at the tokens the batch's graph
  // computes, and the engine's host time (s).
  double rest_seconds(int64_t tokens, int64_t seqs, int64_t emitting, bool uniform_decode);

  RooflineModel model_;
  std::vector<RooflineModel> stages_;  // pp > 1: one per pipeline stage
  MemoryPlan memory_;
  EngineProfile engine_;
  std::vector<int32_t> capture_sizes_;
  bool prefix_caching_ = false;
  // decode_run's rest prices of batches whose decodes all emit, by their count (0: not yet priced).
  std::vector<Time> decode_rest_;
  // run()'s prices of everything but the attention (RooflineModel::price_rest) of the (tokens,
  // emitting) last seen at each slot: a chunked prefill's iterations mostly fill the same budget.
  struct Rest {
    int64_t tokens = -1, emitting = -1;
    RooflineBreakdown time;
  };
  static constexpr size_t kRests = 256;
  std::vector<Rest> rests_;
};

// The models of pp pipeline stages (backends/pipeline.h): each over its layers, the first reading
// the embedding, the last running the LM head; none when pp is 1.
std::vector<RooflineModel> pipeline_stage_models(const HardwareSpec& hw, const ModelSpec& model,
                                                 const RooflineOptions& options, int32_t pp);

// Loads the hardware and model the setup names (presets by name, or files), resolves the data
// types (a GPU without BF16 runs FP16, as vLLM advises), and plans memory. Errors: a missing or bad
// file, an unknown data type, a model that does not fit (with the tp that would).
Result<std::unique_ptr<Backend>> make_roofline_backend(const BackendSetup& setup);

}  // namespace servesim
