// Error bars for one run: a bootstrap over its requests (`sim --bootstrap N`, `sim report
// --bootstrap N`). The run's requests rows are resampled with replacement N times (each resample
// as many rows as the run has, finished, rejected and unfinished alike), each statistic of
// bootstrap_metrics() is recomputed on every resample, and the 95 % percentile-bootstrap interval
// is the 2.5 and 97.5 % percentiles (numpy's linear) of the N resampled values, printed beside the
// statistic of the run's own requests (the point estimate).
//
// What it captures: the sampling noise of the request set. A trace is one sample of its traffic;
// had another set of requests of the same kind been replayed, its p99 TTFT would differ by about
// this much. A tail percentile over few requests gets a wide interval, a mean over many a narrow
// one. What it does not capture: the randomness of the arrival process (every resample keeps the
// latencies each request had in the run, with the queueing the run's own arrivals caused; a
// resample is not re-simulated, so bursts and load are those of the run: use --seeds for a
// generated workload's draw-to-draw spread), and model error (the cost model's bias, an
// untuned policy: no resampling sees those). Requests are treated as independent; in an
// overloaded run they are not, and the interval is too narrow.
//
// The statistics are those of the metrics (analysis/metrics/metrics.h) that are functions of the request
// set: counts, the sums of tokens over the run's fixed duration (last finish - first arrival of the
// run itself, held fixed: output_throughput's interval is that of the total output tokens), each
// latency's mean and p50/p90/p99, and itl_mean. ITL's mean is exact from the rows: a streamed
// request's token gaps sum to finished - first_token over output_tokens - 1 gaps (a preemption
// only lengthens one gap), so itl_mean is the ratio of those two sums (a response held to the end
// of a static batch streams no gaps and adds nothing, as in the metrics). ITL's percentiles are
// not: they need each gap, which only the run itself sees; they are left out.
//
// Nothing here is stored: like the seeds summary, the intervals are derived from the database's
// rows whenever they are read (analysis derives, the simulator records). The resamples are drawn
// from the seed alone (resample b from its own stream), so the result is the same on any number
// of threads. Means are summed in fixed point (2^-32 s) in 128-bit integers, so they do not depend
// on order either.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/storage/request_rows.h"
#include "analysis/reports/seed_stats.h"
#include "sim/result.h"

namespace servesim {

class Database;

// Resample counts a bootstrap accepts.
inline constexpr int64_t kMinBootstrap = 10;
inline constexpr int64_t kMaxBootstrap = 100000;

struct BootstrapOptions {
  int64_t resamples = 1000;
  uint64_t seed = 0;
  int threads = 0;  // 0: the machine's cores
};

// The statistics resampled, in print order, with their units (as the seeds summary's).
std::span<const SeedMetric> bootstrap_metrics();

// Each bootstrap_metrics() statistic of the request set `rows` in stored units (seconds, per
// second), NaN where it is undefined (tpot with no request of two tokens or more, rates when
// duration <= 0). duration: the fixed span the rates are over (seconds).
std::vector<double> request_set_statistics(std::span<const RequestRow> rows, double duration);

// The duration a run's rates are over: last finish - first arrival of its finished requests
// (the metric `duration`); 0 when none finished.
double run_duration(std::span<const RequestRow> rows);

// The row indices of resample `resample` (0-based) of a bootstrap with `seed` over n rows: n draws
// with replacement, uniform, from the stream of that seed and resample alone.
std::vector<uint32_t> resample_indices(uint64_t seed, int64_t resample, int64_t n);

struct BootstrapEstimate {
  SeedMetric metric;
  double point = 0;      // of the run's own requests, in the metric's unit
  double low = 0, high = 0;  // 2.5 and 97.5 % of the resampled values
  int64_t resamples = 0;     // resamples in which the statistic was defined
};

struct BootstrapResult {
  int64_t run_id = 0;
  int64_t requests = 0;  // rows resampled
  int64_t resamples = 0;
  uint64_t seed = 0;
  double duration = 0;  // seconds (steps with the unit backend)
  bool steps = false;   // unit backend: latencies in steps, rates per step
  std::vector<BootstrapEstimate> estimates;  // bootstrap_metrics() order; undefined ones left out
};

// Errors: resamples outside kMinBootstrap..kMaxBootstrap, threads outside 0..1024.
Status check_bootstrap_options(const BootstrapOptions& options);

// The bootstrap of `rows` (latencies labelled in steps when steps). Errors: no rows, no finished
// request, options that check_bootstrap_options refuses, more than 2^32 - 1 rows.
Result<BootstrapResult> bootstrap_requests(std::span<const RequestRow> rows, const BootstrapOptions& options,
                                           bool steps = false);

// The same for stored run run_id, from its requests rows (steps: a unit-backend run). Errors: the
// run logged no requests rows (--log summary; the message says to rerun with --log requests), and
// those above.
Result<BootstrapResult> read_bootstrap(Database& db, int64_t run_id, bool steps, const BootstrapOptions& options);

// An estimate as printed: {"ttft_p99 (ms)", "812.3", "[771.1, 853.5]"} (three significant digits
// of the interval's half-width decide the decimals, as in the seeds summary).
std::vector<std::string> estimate_cells(const BootstrapEstimate& e);

// "Bootstrap over the 5000 requests of run 3: 1000 resamples (seed 0)", then one line per
// statistic: "ttft_p99 (ms)   812.3   [771.1, 853.5]".
void print_bootstrap_summary(std::ostream& out, const BootstrapResult& result);

// {"requests", "resamples", "seed", "duration", "method", "estimates": [{"metric", "unit",
// "estimate", "ci_low", "ci_high", "resamples"}]}, in the metric's unit.
nlohmann::json bootstrap_json(const BootstrapResult& result);

}  // namespace servesim
