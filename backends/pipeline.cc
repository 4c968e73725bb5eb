#include "backends/pipeline.h"

#include <algorithm>
#include <string>

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
  const bool network = crosses && hw.network_bandwidth > 0;
  const double bandwidth = network ? hw.network_bandwidth : hw.interconnect_bandwidth;
  const double latency = network ? std::max(hw.network_latency, 0.0) : hw.interconnect_latency;
  const double share = bytes / static_cast<double>(tp);
  double seconds = latency + (bandwidth > 0 ? share / bandwidth : 0);
  if (tp > 1 && hw.interconnect_bandwidth > 0) {
    const double t = static_cast<double>(tp);
    seconds += hw.interconnect_latency + (t - 1) / t * bytes / hw.interconnect_bandwidth;
  }
  return seconds;
}

}  // namespace servesim
