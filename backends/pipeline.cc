#include "backends/pipeline.h"

#include <algorithm>
#include <string>

#include "backends/collectives.h"

namespace servesim {

std::vector<int64_t> pp_partition(int64_t num_layers, int64_t pp) {
  std::vector<int64_t> parts(static_cast<size_t>(pp), num_layers / pp);
  const int64_t remaining = num_layers % pp;
  for (int64_t i = 2; i < remaining + 2; ++i) parts[static_cast<size_t>(pp - i)] += 1;  // partitions[-i] += 1
  return parts;
}

Status check_pipeline_parallel(const std::string& model_name, int64_t num_layers, int64_t pp) {
  if (pp < 1 || pp > kMaxPipelineStages) {
    return Error{"pp: expected an integer from 1 to " + std::to_string(kMaxPipelineStages) + " (pipeline stages), got " +
                 std::to_string(pp)};
  }
  if (pp > num_layers) {
    return Error{"pp: " + model_name + " has " + std::to_string(num_layers) + " layers, too few for " +
                 std::to_string(pp) + " pipeline stages (each stage needs at least one layer); give pp at most " +
                 std::to_string(num_layers)};
  }
  return Ok{};
}

ModelSpec stage_model(const ModelSpec& model, int64_t first, int64_t count) {
  ModelSpec s = model;
  s.num_layers = count;
  const auto slice = [&](auto& v) {
    const auto n = static_cast<int64_t>(v.size());
    if (n == 0) return;  // a model built by hand: every layer alike
    const int64_t a = std::min(first, n), b = std::min(first + count, n);
    v.assign(v.begin() + a, v.begin() + b);
  };
  slice(s.layer_attention);
  slice(s.layer_moe);
  return s;
}

double pipeline_send_seconds(const HardwareSpec& hw, int64_t tp, int64_t from, double tokens, double hidden,
                             double activation_bytes) {
  const double bytes = 2 * tokens * hidden * activation_bytes;  // hidden states and residual
  const auto gpn = static_cast<int64_t>(hw.gpus_per_node);
  bool crosses = false;
  for (int64_t t = 0; t < tp && gpn > 0; ++t) {
    crosses = crosses || (from * tp + t) / gpn != ((from + 1) * tp + t) / gpn;
  }
  // Each rank sends its 1/tp share point to point (backends/collectives.h: NVLink within a node,
  // the NIC across); the next stage's ranks all-gather the shares.
  double seconds = send_recv_time(hw, bytes / static_cast<double>(tp), crosses);
  if (tp > 1) seconds += collective_time(hw, Collective::kAllGather, bytes, tp);  // the gathered size
  return seconds;
}

}  // namespace servesim
