// A batching policy decides, at the start of every iteration of one replica, which requests run and
// how many tokens each computes. It sees the replica only through ReplicaView: the queue, the running
// set, the KV block manager and the scheduler limits. It never sees the backend, the clock beyond
// `now`, or a request's true output length.
//
// One Policy object serves one replica for one run; it may keep state between calls (static batching
// remembers its current batch).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "sim/batch.h"
#include "sim/kv_cache.h"
#include "sim/request.h"
#include "sim/time.h"

namespace servesim {

// The order of a replica's waiting queue, which the policy chooses (Policy::queue_order).
enum class QueueOrder : uint8_t {
  kFcfs,      // by arrival; a preempted request goes back to the front (vLLM's FCFSRequestQueue)
  kPriority,  // by (priority, arrival, id), lowest first; a preempted request re-enters at its place
              // (vLLM's PriorityRequestQueue, ordered by Request.__lt__)
};

struct SchedulerLimits {
  int32_t max_num_seqs = 256;             // sequences per iteration (vLLM's max_num_seqs)
  int32_t max_num_batched_tokens = 8192;  // tokens computed per iteration
};

// What ReplicaView::schedule_decode_group does when a member of the decode group finds no free KV
// block for its next token.
enum class GroupPreemption : uint8_t {
  kByPolicy,    // stops there: the policy goes on from that member, and preempts as it will
  kMostRecent,  // preempts the most recently admitted running request until the member fits
};

// What ReplicaView::schedule_decode_group scheduled.
struct DecodeGroup {
  int32_t size = 0;        // the group's members in the batch: running()[0, size)
  bool preempted = false;  // it preempted requests (GroupPreemption::kMostRecent)
};

// What a policy may see and do. The replica implements it.
class ReplicaView {
 public:
  virtual ~ReplicaView() = default;

  // Requests waiting to be admitted, in the policy's queue_order().
  virtual const std::deque<Sequence*>& waiting() const = 0;
  // Admitted requests that hold KV blocks and have not finished, in admission order.
  virtual const std::vector<Sequence*>& running() const = 0;
  virtual BlockManager& kv() = 0;
  virtual const SchedulerLimits& limits() const = 0;
  // False when waiting longer can bring no arrival: every independent request has arrived, and
  // nothing in flight (an iteration, a dependent request's think time) can release another.
  virtual bool more_arrivals_expected() const = 0;

  // Schedules the replica's decode group in one call: its leading running requests that decode in
  // step (each has computed all but its newest token, and they emitted that token together), each
  // computing its next token, exactly as a loop over them would one by one. Allocates their next
  // KV slots, adds them to `batch` (Batch::group) and returns how many they are; the policy goes on
  // from running()[that many]. When some member finds no free KV block for its next token:
  //  - GroupPreemption::kByPolicy: the group is the members before it, which allocate as they
  //    would one by one; the policy goes on from that member (and preempts for it);
  //  - GroupPreemption::kMostRecent: it preempts running().back() (preempt()) until the member's
  //    block is free or the member itself was preempted, as a loop whose victim is always the most
  //    recently admitted request would, and goes on; the group is the members left, and
  //    DecodeGroup::preempted says it preempted.
  // Returns 0, doing nothing, when the group is empty or larger than `max`, when its first member
  // finds no free block (kByPolicy), or when this run lists every item (a backend or recorder that
  // needs them, or leap = false). Costs what the members' KV blocks cost, not an item each. The
  // group's members' num_computed and num_output (and a request's last_token) are brought up to
  // date only when they leave the group: a policy reads them for running()[returned, ...) only, as
  // the loop does. A policy may drop the group again (Batch::clear) but must not then schedule its
  // members one by one in the same batch. REQUIRES: batch is empty.
  virtual DecodeGroup schedule_decode_group(Batch& batch, int64_t max, GroupPreemption preemption) = 0;

  // Moves seq from waiting() to the back of running(); records its first scheduling time. Its first
  // num_cached_tokens tokens came from the prefix cache and count as computed (and, at its first
  // admission, as its cached_tokens).
  // REQUIRES: seq is in waiting(); the policy has already allocated its KV blocks.
  virtual void admit(Sequence* seq, int32_t num_cached_tokens = 0) = 0;
  // Preemption by recompute: frees seq's blocks, forgets its computed tokens (its output so far is
  // kept and recomputed with the prompt), and puts it back in waiting() (at the front under
  // QueueOrder::kFcfs).
  // REQUIRES: seq is in running() and not among the items of the batch being formed (it may be in
  // its decode group, which then shrinks by one).
  virtual void preempt(Sequence* seq) = 0;
  // Gives up on a request that can never be served; `cause` and `reason` are stored with it.
  // REQUIRES: seq is in waiting().
  virtual void reject(Sequence* seq, RejectCause cause, std::string reason) = 0;
  // Holds seq's response until release(): it is not streamed and completes when released
  // (static batching with release = "batch"). REQUIRES: seq is in running() or was just admitted.
  virtual void hold_response(Sequence* seq) = 0;
  // Completes a held response now. REQUIRES: hold_response(seq) was called and seq is done.
  virtual void release(Sequence* seq) = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;

  // Forms the batch for the iteration that starts at `now`. `batch` arrives empty. An empty batch
  // means the replica idles until the next arrival or finish, or until batch.wake_at if set. A
  // policy must make progress: with nothing running and requests waiting, it admits, rejects, or
  // sets wake_at (the simulator fails the run otherwise rather than hang).
  virtual void next_batch(ReplicaView& view, Time now, Batch& batch) = 0;

  virtual std::string_view name() const = 0;
  // The policy's options with every default filled in, for the run's recorded configuration.
  virtual toml::table options() const = 0;

  // Whether the batch this policy just formed repeats while nothing changes from outside: asked
  // only when that batch is the decode group of every running request, and nothing was preempted
  // to form it. True promises that, as long as no request arrives or
  // finishes and every running request's next KV block is found free, the next iterations would
  // be formed of the same requests, one more token each, admitting, preempting and rejecting
  // nobody. The replica may then leap over them (backends/backend.h: decode_run). The
  // default, false, runs every iteration through next_batch.
  virtual bool decode_batch_repeats(ReplicaView& /*view*/) const { return false; }
  // Asked only after decode_batch_repeats said true: whether the batch repeats even as requests
  // arrive, because they would only wait behind a head of the queue that stays blocked (strict
  // first come first served). The replica then leaps past arrivals, up to the first finish or KV
  // block shortage. The default, false, stops a leap at the next arrival.
  virtual bool decode_batch_ignores_arrivals(ReplicaView& /*view*/) const { return false; }

  // Whether the policy keeps pointers to requests that have finished (static batching keeps its
  // batch until every member is done). A streamed run reuses a settled request's memory for the
  // next arrival only when no policy does. Asked once, before the run.
  virtual bool holds_finished_requests() const { return false; }
  // Whether next_batch asks ReplicaView::more_arrivals_expected(), which only the whole run can
  // answer: such a run is not split over threads (sim/sharded.h). Asked once, before the run.
  virtual bool asks_about_arrivals() const { return false; }

  // How the replica orders its waiting queue for this policy; asked once, before the run.
  virtual QueueOrder queue_order() const { return QueueOrder::kFcfs; }
  // How the replica's block manager queues freed blocks for reuse; asked once, before the run.
  virtual FreeOrder kv_free_order() const { return FreeOrder::kHashlessFirst; }
};

}  // namespace servesim
