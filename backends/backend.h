// A backend prices one iteration: given the batch a policy formed, how long does the forward pass
// take? Cost models (unit, roofline) compute it; real engines (cpu, cuda) execute the batch and
// measure it, with a cost model's prediction beside the measurement. A backend never sees the queue.
#pragma once

#include <algorithm>

#include <cstdint>
#include <span>
#include <memory>
#include <string>
#include <string_view>

#include "sim/batch.h"
#include "sim/decode_durations.h"
#include "sim/kv_groups.h"
#include "sim/time.h"

namespace servesim {

// What a backend is built from: the run configuration's hardware, model and memory settings.
struct SpecsCache;

struct BackendSetup {
  std::string hardware;                // a hardware file (resolved); "" = the backend's default
  std::string model;                   // a config.json (resolved); "" = the backend's default
  int32_t tp = 1;                      // tensor-parallel degree
  int32_t pp = 1;                      // pipeline stages, each on tp GPUs (backends/pipeline.h)
  // Data-parallel ranks of the replica this backend prices one of: a mixture's MoE layers span
  // dp x tp GPUs, experts whole among them (all-to-all) when expert_parallel, else split.
  int32_t dp = 1;
  bool expert_parallel = false;
  double gpu_memory_utilization = 0.9;
  std::string dtype;                   // weights and activations; "" = the model's torch_dtype
  std::string kv_dtype;                // KV cache; "" = dtype
  int32_t block_size = 16;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  int64_t kv_blocks = -1;              // the run's kv.blocks, -1 if not given
  bool prefix_caching = false;         // the policy keeps a prefix cache (vLLM's KV layout differs)
  double moe_routing_skew = 0;         // how unevenly a mixture routes (backends/moe_routing.h)
  // The serving engine's host costs and launch (backends/engine_profile.h): a file (resolved), ""
  // = the default preset, "none" = kernels only. Cost models only.
  std::string engine;
  bool enforce_eager = false;          // no CUDA graphs (vLLM's --enforce-eager)
  int32_t async_scheduling = -1;       // 1 / 0: on / off; -1: the engine file's
  std::string weights;                 // engine: a safetensors file; "" = random weights
  uint64_t seed = 0;                   // engine: the seed of random weights
  // The hardware file's calibration sample to price with (its [calibration] table); -1: the file's
  // own values.
  int64_t hardware_sample = -1;
  // Shared by the replicas of one run, so that a thousand replicas read the hardware and model
  // files once (backends/specs.h); null: each backend reads them.
  std::shared_ptr<SpecsCache> specs_cache;
};

struct IterationResult {
  // What advances the simulated clock; > 0. kNever when the iteration would last longer than the
  // simulation horizon (a cost model priced it past 10^9 s): the replica then fails the run.
  Time duration = 0;
  Time predicted = -1;  // a cost model's prediction beside a measured duration, or -1
};

// A cost model's price in seconds as a duration: at least 1 ns; kNever when it is not finite or
// longer than the simulation horizon (sim/time.h), never an overflowed or negative count.
inline Time priced_duration(double seconds) {
  const Time t = seconds_to_time(seconds);
  return t == kNever ? kNever : std::max<Time>(t, 1);
}

class Backend {
 public:
  virtual ~Backend() = default;

  // Prices (or runs) one iteration. REQUIRES: !batch.empty().
  virtual IterationResult run(const Batch& batch) = 0;

  // Whether run() prices a batch's decode group (Batch::group) from its count and context sum.
  // When false (the default), the replicas list every decode as an item.
  virtual bool prices_decode_groups() const { return false; }

  // Runs of decode iterations (the replica's leap over iterations that repeat): the durations of the
  // run that starts at `batch`, in which every item computes one token, each next iteration being
  // the same items one token further; out.at(j) is exactly what run() returns for iteration j (the
  // first: `batch` itself), and a cost model's prediction is its duration. Returns false when this
  // backend cannot give a run's durations without its batches (engines that measure, the unit
  // backend): the replica then runs every iteration itself.
  virtual bool decode_run(const Batch& /*batch*/, DecodeDurations& /*out*/) { return false; }

  // Pipeline parallelism (backends/pipeline.h): the stages one batch passes, in order; 1 = none.
  virtual int32_t pipeline_stages() const { return 1; }
  // Prices a batch's passage through the stages: stage[s] is its time on stage s (the first also
  // pays the host's part of the iteration), send[s] the move of its activations from stage s to
  // s + 1. run() is the passage through an empty pipeline: the stages and sends added up.
  // REQUIRES: !batch.empty(); stage.size() == pipeline_stages(), send.size() == stage.size() - 1.
  virtual void run_stages(const Batch& batch, std::span<Time> stage, std::span<Time> /*send*/) {
    stage[0] = run(batch).duration;
  }

  // What one request of `prompt_tokens` tokens pays outside the engine core (the API server's
  // tokenization and response), added to its first token and completion as its client sees them.
  virtual Time request_overhead(int32_t /*prompt_tokens*/) const { return 0; }

  // Whether this backend prices one data-parallel rank of a mixture of experts whose ranks step
  // together (SimOptions::lockstep): its MoE layers are priced for every rank's tokens.
  virtual bool steps_with_ranks() const { return false; }

  // KV blocks of `block_size` tokens this backend's device holds, or -1 for unlimited.
  virtual int64_t kv_blocks(int32_t block_size) const = 0;

  virtual std::string_view name() const = 0;
  // Simulated time unit for reports: true when one iteration is one unit ("steps"), not seconds.
  virtual bool counts_steps() const { return false; }
  // The model's context length (max_position_embeddings), or 0 when the backend has no model.
  virtual int64_t max_model_len() const { return 0; }
  // The hardware and model files it uses, for the run's record ("" when none).
  virtual std::string hardware_path() const { return ""; }
  virtual std::string model_path() const { return ""; }
  // The KV layout's groups besides the first full-attention one (vLLM's hybrid KV cache manager:
  // sliding-window, chunked, Mamba groups), for the block manager; none for a plain layout.
  virtual KvGroups kv_groups() const { return {}; }
  // Bytes one KV block takes across the replica's GPUs (all tp of them), or 0 when unknown.
  virtual double kv_bytes_per_block() const { return 0; }
  // The hardware file's on-demand price of one GPU per hour (USD), or 0 when unknown.
  virtual double gpu_price_per_hour() const { return 0; }
  // The hardware file's node: its GPUs (0 when unknown) and its price per hour (USD; 0 unknown).
  virtual int32_t gpus_per_node() const { return 0; }
  virtual double node_price_per_hour() const { return 0; }
  // The network between nodes, per GPU (hardware keys network_gbs, network_latency_us): bytes/s,
  // 0 when unknown; seconds, -1 when unknown.
  virtual double network_bandwidth() const { return 0; }
  virtual double network_latency() const { return -1; }
};

}  // namespace servesim
