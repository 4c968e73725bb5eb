// How many KV blocks fit on one replica, derived as vLLM derives it: device memory x
// gpu_memory_utilization, less the weights per GPU (what tp shards, and what every GPU holds
// whole), the peak activations of a forward pass over max_num_batched_tokens tokens, and memory
// outside PyTorch (CUDA context, NCCL, cuBLAS workspaces, CUDA graphs), over the bytes of one block
// id in the KV layout (backends/kv_layout.h; for a dense model 2 x layers x KV heads per GPU x head
// dim x block size x KV element size). vLLM reserves block 0, so one block fewer is usable.
#pragma once

#include <cstdint>
#include <string>

#include "backends/hardware.h"
#include "backends/kv_layout.h"
#include "backends/model.h"
#include "sim/result.h"

namespace servesim {

struct MemoryOptions {
  int32_t tp = 1;
  // Pipeline stages (backends/pipeline.h): each GPU holds its stage's layers (the first also the
  // embedding, the last the LM head) and their KV; the replica's block count is the smallest
  // stage's, as vLLM takes the minimum over its workers.
  int32_t pp = 1;
  int32_t moe_world = 0;            // GPUs a mixture's experts are split over (dp x tp); 0: tp
  DType weights = DType::kBf16;     // the unquantized weights'
  WeightFormat format;              // the quantized layers' (method "": none, all at `weights`)
  // Sliding-window and chunked layers laid out as vLLM's --disable-hybrid-kv-cache-manager lays
  // them out (full attention's KV): what a run with prefix caching schedules, as the block
  // manager does not model the hybrid manager's prefix caching. false: vLLM's default layout.
  bool single_group = false;
  bool prefix_caching = false;      // Mamba state blocks in vLLM's "align" mode
  DType kv = DType::kBf16;
  double gpu_memory_utilization = 0.9;
  int32_t block_size = 16;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
};

// The most KV blocks a replica may have: block ids are 32-bit (sim/kv_cache.h), as --set kv.blocks
// is bounded too. A plan above it is an error, never a clipped count.
inline constexpr int64_t kMaxKvBlocks = INT32_MAX;

// Memory outside PyTorch's allocator: CUDA context, NCCL and cuBLAS workspaces, CUDA graphs. vLLM
// measures it; 1 GiB is typical of a single GPU (an estimate, not a datasheet figure).
inline constexpr double kNonTorchBytes = 1.0 * (1 << 30);

struct MemoryPlan {
  double budget = 0;          // memory x utilization, per GPU (bytes)
  double weights = 0;         // per GPU
  double activations = 0;     // peak of the profiling forward pass, per GPU
  double non_torch = 0;
  double block_bytes = 0;     // one KV block id, per GPU
  KvLayout layout;
  int64_t num_blocks = 0;     // usable KV blocks per replica
  // With pp > 1: the stage that bounds num_blocks (its weights, activations and block_bytes are
  // the fields above), and one block id's bytes over every stage's layers, per tp rank.
  int32_t bounding_stage = 0;
  double pipeline_block_bytes = 0;
  double kv_bytes() const { return static_cast<double>(num_blocks) * block_bytes; }
};

// The plan, or an error saying how much memory is missing and which tp would fit.
Result<MemoryPlan> plan_memory(const HardwareSpec& hw, const ModelSpec& model, const MemoryOptions& o);

}  // namespace servesim
