// Load controls: the knobs `vllm bench serve` puts on any workload, applied when it is loaded.
//
//   request_rate R   generated workloads ([generate]): arrivals become a Poisson process at R
//                    requests/s (a gamma process of shape `burstiness` when that is given, as vLLM's
//                    --burstiness: shape B, scale 1/(R B); B = inf: evenly spaced); R = inf sends
//                    every request at time 0. With a number of requests N (requests = N, or
//                    num_prompts) they are timed as `vllm bench serve` times them: N gaps drawn, the
//                    first request sent after the first gap, and all rescaled so that the last is
//                    sent at exactly N / R.
//                    Traces and [[request]] lists: arrivals are re-timed so that the mean rate of the
//                    independent requests, (n - 1) / (last - first), is exactly R; the gaps keep their
//                    proportions, so the trace keeps its own burstiness. Requests that follow others
//                    (conversation turns) still arrive their think time after their parents.
//   burstiness B     generated workloads only (a trace keeps its own); without request_rate it
//                    applies to the workload's own rate.
//   time_scale F     multiplies every independent arrival (after num_prompts); F < 1 compresses.
//                    Not with request_rate.
//   num_prompts N    the first N requests, in the order a client sends them: by the arrival of the
//                    request that starts their conversation, then turn by turn (a request is kept
//                    only with all its parents). A plain [generate] draws exactly N requests instead
//                    of `requests` or `duration`. Fewer than N available is an error.
//
// (max_concurrency, the fifth control, is a property of the client loop, so it lives in the
// simulator: SimOptions::max_concurrency.)
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "sim/result.h"

namespace servesim {

struct Workload;  // workload.h

struct LoadControls {
  double request_rate = 0;  // requests/s, > 0 (inf allowed); 0: the workload's own
  double burstiness = 0;    // gamma shape, > 0; 0: not given
  double time_scale = 0;    // > 0; 0: not given
  int64_t num_prompts = 0;  // >= 1; 0: every request

  bool any() const { return request_rate > 0 || burstiness > 0 || time_scale > 0 || num_prompts > 0; }
};

// The largest request_rate (other than inf) and the bounds of burstiness and time_scale.
inline constexpr double kMaxRequestRate = 1e9;
inline constexpr double kMinBurstiness = 1e-4, kMaxBurstiness = 1e6;
inline constexpr double kMaxTimeScale = 1e9;

// Ok if the controls are in range and compatible with each other; else an Error naming the key.
Status check_load_controls(const LoadControls& load);

// Keeps the first `n` requests in send order (see above). Error if the workload has fewer.
Status keep_first_prompts(Workload& w, int64_t n);

// Re-times the independent requests so that their mean rate is `rate` (inf: all at the first
// arrival). Error when the requests all arrive at one instant (no rate to rescale) or the result
// would pass 1e9 s.
Status retime_to_rate(Workload& w, double rate);

// Multiplies the independent requests' arrivals by `factor`.
Status scale_arrivals(Workload& w, double factor);

}  // namespace servesim
