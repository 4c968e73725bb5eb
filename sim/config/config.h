// The run configuration: every setting of one run, from defaults, a --config TOML file, the command
// line's named options and --set key=value overrides, in that order of precedence (later wins).
//
// Keys (TOML / --set):           command line             default
//   trace                        --trace FILE             (required)
//   policy.name                  --policy NAME            "continuous"
//   policy.<option>              --set policy.X=V         the policy's own defaults
//   backend                      --backend NAME           "roofline"
//   hardware, model              --hardware, --model      the backend's (roofline: a100-80gb,
//                                                         llama-3-8b)
//   db                           --db FILE                "sim.db"
//   db_sync                      --db-sync MODE           "off": the run's rows are handed to the
//                                                         operating system and not waited for on
//                                                         the disk (SQLite's synchronous=OFF);
//                                                         "normal" or "full": SQLite's own, which
//                                                         wait at the checkpoints (full: at every
//                                                         commit too)
//   seed                         --seed N                 the workload's own seed
//   name                         --name TEXT              "" (the run's label)
//   max_num_seqs                 --max-num-seqs N         256   (vLLM's offline default)
//   max_num_batched_tokens       --max-num-batched-tokens 8192  (vLLM's offline default)
//   max_tokens                   --set max_tokens=N       the model's context - prompt, else 2048
//   max_model_len                --max-model-len N        the model's max_position_embeddings
//   dtype                        --dtype T                the model's weights (fp16|bf16|fp32|fp8|int8|int4|fp4)
//   kv.dtype                     --kv-cache-dtype T       dtype (fp16|bf16|fp8|int4)
//   engine.weights               --set engine.weights=F   random weights of the run's seed
//   engine.profile               --engine NAME|FILE       vllm-0.33: the serving engine's host and
//                                                         launch costs (data/engines; "none": the
//                                                         kernels alone)
//   enforce_eager                --enforce-eager          false: CUDA graphs at vLLM's capture sizes
//   async_scheduling             --set async_scheduling=B the engine file's (vLLM 0.33: true)
//   kv.block_size                --block-size N           16
//   kv.blocks                    --set kv.blocks=N        from the backend (unit: unlimited)
//   moe.routing_skew             --set moe.routing_skew=S 0: experts picked uniformly; S > 0: expert i's
//                                                         popularity ~ (i + 1)^-S (backends/moe_routing.h)
//   kv.full_groups, kv.windowed_groups, kv.window, kv.window_kind ("sliding" | "chunked"),
//   kv.state_groups              --set kv.KEY=V           a hybrid layout's groups (sim/kv_groups.h)
//                                                         instead of the model's: 1, 0, -, sliding, 0
//   gpu_memory_utilization       --gpu-memory-utilization 0.9
//   tp                           --tp N                   1
//   dp, enable_expert_parallel   --data-parallel-size N, --enable-expert-parallel   1, false
//   pp                           --pipeline-parallel-size N  1: pipeline stages per replica, each on
//                                                         tp GPUs (backends/pipeline.h); roofline only
//   replicas                     --replicas N             1
//   [[replicas]] count, hardware, tp, role, max_num_seqs, max_num_batched_tokens, [replicas.policy]
//                                                         groups of replicas (mixed hardware;
//                                                         role = prefill | decode: disaggregated)
//   prefill_replicas, decode_replicas  --prefill-replicas N, --decode-replicas M
//                                                         disaggregated, on the run's hardware
//   disaggregation.link_gbs, .link_latency_us  --set      each hardware's network_gbs and
//                                                         network_latency_us (per GPU)
// Load controls, as `vllm bench serve` (workloads/load_controls.h):
//   request_rate                 --request-rate R         the workload's own (inf: all at once)
//   burstiness                   --burstiness B           1 (Poisson) when request_rate is given
//   time_scale                   --time-scale F           1
//   rate_scale                   --rate-scale F           1 (F times the arrival rate: time_scale 1/F)
//   num_prompts                  --num-prompts N          every request
//   max_concurrency              --max-concurrency C      unlimited (open loop)
// Service-level objectives and cost:
//   goodput.ttft|tpot|e2el       --goodput ttft:MS ...    none (milliseconds, vLLM's --goodput)
//   price_per_hour_usd           --set                    the hardware file's (USD per GPU-hour)
//   price_by                     --price-by gpu|node      gpu: GPUs x price_per_hour_usd; node: whole
//                                                         nodes (the replicas packed into nodes of
//                                                         gpus_per_node) x node_price_per_hour_usd
//   gpus_per_node                --set                    the hardware file's
//   node_price_per_hour_usd      --set                    the hardware file's (gpus_per_node x the
//                                                         GPU price when it gives none)
//   metric_percentiles           --metric-percentiles L   "" (vLLM's list, "25,50,99": percentiles
//                                                         stored and printed beyond the standard
//                                                         25, 50, 75, 90, 95, 99; the summary then
//                                                         prints these instead of 90 and 99)
//   log                          --log WHAT               "requests": a row per request and a
//                                                         timeline row per replica and bucket;
//                                                         "iterations": also a row per iteration;
//                                                         "summary": the runs and metrics rows.
//                                                         Default: requests with the roofline,
//                                                         iterations with the unit backend (its
//                                                         step-by-step schedule is the point);
//                                                         always iterations for cpu and cuda
//   log_resolution               --set                    auto (seconds per timeline bucket)
//   leap                         --set leap=false         true: group decodes and leap over
//                                                         repeating decode iterations (roofline;
//                                                         identical results)
//   threads                      --threads N              0 (auto): as many as the machine runs at
//                                                         once, less one for the writer's when rows
//                                                         are written (1 for a sweep's points); a
//                                                         run that can be split by replicas
//                                                         (sim/sharded.h) simulates groups of them
//                                                         on up to N threads (identical results)
// The configuration is immutable once resolved; derived values (KV blocks) live elsewhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "sim/kv_groups.h"
#include "sim/result.h"

namespace servesim {

// A group of identical replicas in a mixed deployment (`[[replicas]]` in a config file).
struct ReplicaGroup {
  int32_t count = 1;
  std::string hardware;  // as given; "": the run's `hardware`
  int32_t tp = 0;        // 0: the run's `tp`
  // Disaggregated serving: "prefill" or "decode" (every group has one, or none has); "": serves
  // both.
  std::string role;
  int32_t max_num_seqs = 0;            // 0: the run's
  int32_t max_num_batched_tokens = 0;  // 0: the run's
  // [replicas.policy]: the group's policy, `name` (default: the run's) and its options (default:
  // that policy's defaults, not the run's [policy] options). Empty and !has_policy: the run's.
  bool has_policy = false;
  std::string policy;
  toml::table policy_options;
};

struct RunConfig {
  std::string trace;                   // as given (a file or a preset name)
  std::string policy = "continuous";
  toml::table policy_options;          // [policy] without `name`, checked by the policy itself
  std::string router = "round-robin";  // routers/registry.h
  toml::table router_options;          // [router] without `name` and `session_affinity`, checked by the router
  bool session_affinity = true;        // router.session_affinity
  std::string backend = "roofline";
  std::string hardware;
  std::string model;
  std::string db = "sim.db";
  std::string db_sync = "off";         // off | normal | full: PRAGMA synchronous while the run writes
  std::optional<uint64_t> seed;        // overrides the workload's seed
  std::string name;
  int32_t max_num_seqs = 256;          // sequences per iteration
  int32_t max_num_batched_tokens = 8192;  // tokens per iteration
  int32_t max_tokens = 0;              // output limit of requests that give none; 0: see above
  int64_t max_model_len = 0;           // context per request (prompt + output); 0: the model's
  std::string dtype;                   // "": the model's torch_dtype
  std::string kv_dtype;                // "": dtype
  std::string engine_weights;          // engine.weights: safetensors for the cpu/cuda engine
  std::string engine_profile;          // engine.profile: "" = the backend's default, "none", a preset or file
  bool enforce_eager = false;
  int32_t async_scheduling = -1;       // 1 / 0; -1: the engine file's
  int32_t block_size = 16;             // tokens per KV block
  std::optional<KvGroups> kv_groups;   // kv.*_groups: the layout's groups; none: the backend's
  double moe_routing_skew = 0;         // moe.routing_skew
  int64_t kv_blocks = -1;              // KV blocks per replica; -1: from the backend
  double gpu_memory_utilization = 0.9; // fraction of device memory for weights, activations, KV
  int32_t tp = 1;                      // tensor-parallel degree
  int32_t pp = 1;                      // pipeline-parallel stages (vLLM's --pipeline-parallel-size)
  // Data-parallel ranks per replica (vLLM's --data-parallel-size): each its own scheduler and KV
  // cache on tp GPUs; with a mixture of experts the ranks step together and the MoE layers span
  // dp x tp GPUs, experts split whole among them with enable_expert_parallel.
  int32_t dp = 1;
  bool enable_expert_parallel = false;
  // GPUs one replica takes (of the run's tp, or a group's).
  int32_t gpus_per_replica(int32_t group_tp = 0) const { return (group_tp > 0 ? group_tp : tp) * pp * dp; }
  // The simulated replicas: every data-parallel rank is one.
  int32_t ranks() const { return replicas * dp; }
  int32_t replicas = 1;                // in all (the groups' counts added up, when there are groups)
  // Mixed hardware: groups of replicas, each with its own GPU and tensor parallelism, in this order
  // (replicas 0 .. count-1 are the first group's). Empty: `replicas` replicas of `hardware` at `tp`.
  std::vector<ReplicaGroup> replica_groups;
  // Disaggregated prefill and decode (groups with roles; prefill_replicas / decode_replicas, or
  // --prefill-replicas / --decode-replicas, make one group of each of the run's hardware). The link
  // between a prefill and a decode replica, per GPU: [disaggregation] link_gbs (GB/s) and
  // link_latency_us; 0 and -1: each hardware file's network_gbs and network_latency_us.
  double link_gbs = 0;
  double link_latency_us = -1;
  bool disaggregated() const { return !replica_groups.empty() && !replica_groups.front().role.empty(); }
  // The hardware file's calibration sample (its [calibration] table) to price with; -1: the file's
  // own values. `sim --model-uncertainty` sweeps it.
  int64_t hardware_sample = -1;
  // Load controls (0: not given).
  double request_rate = 0;
  double burstiness = 0;
  double time_scale = 0;
  double rate_scale = 0;           // arrivals rate_scale times as dense: time_scale 1 / rate_scale
  int64_t num_prompts = 0;
  int64_t max_concurrency = 0;
  // Service-level objectives in seconds (0: none), for request_goodput and slo_attainment.
  double slo_ttft = 0, slo_tpot = 0, slo_e2el = 0;
  double price_per_hour_usd = -1;  // per GPU; -1: the hardware file's
  bool price_by_node = false;      // price_by = "node": whole nodes, not GPUs
  int32_t gpus_per_node = 0;       // 0: the hardware file's
  double node_price_per_hour_usd = -1;  // -1: the hardware file's
  std::string log;                 // summary | requests | iterations; "": by backend (see above)
  double log_resolution = 0;       // seconds per timeline bucket; 0: auto (by the arrivals' span)
  bool leap = true;                // SimOptions::leap
  int32_t threads = 0;             // SimOptions::threads; 0: auto (RunEnvironment::threads)
  std::vector<double> metric_percentiles;  // as given, in order; empty: none given
};

// Parses vLLM's --metric-percentiles list ("25,50,99"): numbers in [0, 100], comma-separated.
Result<std::vector<double>> parse_percentile_list(std::string_view list);

// Parses one token of vLLM's --goodput ("ttft:2000", milliseconds) into `config`. Errors name the
// token.
Status apply_goodput_token(std::string_view token, toml::table& table);

// Reads a --config file into a table (values keep their file positions for messages).
Result<toml::table> load_config_file(const std::string& path);

// Applies one --set override "key=value" (dotted key; the value is read as a TOML value, and as a
// plain string when it is not one: --set policy.release=batch).
Status apply_set(toml::table& table, std::string_view assignment);

// Sets `dotted_key` to `value` in `table`, creating tables on the way.
Status set_path(toml::table& table, std::string_view dotted_key, toml::node&& value);

// A node's GPUs and price per hour (USD) under the configuration: its gpus_per_node and
// node_price_per_hour_usd, else the hardware file's node; when the configuration sets the GPU's
// price or the node's GPUs but not the node's price, the node costs its GPUs at `gpu_price`.
struct NodePrice {
  int32_t gpus = 0;  // 0: unknown
  double per_hour = 0;
};
NodePrice node_price(const RunConfig& c, int32_t file_gpus, double file_node_price, double gpu_price);

// Checks every key and value and builds the configuration.
Result<RunConfig> resolve_config(toml::table table);

// The fully resolved configuration as TOML text, with the policy's resolved options.
std::string config_to_toml(const RunConfig& config, const toml::table& policy_options);

}  // namespace servesim
