#include "analysis/metrics.h"

namespace servesim {

void add_deployment_metrics(std::vector<Metric>& out, const MetricsOptions& options, double duration,
                            int64_t output_tokens) {
  const bool mixed = !options.groups.empty();
  const std::vector<ReplicaGroupShape> groups =
      mixed ? options.groups
            : std::vector<ReplicaGroupShape>{{options.replicas, options.tp, options.price_per_gpu_hour,
                                              options.kv_blocks, options.kv_bytes_per_token}};
  double gpus = 0, per_hour = 0, kv_total = 0;
  bool priced = true, unlimited = false, same_kv = true;
  for (const ReplicaGroupShape& g : groups) {
    const double n = static_cast<double>(g.count) * g.tp;
    gpus += n;
    priced = priced && g.price_per_gpu_hour > 0;
    per_hour += n * g.price_per_gpu_hour;
    unlimited = unlimited || g.kv_blocks < 0;
    kv_total += static_cast<double>(g.count) * static_cast<double>(g.kv_blocks);
    same_kv = same_kv && g.kv_blocks == groups.front().kv_blocks;
  }
  out.push_back({"gpus", gpus});
  if (mixed) out.push_back({"replica_groups", static_cast<double>(groups.size())});
  if (!unlimited) {
    const double blocks = static_cast<double>(groups.front().kv_blocks);
    if (same_kv) out.push_back({"kv_blocks_per_replica", blocks});
    if (mixed) {
      out.push_back({"kv_blocks_total", kv_total});
    } else {
      out.push_back({"kv_tokens_per_replica", blocks * options.block_size});
      if (options.kv_bytes_per_token > 0) {
        out.push_back({"kv_gib_per_replica", blocks * options.block_size * options.kv_bytes_per_token / (1 << 30)});
      }
    }
  }
  if (priced) {
    out.push_back({"cost_per_hour", per_hour});
    if (duration > 0 && output_tokens > 0) {
      const double tokens_per_hour = static_cast<double>(output_tokens) / duration * 3600;
      out.push_back({"cost_per_million_output_tokens", per_hour / tokens_per_hour * 1e6});
    }
  }
}

}  // namespace servesim
