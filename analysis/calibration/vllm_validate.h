// `sim validate --vllm-result FILE`: a real benchmark (`vllm bench serve --save-result
// --save-detailed`) against the simulator's replay of the same requests.
//
// Both sides are lists of per-request records (VllmBenchRequest, workloads/vllm_bench_result.h):
// the measured ones read from the file, the simulated ones gathered during the replay by
// VllmRequestRecorder. The latencies are derived from the records of both sides in one way, as
// vLLM's calculate_metrics derives them, over the successful requests only:
//   ttft   the time to the first token
//   tpot   (latency - ttft) / (output_len - 1), requests with more than one output token
//   itl    every gap between consecutive tokens (chunks), pooled over the requests
//   e2el   latency: the last token's time from the send
// and compared (compare_vllm_runs) by mean and percentiles 25, 50, 75, 90, 95, 99 (numpy's linear
// method), each percentile's relative error (simulated - measured) / measured, their mean absolute
// value (MAPE), and the two-sample Kolmogorov-Smirnov distance with its asymptotic p-value (ks_test.h).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/calibration/ks_test.h"
#include "analysis/metrics/metrics.h"
#include "analysis/reports/report.h"
#include "sim/recorder.h"
#include "workloads/vllm_bench_result.h"

namespace servesim {

// Gathers each simulated request as vLLM's client would have seen it: ttft, every token's gap,
// latency (finished - sent), the send time as start_time and the wait for a --max-concurrency slot
// as queue_time. It sees every batch item, so the replicas step through every iteration (no
// leaps); the results are the same (docs/benchmarks.md).
class VllmRequestRecorder : public Recorder {
 public:
  // size: the requests in the file; the workload's ids are "r<i>", i the file position
  // (vllm_bench_workload). A request not simulated keeps the error "not simulated".
  explicit VllmRequestRecorder(size_t size);

  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override;
  void on_request(const Request& r) override;
  void on_run_end(RunOutcome outcome, const std::string& error) override;

  // The records by file position, complete once the run ended: a rejected or unfinished request
  // has its reason as error.
  const std::vector<VllmBenchRequest>& records() const { return records_; }

 private:
  std::vector<VllmBenchRequest> records_;
  std::unordered_map<int32_t, std::vector<double>> gaps_;  // by Sequence::index, until the end
  std::unordered_map<int32_t, size_t> position_;           // Sequence::index -> file position
};

// The four latencies of the successful records, each sorted and run-length encoded (seconds).
struct LatencySamples {
  std::vector<WeightedValue> ttft, tpot, itl, e2el;
};
LatencySamples latency_samples(const std::vector<VllmBenchRequest>& records);

// One percentile of one latency, measured against simulated (seconds).
struct PercentileComparison {
  double p = 0;
  double measured = 0, simulated = 0;
  std::optional<double> error;  // (simulated - measured) / measured; none when measured is 0
};

struct LatencyComparison {
  std::string name;                      // ttft | tpot | itl | e2el
  int64_t measured_n = 0, simulated_n = 0;
  double measured_mean = 0, simulated_mean = 0;   // seconds
  std::vector<PercentileComparison> percentiles;  // kStandardPercentiles
  std::optional<double> mape;            // mean |error| over the percentiles that have one
  std::optional<KsResult> ks;            // none when either side has no values
};

struct VllmComparison {
  std::string file;
  int64_t requests = 0;          // in the file
  int64_t failed = 0;            // failed in the benchmark: left out of both sides
  int64_t simulated = 0;         // replayed (the successful ones)
  int64_t sim_completed = 0, sim_rejected = 0, sim_unfinished = 0;
  std::optional<double> measured_output_throughput;  // tokens/s, the file's
  std::optional<double> simulated_output_throughput;
  std::string arrivals;          // how the arrivals were made ("start_times", "drawn ...")
  SummaryHeader header;          // the simulated deployment
  std::vector<LatencyComparison> latencies;  // ttft, tpot, itl, e2el
};

// Compares the successful measured requests with the simulated ones (both by file position).
LatencyComparison compare_latency(const std::string& name, const std::vector<WeightedValue>& measured,
                                  const std::vector<WeightedValue>& simulated);
std::vector<LatencyComparison> compare_latencies(const std::vector<VllmBenchRequest>& measured,
                                                 const std::vector<VllmBenchRequest>& simulated);

// The comparison as text (a table per latency, in milliseconds) or JSON (seconds and ms named).
void print_vllm_comparison(const VllmComparison& c, ReportFormat format, std::ostream& out);

// The simulated records as the file `vllm bench serve --save-result --save-detailed` writes (the
// per-request lists and the summary keys it computes from them), with the measured file's
// model_id, request_rate, burstiness and max_concurrency. For tests and plots of the replay.
nlohmann::ordered_json vllm_detailed_result(const VllmBenchResult& measured,
                                            const std::vector<VllmBenchRequest>& simulated);

}  // namespace servesim
