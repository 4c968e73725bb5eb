#include "backends/collectives.h"

#include <algorithm>
#include <cmath>

namespace servesim {
namespace {

// Used when a file does not say (data/hardware/README.md): the network's latency per ring step
// between nodes, and one 100 Gb/s NIC per GPU.
constexpr double kDefaultNetworkLatency = 10e-6;    // s
constexpr double kDefaultNetworkBandwidth = 12.5e9;  // bytes/s

double nccl_base_latency(const HardwareSpec& hw) {
  return hw.nccl_latency >= 0 ? hw.nccl_latency : hw.interconnect_latency;
}

double nic_latency(const HardwareSpec& hw) {
  return hw.network_latency >= 0 ? hw.network_latency : kDefaultNetworkLatency;
}

double nic_bandwidth(const HardwareSpec& hw) {
  return hw.network_bandwidth > 0 ? hw.network_bandwidth : kDefaultNetworkBandwidth;
}

// Bytes each rank moves per byte of message (nccl-tests' bus bandwidth factors).
double bus_factor(Collective kind, double n) {
  return kind == Collective::kAllReduce ? 2 * (n - 1) / n : (n - 1) / n;
}

bool custom_all_reduce_applies(const HardwareSpec& hw, double bytes, int64_t world) {
  if (hw.custom_all_reduce_bandwidth <= 0) return false;  // not modelled for this GPU
  if (world != 2 && world != 4 && world != 6 && world != 8) return false;
  const int64_t domain = gpus_per_domain(hw);
  if (domain > 0 && world > domain) return false;          // one node only (no MNNVL here)
  if (world > 2 && !hw.nvlink_full_mesh) return false;     // "not supported on more than two PCIe-only GPUs"
  return bytes < kCustomAllReduceMaxBytes;
}

double custom_all_reduce(const HardwareSpec& hw, AllReduceKernel k, double bytes, double n) {
  const double a = hw.custom_all_reduce_latency, b = hw.custom_all_reduce_bandwidth;
  if (k == AllReduceKernel::kCustomOneShot) return a + (n - 1) * bytes / b;
  return 2 * a + kTwoShotByteCost * 2 * (n - 1) / n * bytes / b;
}

// Within one domain: latency + f S / busbw(S).
double nccl_in_node(const HardwareSpec& hw, Collective kind, double bytes, double n) {
  return nccl_base_latency(hw) + bus_factor(kind, n) * bytes / nccl_bus_bandwidth(hw, bytes);
}

// Across `nodes` domains of `per_node` ranks each.
double nccl_across_nodes(const HardwareSpec& hw, Collective kind, double bytes, double n, double per_node,
                         double nodes) {
  const double net = nic_bandwidth(hw);
  const double in_node = nccl_bus_bandwidth(hw, bytes);
  if (kind == Collective::kAllToAll) {
    // Each rank's share for its own node over NVLink, the rest through its NIC, at once.
    const double local = (per_node - 1) / n * bytes / in_node;
    const double remote = (n - per_node) / n * bytes / net;
    return nccl_base_latency(hw) + nic_latency(hw) + std::max(local, remote);
  }
  // Rings: per_node channels, each through its own NIC; 2(nodes - 1) steps between nodes for an
  // all-reduce (reduce-scatter, then all-gather), nodes - 1 for the others.
  const double steps = (kind == Collective::kAllReduce ? 2 : 1) * (nodes - 1);
  const double busbw = std::min(in_node, per_node * net);
  return nccl_base_latency(hw) + steps * nic_latency(hw) + bus_factor(kind, n) * bytes / busbw;
}

}  // namespace

int64_t gpus_per_domain(const HardwareSpec& hw) {
  const double d = hw.nvlink_domain_gpus > 0 ? hw.nvlink_domain_gpus : hw.gpus_per_node;
  return static_cast<int64_t>(d);
}

double nccl_bus_bandwidth(const HardwareSpec& hw, double bytes) {
  if (hw.nccl_busbw <= 0) return hw.interconnect_bandwidth;  // a file without the keys: flat
  if (hw.nccl_busbw_full_bytes <= 0 || hw.nccl_busbw_slope <= 0 || bytes >= hw.nccl_busbw_full_bytes) {
    return hw.nccl_busbw;
  }
  // Below `full` the bandwidth falls as a power of the size; S / busbw(S) still grows with S
  // (slope <= 1), so a larger message never takes less time.
  return hw.nccl_busbw * std::pow(std::max(bytes, 1.0) / hw.nccl_busbw_full_bytes, hw.nccl_busbw_slope);
}

AllReduceKernel all_reduce_kernel(const HardwareSpec& hw, double bytes, int64_t world) {
  if (custom_all_reduce_applies(hw, bytes, world)) {
    // csrc/custom_all_reduce.cuh, REDUCE_CASE.
    const bool one_shot = world == 2 || (world <= 4 && bytes < 512 * 1024) || (world <= 8 && bytes < 256 * 1024);
    return one_shot ? AllReduceKernel::kCustomOneShot : AllReduceKernel::kCustomTwoShot;
  }
  const int64_t domain = gpus_per_domain(hw);
  return domain > 0 && world > domain ? AllReduceKernel::kNcclAcrossNodes : AllReduceKernel::kNccl;
}

double collective_time(const HardwareSpec& hw, Collective kind, double bytes, int64_t world) {
  if (world <= 1) return 0;
  const auto n = static_cast<double>(world);
  const int64_t domain = gpus_per_domain(hw);
  if (kind == Collective::kAllReduce) {
    const AllReduceKernel k = all_reduce_kernel(hw, bytes, world);
    if (k == AllReduceKernel::kCustomOneShot || k == AllReduceKernel::kCustomTwoShot) {
      return custom_all_reduce(hw, k, bytes, n);
    }
  }
  if (domain <= 0 || world <= domain) return nccl_in_node(hw, kind, bytes, n);
  const auto per_node = static_cast<double>(domain);
  return nccl_across_nodes(hw, kind, bytes, n, per_node, std::ceil(n / per_node));
}

double send_recv_time(const HardwareSpec& hw, double bytes, bool across_nodes) {
  if (across_nodes) return nic_latency(hw) + bytes / nic_bandwidth(hw);
  const double latency = hw.p2p_latency >= 0 ? hw.p2p_latency : nccl_base_latency(hw);
  const double bandwidth = hw.p2p_bandwidth > 0 ? hw.p2p_bandwidth : nccl_bus_bandwidth(hw, bytes);
  return latency + bytes / bandwidth;
}

}  // namespace servesim
