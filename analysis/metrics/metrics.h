// The metrics of a run, as `vllm bench serve` defines them, from what the simulator records.
//
// MetricsAccumulator is a Recorder: it keeps per-request latencies (one double each per completed
// request) and run-length encoded inter-token gaps (a (gap, count) pair per distinct gap, not one
// value per token), so a run of a million requests and tens of millions of tokens stays small.
// compute() derives every metric from them; the accumulator owns nothing but its own copies of the
// numbers. All times in metrics are seconds (with the unit backend, one second is one iteration).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/batch.h"
#include "analysis/metrics/backlog.h"
#include "analysis/metrics/percentiles.h"
#include "analysis/metrics/token_gaps.h"
#include "sim/recorder.h"
#include "sim/request.h"
#include "sim/time.h"

namespace servesim {

struct Metric {
  std::string name;
  double value;
};

// One group of a mixed deployment (`[[replicas]]`), for the GPU, cost and KV metrics.
struct ReplicaGroupShape {
  int32_t count = 1, tp = 1;
  double price_per_gpu_hour = 0;  // 0: unknown
  int64_t kv_blocks = -1;         // per replica; -1: unlimited
  double kv_bytes_per_token = 0;  // per replica
  // Its hardware's nodes: GPUs each (0: unknown) and price per hour (USD); groups of the same
  // hardware (by file) share nodes.
  int32_t gpus_per_node = 0;
  double node_price_per_hour = 0;
  std::string hardware{};
};

// What a deployment's GPUs cost: its GPUs; the whole nodes they take, each hardware's replicas
// packed into its nodes (a replica on one node, or on whole nodes of its own when larger than one),
// or -1 when a group's gpus_per_node is unknown; its price per hour by GPU or by node, or -1 when
// a price is unknown.
struct DeploymentCost {
  double gpus = 0;
  int64_t nodes = -1;
  double per_hour = -1;
};
DeploymentCost deployment_cost(std::span<const ReplicaGroupShape> groups, bool price_by_node);

struct MetricsOptions {
  int32_t max_num_seqs = 1;  // per replica, for slot_utilization
  int32_t replicas = 1;
  // Service-level objectives in seconds (0: none), as vLLM's --goodput: a completed request is good
  // when its TTFT, TPOT and E2E latency are each at most the objective given.
  double slo_ttft = 0, slo_tpot = 0, slo_e2el = 0;
  int32_t tp = 1;                 // GPUs per replica
  double price_per_gpu_hour = 0;  // USD; 0: unknown (no cost metrics)
  int32_t gpus_per_node = 0;      // of the hardware; 0: unknown (no nodes metric)
  double node_price_per_hour = 0; // USD
  bool price_by_node = false;     // cost_per_hour by whole nodes rather than GPUs
  int64_t kv_blocks = -1;         // per replica; -1: unlimited
  int32_t block_size = 16;
  // Blocks a token takes while every KV group grows with it (a hybrid layout's groups, e.g. full
  // and sliding window: 2): kv_tokens_per_replica is the blocks over it. 1 for a plain layout.
  double kv_blocks_per_token_block = 1;
  double kv_bytes_per_token = 0;  // per replica (all its GPUs); 0: unknown
  int64_t expected_requests = 0;  // the workload's size when known, to size the samples once
  // Percentiles to compute beyond kStandardPercentiles (vLLM's --metric-percentiles), in (0, 100].
  std::vector<double> percentiles{};
  // Mixed hardware: the groups (their counts add up to replicas); then gpus, the cost and the KV
  // metrics come from them rather than from tp, price_per_gpu_hour and kv_blocks.
  std::vector<ReplicaGroupShape> groups{};
  // Disaggregated serving: each replica's pool (1 prefill, 2 decode), for prefill_utilization and
  // decode_utilization. Empty: not disaggregated.
  std::vector<uint8_t> pools{};
  // The replicas cache prefixes (the policy prefix-cached): prefix_cacheable_requests is counted.
  bool prefix_caching = false;
};

// The deployment's metrics (analysis/metrics/deployment_metrics.cc), after the others: gpus, the KV cache
// per replica, the cost; for [[replicas]] groups (options.groups), replica_groups and
// kv_blocks_total too, per-replica KV only when the groups agree. A run without groups is one
// group of options.replicas at options.tp, options.price_per_gpu_hour and options.kv_blocks.
void add_deployment_metrics(std::vector<Metric>& out, const MetricsOptions& options, double duration,
                            int64_t output_tokens);

// The percentiles every run stores for each latency (name_p25 ... name_p99), beside name_mean and
// name_std; MetricsOptions::percentiles adds more.
inline constexpr double kStandardPercentiles[] = {25, 50, 75, 90, 95, 99};

// A percentile's metric suffix as vLLM names its keys: "_p99", "_p99.9" (the shortest decimal).
std::string percentile_suffix(double p);

// The latencies whose distributions a run stores: ttft, tpot, itl, e2el, queue.
std::span<const std::string_view> latency_metrics();

// One point of a latency's distribution: the value (seconds) at quantile q in [0, 1], as numpy's
// percentile(values, 100 q) (linear). A run stores kQuantileGrid's points for each latency, enough
// to draw its CDF without the per-request rows.
struct QuantilePoint {
  std::string metric;  // ttft | tpot | itl | e2el | queue
  double quantile;
  double value;
};
// 0, 0.01, ..., 1 and the tail 0.991 ... 0.999, 0.9995, 0.9999, ascending.
std::span<const double> quantile_grid();



// The value of metric `name` in `metrics`, if it is there.
std::optional<double> find_metric(std::span<const Metric> metrics, std::string_view name);

// Every metric name that compute() may return, in the order it returns them.
std::span<const std::string_view> metric_names();

class MetricsAccumulator : public Recorder {
 public:
  explicit MetricsAccumulator(MetricsOptions options);

  // Adds the iteration to slot and KV utilization, and its items' token gaps (>= 0) to ITL.
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override;
  // The same for each iteration of a leap; every item's gap is the iteration's duration.
  bool accepts_grouped_decodes() const override { return true; }
  void on_decode_steps(const DecodeSteps& steps) override;

  // Counts the request: a completed one (kDone, finished >= 0) adds its latencies and tokens; a
  // rejected one adds to `rejected` and its cause's count; every one adds its preemptions (and,
  // with prefix caching, to prefix_cacheable_requests if its prompt names its content); every one
  // sent adds its outstanding interval to the overload test.
  void on_request(const Request& r) override;
  // Adds a KV transfer (disaggregated serving) to the kv_transfer_* metrics.
  void on_transfer(const TransferRecord& t) override;

  // A sharded run's groups of replicas each count into an accumulator of their own (with these
  // options); absorbing them (which takes their samples) gives exactly what one accumulator
  // counting every replica gives.
  bool can_shard() const override { return true; }
  std::unique_ptr<Recorder> shard() override;
  void absorb(Recorder& shard) override;
  // A shard sorts its samples and merges its gaps when its group ends, on the group's thread, so
  // that absorbing it (and compute()) merges sorted parts rather than sorting the whole.
  void on_run_end(RunOutcome outcome, const std::string& error) override;

  // Every metric over what was recorded so far, in metric_names() order (extra percentiles after
  // their latency's standard ones). Metrics with no data (tpot when no request has more than one
  // token, kv_utilization_mean when KV memory is unlimited, rates when no request completed) are
  // omitted; counts are always present. With `quantiles`, also each latency's quantile_grid().
  // It sorts the samples it keeps in place: one call at a time.
  std::vector<Metric> compute(std::vector<QuantilePoint>* quantiles = nullptr) const;

 private:
  bool has_slos() const { return options_.slo_ttft > 0 || options_.slo_tpot > 0 || options_.slo_e2el > 0; }
  void count_iteration(int32_t replica, Time duration, int32_t emitted, int64_t kv_used, int64_t kv_total);
  // compute()'s parts, in the order of its lines.
  double add_counts(std::vector<Metric>& out) const;
  BacklogTrend add_distributions(std::vector<Metric>& out, std::vector<QuantilePoint>* quantiles) const;
  void add_utilization(std::vector<Metric>& out, double duration) const;
  void add_transfers(std::vector<Metric>& out, double duration) const;

  // Sums kept in integers, so that they do not depend on the order replicas report in.

  MetricsOptions options_;
  int64_t completed_ = 0, rejected_ = 0, capped_ = 0, preemptions_ = 0, iterations_ = 0;
  int64_t good_ = 0;  // completed within every SLO
  int64_t rejected_by_cause_[kNumRejectCauses] = {};
  static constexpr size_t kSorted = 5;  // the samples that may be in sorted parts (below)
  std::array<size_t, kSorted> sample_sizes() const;
  // Whether the samples are made of the sorted parts sorted_parts_ describes, nothing added since.
  bool in_sorted_parts() const;

  bool shard_ = false;
  // The samples (their order carries nothing, and compute() sorts them in place):
  mutable std::vector<Sojourn> outstanding_;  // (due, finished, scheduled) of sent requests, s
  int64_t input_tokens_ = 0, output_tokens_ = 0;
  int64_t cached_tokens_ = 0, cache_hits_ = 0;  // prompt tokens from the prefix cache; requests with any
  int64_t cacheable_ = 0;  // requests whose prompt names its content (prefix_cacheable_requests)
  Time first_arrival_ = kNever, last_finished_ = -1;
  mutable std::vector<double> ttft_, tpot_, e2el_, queue_;  // seconds, one per completed request
  // When the samples above are made of sorted parts (a sharded run's groups', each sorted when its
  // group ended, or all of one after compute()), where each part ends in each, in the order
  // outstanding_, ttft_, tpot_, e2el_, queue_. Samples added since make them unknown again
  // (in_sorted_parts()).
  mutable std::vector<std::array<size_t, kSorted>> sorted_parts_;
  // Merging the runs changes no value, so compute() may, being const.
  mutable TokenGaps gaps_;
  Wide emitting_ns_ = 0;                            // sum of emitted * duration (ns)
  struct KvUse {
    Wide used_ns = 0;  // sum of blocks used * duration (ns)
    Wide ns = 0;       // sum of durations
    int64_t total = 0;
  };
  std::vector<KvUse> kv_;                           // per replica
  bool kv_limited_ = false;
  std::vector<Time> busy_;                          // per replica: its iterations' durations, summed
  // Disaggregated serving: per transfer, the wait for the decode replica's blocks and the time from
  // them to the KV's arrival (seconds); the bytes moved.
  std::vector<double> transfer_wait_, transfer_time_;
  double transfer_bytes_ = 0;
};

}  // namespace servesim
