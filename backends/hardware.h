// A GPU as the roofline cost model sees it: peak throughputs, memory, interconnect, and the
// fractions of peak that real kernels achieve. Read from data/hardware/*.toml, where every value
// carries its unit in its key and the document it came from in a comment. Immutable once loaded.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/result.h"

namespace servesim {

struct HardwareSpec {
  std::string name;                    // e.g. "NVIDIA A100-SXM4-80GB"
  std::string path;                    // the file it came from
  double memory_bytes = 0;             // device memory (bytes)
  double memory_bandwidth = 0;         // peak device memory bandwidth (bytes/s)
  double fp16_flops = 0;               // dense FP16/BF16 tensor-core peak (FLOP/s)
  double fp8_flops = 0;                // dense FP8 tensor-core peak (FLOP/s); 0 = none
  double fp4_flops = 0;                // dense FP4 tensor-core peak (NVFP4/MXFP4, FLOP/s); 0 = none
  double int8_ops = 0;                 // dense INT8 tensor-core peak (OP/s); 0 = none
  double fp32_flops = 0;               // FP32 peak without tensor cores (FLOP/s)
  bool bf16 = true;                    // BF16 supported (T4: no)
  double interconnect_bandwidth = 0;   // per-GPU bandwidth for tensor-parallel all-reduce (bytes/s)
  double interconnect_latency = 0;     // latency of one all-reduce (s)
  // The network between nodes, per GPU (one NIC each, as a DGX): what a KV transfer from a prefill
  // to a decode replica moves over (disaggregated serving). 0 and -1: not given.
  double network_bandwidth = 0;        // bytes/s
  double network_latency = -1;         // s, a transfer's fixed cost
  // Collectives (backends/collectives.h; keys in data/hardware/README.md). Not given (0, or -1 for
  // latencies): a file priced as before they existed, all-reduce at interconnect_bandwidth.
  double nccl_latency = -1;                 // s, NCCL's in-node latency (nccl_latency_us)
  double nccl_busbw = 0;                    // bytes/s, NCCL's in-node bus bandwidth, large messages
  double nccl_busbw_full_bytes = 0;         // message size from which nccl_busbw holds; 0 = all
  double nccl_busbw_slope = 0;              // below it, busbw ~ size^slope (0..1)
  double custom_all_reduce_latency = 0;     // s, vLLM's custom all-reduce, per shot
  double custom_all_reduce_bandwidth = 0;   // bytes/s a GPU reads its peers at; 0 = not modelled
  bool nvlink_full_mesh = false;            // every pair of a node's GPUs on NVLink (NVSwitch)
  double nvlink_domain_gpus = 0;            // GPUs one NVLink fabric joins; 0 = gpus_per_node
  double p2p_latency = -1;                  // s, send/recv within a node; -1 = nccl_latency
  double p2p_bandwidth = 0;                 // bytes/s, send/recv within a node; 0 = NCCL's busbw
  double gemm_efficiency = 0.7;        // fraction of tensor peak a large GEMM achieves
  // The same for GEMMs at FP8, FP4 and INT8: the fraction of that type's peak (fp8_flops,
  // fp4_flops, int8_ops) a large GEMM achieves, which differs from the BF16 fraction (more bytes
  // per FLOP to feed, scaling factors to apply). 0 = gemm_efficiency.
  double fp8_gemm_efficiency = 0;
  double fp4_gemm_efficiency = 0;
  double int8_gemm_efficiency = 0;
  double memory_efficiency = 0.75;     // fraction of peak bandwidth streaming achieves
  double attention_efficiency = 0.6;   // fraction of peak (compute or bandwidth) attention achieves
  // The same for the attention of prompt chunks (items of more than one new token), which is
  // compute-bound where decode attention is memory-bound, and reaches a different fraction of its
  // peak (FlashAttention-style kernels against paged decode kernels; scalar loops on a CPU, where
  // the cache holds the KV). 0 = attention_efficiency.
  double prefill_attention_efficiency = 0;
  // The same for the pairs of a prompt chunk's tokens with each other (the causal triangle), where
  // FlashAttention-style kernels mask half of each diagonal tile and keep fewer tiles busy: on an
  // A100 (Vidur's Llama-2-7B timings) they run at about 40 % of the rate of the pairs over the cache.
  // 0 = prefill_attention_efficiency for every pair.
  double prefill_self_attention_efficiency = 0;
  // Multi-head latent attention's decode (FlashMLA) is compute-bound with many heads per GPU; the
  // fraction of the FP16 peak it reaches there. 0 = attention_efficiency.
  double mla_decode_compute_efficiency = 0;
  double overhead = 0;                 // fixed cost of one iteration: launches, CPU (s)
  // Fixed cost of one sequence's attention in one layer (s), beside its bytes and FLOPs: paged
  // attention kernels spend a few microseconds per sequence on block tables, partial blocks and
  // their reduction whatever the context (Vidur's A100 decode timings: about 1.2 us per sequence
  // per layer over 32 cached tokens). 0 = none.
  double attention_sequence_overhead = 0;
  // GEMM efficiency grows with the rows (tokens) of the product, as tiles fill:
  // gemm_efficiency x M / (M + gemm_half_rows). 0 = flat.
  double gemm_half_rows = 128;
  // GEMM kernels compute whole tiles of rows: a product of M rows costs the FLOPs of M rounded up
  // to a multiple of gemm_tile_rows (tile quantization: NVIDIA's "Matrix Multiplication Background
  // User's Guide"; cuBLAS on an A100 steps every 128 rows). 0 = no rounding.
  double gemm_tile_rows = 0;
  double price_per_hour_usd = 0;  // on-demand price of one GPU per hour (USD); 0 = unknown
  // A node of this GPU (the cloud instance or server the price comes from): how many GPUs it
  // holds, and its price per hour (USD); 0 = unknown (the node's price: gpus_per_node x the GPU's).
  double gpus_per_node = 0;
  double node_price_per_hour_usd = 0;

  // The uncertainty of a calibrated file's fitted keys (its [calibration] table, written by `sim
  // calibrate`): the keys (file names, e.g. "gemm_efficiency", "attention_sequence_us") and one row
  // of their values (file units) per bootstrap resample of the measurements. Empty otherwise.
  std::vector<std::string> calibration_keys;
  std::vector<std::vector<double>> calibration_samples;

  // The price of one node per hour (USD): node_price_per_hour_usd, else gpus_per_node x the GPU's.
  double node_price() const {
    return node_price_per_hour_usd > 0 ? node_price_per_hour_usd : gpus_per_node * price_per_hour_usd;
  }

  // FLOP per byte where compute time and memory time meet (dense FP16 over bandwidth).
  double ridge_point() const { return memory_bandwidth > 0 ? fp16_flops / memory_bandwidth : 0; }
};

// Reads a hardware TOML file. Errors name the file, line and key.
Result<HardwareSpec> load_hardware(const std::string& path);

// hw with its calibration keys at the values of resample `sample` (< calibration_samples.size()),
// as if the file said so; its calibration table kept. Errors: no such sample.
Result<HardwareSpec> with_calibration_sample(const HardwareSpec& hw, int64_t sample);

// The values load_hardware accepts for a number key of the file ("gemm_efficiency", "overhead_us"),
// in HardwareSpec's unit (overhead_us: seconds): [min, max], or (min, max] when !min_inclusive.
// What anything that writes a hardware file (sim calibrate) must stay within.
struct HardwareKeyBounds {
  double min = 0;
  bool min_inclusive = true;
  double max = 0;
};
// Errors: not a number key of the file.
Result<HardwareKeyBounds> hardware_key_bounds(std::string_view key);

// Every number key of the file that `hw` sets away from the reader's default, in the file's order
// and units (overhead_us in microseconds), and the boolean keys: what a program that writes a
// hardware file (sim calibrate) copies, so that no key it does not fit is lost.
std::vector<std::pair<std::string, double>> hardware_numbers(const HardwareSpec& hw);
std::vector<std::pair<std::string, bool>> hardware_booleans(const HardwareSpec& hw);

// Sets the hardware file key `key` (a number key, in the file's unit, as load_hardware reads it) in hw.
// Errors: an unknown key, or a value outside the key's bounds.
Status set_hardware_number(HardwareSpec& hw, std::string_view key, double value);

}  // namespace servesim
