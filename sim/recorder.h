// Observers of a run: the SQLite writer, the metric accumulator, a progress display. The simulator
// calls them in a fixed order as the run proceeds; they never call back into it, and nothing they do
// changes the simulation.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sim/batch.h"
#include "sim/request.h"
#include "sim/time.h"

namespace servesim {

struct IterationRecord {
  int32_t replica = 0;
  int64_t step = 0;            // per replica, from 0
  Time start = 0;
  Time duration = 0;
  int32_t num_seqs = 0;        // items in the batch, padding included
  int32_t emitted = 0;         // items that produced an output token
  int64_t prefill_tokens = 0;  // new tokens of prefill (and recompute) items
  int64_t decode_tokens = 0;   // decode items, padding included
  int64_t kv_blocks_used = 0;  // after the iteration's allocations
  int64_t kv_blocks_total = -1;  // -1: unlimited
  Time predicted = -1;         // a cost model's prediction beside a measured duration, or -1
  int32_t waiting = 0;         // requests left waiting when the batch was formed
  int32_t preempted = 0;       // requests preempted to form it
};

enum class RunOutcome { kDone, kInterrupted, kFailed };

class Recorder {
 public:
  virtual ~Recorder() = default;

  // Called once per iteration, after the replica applied its results: items carry emitted/token_gap.
  virtual void on_iteration(const IterationRecord& /*it*/, std::span<const BatchItem> /*items*/) {}

  // Called once per request when its fate is settled: its response is complete (status kDone and
  // finished >= 0) or it was rejected. At the end of an interrupted run, also once for each request
  // that arrived but did not complete (status kWaiting or kRunning).
  virtual void on_request(const Request& /*r*/) {}

  // Called once at the very end. error is empty unless outcome is kFailed.
  virtual void on_run_end(RunOutcome /*outcome*/, const std::string& /*error*/) {}
};

}  // namespace servesim
