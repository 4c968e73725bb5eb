// A result file of `vllm bench serve --save-result --save-detailed` (vLLM 0.33.0,
// vllm/benchmarks/serve.py), read as a workload and as measurements: `sim validate --vllm-result`.
//
// What the file holds (one JSON object; times in seconds, lengths in tokens):
//   top level       model_id, request_rate (a number, or "inf"), burstiness, max_concurrency (null
//                   or C), ramp_up_strategy (only with a ramp-up), duration, completed, failed,
//                   output_throughput, ... (the summary vLLM prints)
//   per request     input_lens, output_lens, ttfts, itls (a list of gaps per request), errors,
//   (--save-detailed) start_times (time.perf_counter() when the request was sent, after any wait
//                   for a --max-concurrency slot), generated_texts
//   per request     latencies (the last chunk's time from the send), queue_times (the wait for a
//   (always)        --max-concurrency slot)
// A failed request (a non-empty error) has ttft 0, no itls and output_len 0 unless it failed
// mid-stream; vLLM leaves it out of every metric, and so does this reader's caller.
//
// The requests are kept in file order (vLLM's send order). Every error names the file and the key
// (`PATH: ttfts[3]: expected a number >= 0, got -0.5`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/result.h"
#include "workloads/workload.h"

namespace servesim {

// The per-request keys of a detailed result, as vLLM names them.
inline constexpr const char* kVllmInputLens = "input_lens";
inline constexpr const char* kVllmOutputLens = "output_lens";
inline constexpr const char* kVllmTtfts = "ttfts";
inline constexpr const char* kVllmItls = "itls";
inline constexpr const char* kVllmLatencies = "latencies";
inline constexpr const char* kVllmStartTimes = "start_times";
inline constexpr const char* kVllmQueueTimes = "queue_times";
inline constexpr const char* kVllmErrors = "errors";
inline constexpr const char* kVllmGeneratedTexts = "generated_texts";

// One request as the benchmark client saw it.
struct VllmBenchRequest {
  int32_t input_len = 0;
  int32_t output_len = 0;          // tokens generated (0 for a failed request)
  double ttft = 0;                 // seconds from the send to the first token
  std::vector<double> itls{};      // seconds between consecutive chunks
  double latency = 0;              // seconds from the send to the last chunk (from `latencies`,
                                   // else ttft + sum(itls), as vLLM's timeline plot computes it)
  double start_time = 0;           // seconds, any origin (0 when the file has no start_times)
  double queue_time = 0;           // seconds waited for a --max-concurrency slot (0 if unknown)
  std::string error{};             // non-empty: the request failed

  bool failed() const { return !error.empty(); }
};

struct VllmBenchResult {
  std::string path;
  std::string model_id;            // "" when absent
  double request_rate = 0;         // requests/s; inf for "inf"; 0 when absent
  double burstiness = 1.0;         // gamma shape of the gaps (1: Poisson)
  int64_t max_concurrency = 0;     // 0: none (open loop)
  bool ramp_up = false;            // the benchmark ramped its rate up (ramp_up_strategy)
  std::optional<double> duration;            // seconds, the benchmark's
  std::optional<double> output_throughput;   // tokens/s over the successful requests
  bool has_start_times = false;
  bool has_latencies = false;
  bool has_queue_times = false;
  std::vector<VllmBenchRequest> requests;    // file order

  int64_t failed_count() const;
};

// Reads and checks `path`. Errors: not a readable file, not JSON, a per-request list missing (the
// message says --save-detailed is needed) or of another length than input_lens, a value that is
// not a number, negative, or (lengths) not a whole number.
Result<VllmBenchResult> read_vllm_bench_result(const std::string& path);

// The successful requests as a workload (ids "r<i>", i the position in the file, so that a
// simulated request can be matched to its measured one), in arrival order:
//   - with start_times, each arrives at start_time - queue_time (when the client meant to send
//     it; with no --max-concurrency the wait is 0), relative to the earliest;
//   - else arrivals are drawn as vLLM bench draws them (gamma gaps of shape burstiness and scale
//     1 / (request_rate * burstiness), the last at n / request_rate; request_rate inf: all at 0)
//     from servesim's RNG with `seed`: numpy's stream cannot be reproduced, so the arrivals are the
//     same in distribution, not the same times. Error when request_rate is absent or the benchmark
//     ramped its rate up.
// A request's output_len is its output_tokens and its max_tokens (the benchmark asked for it).
Result<Workload> vllm_bench_workload(const VllmBenchResult& result, uint64_t seed);

}  // namespace servesim
