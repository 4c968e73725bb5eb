// A run's requests rows read back from the database, and the per-request latencies they give,
// with the definitions of `vllm bench serve` that MetricsAccumulator::on_request uses:
//   ttft = first_token - arrival;  tpot = (finished - first_token) / (output_tokens - 1) when
//   output_tokens > 1;  e2el = finished - arrival;  queue = scheduled - arrival;
// each over the finished requests that have the times it needs. One reader for every analysis that
// needs the rows (the vLLM result, the HTML report's CDFs, the bootstrap over requests).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "sim/result.h"

namespace servesim {

class Database;

// One requests row; times in seconds from the start of the workload, -1 where the row has NULL.
struct RequestRow {
  double arrival = 0, scheduled = -1, first_token = -1, finished = -1;
  int64_t prompt_tokens = 0, output_tokens = 0, cached_tokens = 0, preemptions = 0;
  bool finished_ok = false;  // status 'finished' with a finish time: counted by the metrics
  bool rejected = false;     // status 'rejected'
};

// Every requests row of run_id, ordered by arrival, then id. Empty when the run logged none
// (--log summary). Errors: the database's.
Result<std::vector<RequestRow>> read_request_rows(Database& db, int64_t run_id);

// Request r's `latency` (ttft | tpot | e2el | queue) in seconds, or nothing when r is not finished
// or lacks the times it needs. ITL is per token gap, which the rows do not hold: always nothing.
std::optional<double> request_latency(const RequestRow& r, std::string_view latency);

// request_latency of every row that has it, in row order.
std::vector<double> latency_values(std::span<const RequestRow> rows, std::string_view latency);

}  // namespace servesim
