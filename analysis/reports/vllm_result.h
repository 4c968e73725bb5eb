// `sim report --format vllm-json`: a stored run as the JSON that `vllm bench serve --save-result`
// writes (vLLM 0.33.0, benchmarks/serve.py), so that dashboards and scripts written for vLLM's
// results read ours unchanged: the same keys, in the same order, with the same units
// (milliseconds for latencies, seconds for the duration and the per-request lists).
//
// What differs, because a simulator is not a client (docs/guide.md, Reports, says the same):
//   - date is the run's start; endpoint_type and backend are "servesim"; model_id and
//     tokenizer_id are the run's model; label is the run's name (null when it has none);
//   - request_rate is the one given (--request-rate), else the workload's mean arrival rate (its
//     requests over the span of their arrivals), else "inf" when they all arrive at once;
//   - failed counts rejected and unfinished requests;
//   - latencies and queue_times (per request, in arrival order; 0 for a failed one, as vLLM) come
//     from the requests rows, so a run logged with --log summary has none (empty lists, and a
//     note under "servesim");
//   - queue_times is vLLM's client-side wait for a --max-concurrency slot; the simulator's client
//     sends a request when a slot frees, and its latencies count from then, so it is 0 for every
//     request in this layout;
//   - max_output_tokens_per_s is the largest number of tokens emitted in one timeline bucket (one
//     simulated second by default, longer for workloads spanning more than 2,000 s; all
//     replicas), divided by the bucket's width: vLLM counts each token in the second it arrived
//     from the first request's start, the timeline counts it in the bucket its iteration started
//     in, from time 0;
//   - max_concurrent_requests is computed exactly as vLLM does, from the requests rows;
//   - the percentile metrics are mean, median, std and each --metric-percentiles value (default
//     99) of ttft, tpot, itl and e2el (vLLM's --percentile-metrics ttft,tpot,itl,e2el); a
//     percentile the run did not store (ITL's are computed during the run) is null, with a note;
//   - one key more, "servesim", holds the run id, the database and any notes.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/reports/report.h"
#include "sim/result.h"

namespace servesim {

class Database;

// The vLLM result for `run`, read from `db`. percentiles: vLLM's --metric-percentiles (empty: 99).
Result<nlohmann::ordered_json> vllm_result(Database& db, const StoredRun& run,
                                           const std::vector<double>& percentiles);

// The value of `latency`'s percentile p (seconds) for a stored run: the metric when stored, else
// the distributions row at quantile p / 100, else (not ITL) computed from the requests rows; or
// nothing. latency: ttft | tpot | itl | e2el | queue.
Result<std::optional<double>> stored_percentile(Database& db, const StoredRun& run, std::string_view latency,
                                                double p);

}  // namespace servesim
