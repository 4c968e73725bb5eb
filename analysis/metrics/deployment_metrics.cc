#include "analysis/metrics/metrics.h"

#include <algorithm>
#include <functional>
#include <map>

namespace servesim {

namespace {

// The fewest nodes of `per_node` GPUs holding replicas of these GPU counts: first fit, largest
// first (exact when the sizes divide each other, as powers of two do); a replica larger than a
// node takes whole nodes of its own.
int64_t pack_nodes(std::vector<int32_t> sizes, int32_t per_node) {
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  int64_t whole = 0;
  std::vector<int32_t> free;  // GPUs left on each shared node
  for (const int32_t s : sizes) {
    if (s >= per_node) {
      whole += (s + per_node - 1) / per_node;
      continue;
    }
    auto fit = std::find_if(free.begin(), free.end(), [&](int32_t f) { return f >= s; });
    if (fit == free.end()) {
      free.push_back(per_node - s);
    } else {
      *fit -= s;
    }
  }
  return whole + static_cast<int64_t>(free.size());
}

}  // namespace

DeploymentCost deployment_cost(std::span<const ReplicaGroupShape> groups, bool price_by_node) {
  DeploymentCost c;
  double gpu_hour = 0, node_hour = 0;
  bool gpu_priced = true, node_priced = true, nodes_known = true;
  std::map<std::string, std::pair<const ReplicaGroupShape*, std::vector<int32_t>>> by_hardware;
  for (const ReplicaGroupShape& g : groups) {
    const double n = static_cast<double>(g.count) * g.tp;
    c.gpus += n;
    gpu_priced = gpu_priced && g.price_per_gpu_hour > 0;
    gpu_hour += n * g.price_per_gpu_hour;
    nodes_known = nodes_known && g.gpus_per_node > 0;
    auto& [shape, sizes] = by_hardware[g.hardware];
    if (shape == nullptr) shape = &g;
    sizes.insert(sizes.end(), static_cast<size_t>(g.count), g.tp);
  }
  if (nodes_known) {
    c.nodes = 0;
    for (const auto& [hardware, packed] : by_hardware) {
      const int64_t nodes = pack_nodes(packed.second, packed.first->gpus_per_node);
      c.nodes += nodes;
      node_priced = node_priced && packed.first->node_price_per_hour > 0;
      node_hour += static_cast<double>(nodes) * packed.first->node_price_per_hour;
    }
  }
  if (price_by_node) {
    if (nodes_known && node_priced) c.per_hour = node_hour;
  } else if (gpu_priced) {
    c.per_hour = gpu_hour;
  }
  return c;
}

void add_deployment_metrics(std::vector<Metric>& out, const MetricsOptions& options, double duration,
                            int64_t output_tokens) {
  const bool mixed = !options.groups.empty();
  const std::vector<ReplicaGroupShape> groups =
      mixed ? options.groups
            : std::vector<ReplicaGroupShape>{{options.replicas, options.tp, options.price_per_gpu_hour,
                                              options.kv_blocks, options.kv_bytes_per_token,
                                              options.gpus_per_node, options.node_price_per_hour, ""}};
  double kv_total = 0;
  bool unlimited = false, same_kv = true;
  for (const ReplicaGroupShape& g : groups) {
    unlimited = unlimited || g.kv_blocks < 0;
    kv_total += static_cast<double>(g.count) * static_cast<double>(g.kv_blocks);
    same_kv = same_kv && g.kv_blocks == groups.front().kv_blocks;
  }
  const DeploymentCost cost = deployment_cost(groups, options.price_by_node);
  out.push_back({"gpus", cost.gpus});
  if (cost.nodes >= 0) out.push_back({"nodes", static_cast<double>(cost.nodes)});
  if (mixed) out.push_back({"replica_groups", static_cast<double>(groups.size())});
  if (!unlimited) {
    const double blocks = static_cast<double>(groups.front().kv_blocks);
    if (same_kv) out.push_back({"kv_blocks_per_replica", blocks});
    if (mixed) {
      out.push_back({"kv_blocks_total", kv_total});
    } else {
      out.push_back({"kv_tokens_per_replica", blocks * options.block_size / options.kv_blocks_per_token_block});
      if (options.kv_bytes_per_token > 0) {
        out.push_back({"kv_gib_per_replica", blocks * options.block_size * options.kv_bytes_per_token / (1 << 30)});
      }
    }
  }
  if (cost.per_hour >= 0) {
    out.push_back({"cost_per_hour", cost.per_hour});
    if (options.price_by_node) out.push_back({"priced_by_node", 1});
    if (duration > 0 && output_tokens > 0) {
      const double tokens_per_hour = static_cast<double>(output_tokens) / duration * 3600;
      out.push_back({"cost_per_million_output_tokens", cost.per_hour / tokens_per_hour * 1e6});
    }
  }
}

}  // namespace servesim
