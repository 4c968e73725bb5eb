// Pipeline parallelism as vLLM lays it out (--pipeline-parallel-size): the model's decoder layers
// split into pp stages of consecutive layers, each stage on its own tp GPUs (global rank =
// stage x tp + tp rank, packed onto nodes in rank order); the first stage holds the embedding, the
// last the final norm and the LM head. Between stages each tp rank sends its 1/tp share of the
// intermediate tensors (hidden states and residual) to the same tp rank of the next stage, which
// all-gathers them over its own interconnect (vLLM's send_tensor_dict with all_gather_group).
// These are the layout's pure functions; the replica runs the stages (sim/replica.h) and the
// roofline prices each (backends/roofline_backend.h).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/hardware.h"
#include "backends/model.h"
#include "sim/result.h"

namespace servesim {

// The most pipeline stages a run may ask for (vLLM has no bound; a model has at most
// kMaxModelLayers layers, and every stage needs one).
inline constexpr int64_t kMaxPipelineStages = 1024;

// Layers per stage, as vLLM's get_pp_indices (vllm/distributed/utils.py) without
// VLLM_PP_LAYER_PARTITION: num_layers / pp each, the remainder one more each to the stages before
// the last, from the second-to-last backwards (80 layers over 3: 27, 27, 26; 61 over 2: 31, 30).
// REQUIRES: 1 <= pp <= num_layers.
std::vector<int64_t> pp_partition(int64_t num_layers, int64_t pp);

// Ok when a model of `num_layers` layers can be split into pp stages; else an error naming the key
// `pp` and what would work.
Status check_pipeline_parallel(const std::string& model_name, int64_t num_layers, int64_t pp);

// The model's layers [first, first + count) as a model of their own (the per-layer attention kinds
// and mixtures carried over), for pricing and sizing one stage.
ModelSpec stage_model(const ModelSpec& model, int64_t first, int64_t count);

// Seconds to move one batch's intermediate tensors (2 x tokens x hidden x activation bytes: hidden
// states and residual) from stage `from` to stage from + 1: each of the tp ranks sends its 1/tp share
// point to point, over the network when the two ranks sit on different nodes (gpus_per_node;
// unknown: one node), else over the GPU interconnect, then the receiving stage all-gathers the
// shares (ring: (tp - 1) / tp of the bytes) over its interconnect. A local, simple model of NCCL
// send/recv and all-gather (latency + bytes / bandwidth), until the collectives' own model prices
// them.
double pipeline_send_seconds(const HardwareSpec& hw, int64_t tp, int64_t from, double tokens, double hidden,
                             double activation_bytes);

}  // namespace servesim
