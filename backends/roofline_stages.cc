// The roofline backend's pipeline stages (backends/pipeline.h): each stage's model prices the
// batch over its own layers, at the tokens the batch's CUDA graph computes; the first stage also
// pays the host's part of the iteration (scheduling, input preparation, sampling's return), and
// every other stage its own launch (its graph, or its layers' kernels); between stages the
// activations move as pipeline_send_seconds prices them.
#include <cassert>

#include "backends/pipeline.h"
#include "backends/roofline_backend.h"

namespace servesim {

std::vector<RooflineModel> pipeline_stage_models(const HardwareSpec& hw, const ModelSpec& model,
                                                 const RooflineOptions& options, int32_t pp) {
  std::vector<RooflineModel> stages;
  if (pp <= 1) return stages;
  const std::vector<int64_t> parts = pp_partition(model.num_layers, pp);
  int64_t first = 0;
  for (size_t s = 0; s < parts.size(); ++s) {
    RooflineOptions o = options;
    o.embeds = s == 0;
    o.samples = s + 1 == parts.size();
    stages.emplace_back(hw, stage_model(model, first, parts[s]), o);
    first += parts[s];
  }
  return stages;
}

void RooflineBackend::run_stages(const Batch& batch, std::span<Time> stage, std::span<Time> send) {
  assert(!stages_.empty() && stage.size() == stages_.size() && send.size() + 1 == stage.size());
  const int64_t seqs = static_cast<int64_t>(batch.items.size()) + batch.group;
  const HardwareSpec& hw = model_.hardware();
  const double hidden = static_cast<double>(model_.model().hidden_size);
  const double ab = dtype_bytes(model_.options().activations);
  const EngineProfile& e = engine_;
  for (size_t s = 0; s < stages_.size(); ++s) {
    const RooflineModel& m = stages_[s];
    const RooflineModel::AttentionPart a = m.price_attention(batch);
    const LaunchShape launch = launch_shape(capture_sizes_, a.tokens, a.tokens == seqs);
    const double kernels = m.price_rest(a.time, static_cast<double>(launch.padded_tokens),
                                        static_cast<double>(a.emitting)).total();
    const int64_t layers = m.model().num_layers;
    const double host = s == 0 ? host_time(e, launch.mode, layers, seqs)
                               : host_time(e, launch.mode, layers, 0) - host_time(e, GraphMode::kPiecewise, 0, 0);
    stage[s] = priced_duration(kernels + host);
    if (s + 1 < stages_.size()) {
      send[s] = priced_duration(pipeline_send_seconds(hw, model_.options().tp, static_cast<int64_t>(s),
                                                      static_cast<double>(a.tokens), hidden, ab));
    }
  }
}

IterationResult RooflineBackend::run_pipeline(const Batch& batch) {
  std::vector<Time> stage(stages_.size()), send(stages_.size() - 1);
  run_stages(batch, stage, send);
  Time total = 0;
  for (const Time t : stage) total = add_time(total, t);
  for (const Time t : send) total = add_time(total, t);
  return {total, total};
}

}  // namespace servesim
