// Observers of a run: the SQLite writer, the metric accumulator, a progress display. The simulator
// calls them in a fixed order as the run proceeds; they never call back into it, and nothing they do
// changes the simulation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "sim/batch.h"
#include "sim/decode_durations.h"
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
  // Of num_seqs, the decodes of the replica's decode group (sim/batch.h), which on_iteration's
  // items do not list: each emitted a token group_gap after its previous one.
  int32_t grouped = 0;
  Time group_gap = -1;
};

// Iterations that repeat the one before, reported together: a replica leapt over them. Iteration j
// (from 0 to count - 1) is step first_step + j; it starts when the one before ended (the first at
// `start`) and lasts durations.at(j). The iterations come in ranges (together covering all count, in
// order), within each of which every iteration holds the same KV blocks after its allocations and
// leaves the same number of requests waiting. Every iteration has the same num_seqs items, each a
// decode that emits a token whose gap is the iteration's duration; nothing is prefilled, preempted
// or admitted.
struct DecodeSteps {
  struct Range {
    int64_t end = 0;  // iterations [the previous range's end (0 for the first), end)
    int64_t kv_blocks_used = 0;
    int32_t waiting = 0;
    Time busy = 0;  // ns: its iterations' durations, summed
  };
  int32_t replica = 0;
  int64_t first_step = 0;
  Time start = 0;
  int64_t count = 0;
  DecodeDurations durations;
  std::span<const Range> ranges;
  int64_t kv_blocks_total = -1;
  int32_t num_seqs = 0;
  bool predicted = false;  // predicted = duration (a cost model's run), else -1

  // Iteration j's record, in `range`, starting `at`, lasting `duration`.
  IterationRecord record(int64_t j, const Range& range, Time at, Time duration) const {
    IterationRecord r;
    r.replica = replica;
    r.step = first_step + j;
    r.start = at;
    r.duration = duration;
    r.num_seqs = num_seqs;
    r.emitted = num_seqs;
    r.decode_tokens = num_seqs;
    r.kv_blocks_used = range.kv_blocks_used;
    r.kv_blocks_total = kv_blocks_total;
    r.predicted = predicted ? duration : -1;
    r.waiting = range.waiting;
    r.grouped = num_seqs;
    r.group_gap = duration;
    return r;
  }
};

// Disaggregated serving: one request's prompt KV moving from the prefill replica that computed it
// to the decode replica that generates the rest.
struct TransferRecord {
  const Request* request = nullptr;
  int32_t prefill_replica = 0;
  int32_t decode_replica = 0;
  int64_t tokens = 0;     // prompt tokens moved (those the decode replica's prefix cache lacked)
  double bytes = 0;       // their KV
  Time ready = 0;         // the prefill replica emitted the first token: the KV may move
  Time reserved = 0;      // the decode replica took blocks for it
  Time start = 0;         // both ends' links were free: the bytes start moving
  Time end = 0;           // the KV is in; the request decodes from the decode replica's next iteration
};

enum class RunOutcome { kDone, kInterrupted, kFailed };

class Recorder {
 public:
  virtual ~Recorder() = default;

  // Called once per iteration, after the replica applied its results: items carry emitted/token_gap
  // (all the batch's items but its decode group's it.grouped ones).
  virtual void on_iteration(const IterationRecord& /*it*/, std::span<const BatchItem> /*items*/) {}

  // Whether this recorder takes decodes in aggregate: a batch's decode group as a count and a gap
  // (IterationRecord::grouped), and runs of repeating iterations through on_decode_steps. Replicas
  // group decodes and leap over iterations only when every recorder does; one that sees each
  // batch's items (a per-item log, a test's checker) keeps the default, and every iteration is run
  // one by one with every item listed.
  virtual bool accepts_grouped_decodes() const { return false; }
  // Called, after on_iteration of the iteration they repeat, for a run of iterations a replica
  // leapt over. The default reports each through on_iteration, without items.
  virtual void on_decode_steps(const DecodeSteps& steps) {
    Time at = steps.start;
    DecodeDurationCursor duration(steps.durations);
    int64_t j = 0;
    for (const DecodeSteps::Range& range : steps.ranges) {
      for (; j < range.end; ++j) {
        const Time d = duration.next();
        on_iteration(steps.record(j, range, at, d), {});
        at += d;
      }
    }
  }

  // Called once per request when its fate is settled: its response is complete (status kDone and
  // finished >= 0) or it was rejected. At the end of an interrupted run, also once for each request
  // that arrived but did not complete (status kWaiting or kRunning).
  virtual void on_request(const Request& /*r*/) {}

  // Called once per KV transfer, when it ends (disaggregated serving).
  virtual void on_transfer(const TransferRecord& /*t*/) {}

  // Called once at the very end. error is empty unless outcome is kFailed.
  virtual void on_run_end(RunOutcome /*outcome*/, const std::string& /*error*/) {}

  // Split runs (sim/sharded.h) simulate groups of replicas on threads of their own, each group
  // reporting to recorders of its own. When can_shard(), shard() makes one such recorder, to be
  // called from that group's thread only; a run with any recorder that cannot is simulated on one
  // thread. A recorder that made shards gets no other calls until every group has ended (its
  // shards' on_run_end called); then absorb() takes each shard, in group order, and on_run_end
  // closes the run.
  virtual bool can_shard() const { return false; }
  virtual std::unique_ptr<Recorder> shard() { return nullptr; }
  virtual void absorb(Recorder& /*shard*/) {}
};

}  // namespace servesim
