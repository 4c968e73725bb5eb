// The time of one collective among the GPUs of a parallel group (tensor-parallel all-reduces today;
// all-gather, reduce-scatter, all-to-all and pipeline send/receive for the other parallelisms), as
// vLLM 0.33 and NCCL pay it, from the hardware file's collective keys (data/hardware/README.md):
//
//  - vLLM's custom all-reduce (vllm/distributed/device_communicators/custom_all_reduce.py and
//    csrc/custom_all_reduce.cuh) for messages under 8 MiB within one node, at world sizes 2, 4, 6
//    and 8 (16 is in its _SUPPORTED_WORLD_SIZES, but should_custom_ar() refuses world_size > 8), and
//    above 2 GPUs only when every pair is NVLink-connected (fully_connected; PCIe-only GPUs: 2 at
//    most). One-shot (each rank reads every peer's buffer: latency + (n-1) S / B) when n = 2, or
//    n <= 4 and S < 512 KiB, or n <= 8 and S < 256 KiB; two-shot (reduce-scatter then all-gather
//    through peer memory: 2 latencies + 2 (n-1)/n S / B, at kTwoShotByteCost per byte) otherwise.
//  - NCCL for everything else: latency + f S / busbw(S), where f is the bytes each rank moves per
//    byte of message (ring all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; as
//    nccl-tests' busbw) and busbw(S) rises with the message size up to the file's large-message
//    figure: busbw x min(1, (S / full)^slope).
//  - Across nodes (more ranks than one NVLink domain holds): NCCL's rings leave each node through
//    one NIC per GPU (a DGX's), so the ring's bus bandwidth is the smaller of the in-node curve and
//    the node's NICs together (gpus per node x network_gbs), with the network's latency per ring
//    step between nodes; all-to-all sends each rank's off-node share through its own NIC.
//  - Send/receive between two GPUs (pipeline stages): latency + S / bandwidth over NVLink within a
//    node, over the GPU's NIC across nodes.
//
// A file without the collective keys (written before they existed) is priced as then: a ring
// all-reduce at interconnect_gbs plus interconnect_latency_us at every size, no custom all-reduce.
// Pure functions of the hardware and their arguments.
#pragma once

#include <cstdint>

#include "backends/hardware.h"

namespace servesim {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll };

// What carries an all-reduce (for tests and reports).
enum class AllReduceKernel { kCustomOneShot, kCustomTwoShot, kNccl, kNcclAcrossNodes };

// vLLM's custom all-reduce takes messages strictly below this (CustomAllreduce max_size,
// 8192 * 1024 bytes; should_custom_ar: inp_size < max_size).
inline constexpr double kCustomAllReduceMaxBytes = 8192.0 * 1024;

// Two-shot custom all-reduce costs this many times its remote bytes at the one-shot bandwidth:
// fitted with the latency and bandwidth on vLLM PR #24111's H100 table (see data/hardware/h100-sxm.toml).
inline constexpr double kTwoShotByteCost = 1.5;

// Seconds for one collective of `kind` among `world` ranks (>= 1; 1 costs nothing) with `bytes`
// per rank, nccl-tests' size: all-reduce each rank's buffer, all-gather the gathered output,
// reduce-scatter the input, all-to-all each rank's send buffer. REQUIRES: bytes >= 0.
double collective_time(const HardwareSpec& hw, Collective kind, double bytes, int64_t world);

// The kernel collective_time() prices an all-reduce of `bytes` among `world` ranks with (world >= 2).
AllReduceKernel all_reduce_kernel(const HardwareSpec& hw, double bytes, int64_t world);

// Seconds to send `bytes` from one GPU to another, within a node or across nodes.
double send_recv_time(const HardwareSpec& hw, double bytes, bool across_nodes);

// NCCL's in-node bus bandwidth (bytes/s) at a message of `bytes`.
double nccl_bus_bandwidth(const HardwareSpec& hw, double bytes);

// GPUs one NVLink (or PCIe) domain joins: nvlink_domain_gpus, else gpus_per_node; 0 = unbounded.
int64_t gpus_per_domain(const HardwareSpec& hw);

}  // namespace servesim
