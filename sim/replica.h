// One model replica: its queue, its running set, its KV block manager, its policy and its backend.
// The simulator drives it: enqueue() at arrivals, start_iteration() when it is idle, and
// finish_iteration() when the iteration's end event fires. The replica applies an iteration's
// results (tokens computed, tokens emitted, requests finished) and reports them to the recorders.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "policies/policy.h"
#include "sim/batch.h"
#include "sim/event_queue.h"
#include "sim/kv_cache.h"
#include "sim/recorder.h"
#include "sim/request.h"

namespace servesim {

// A replica's part in disaggregated serving (SimOptions::roles).
enum class ReplicaRole : uint8_t {
  kBoth,     // prefills and decodes its requests (no disaggregation)
  kPrefill,  // prefills: a request leaves, its KV held here, once it emitted its first token
  kDecode,   // decodes requests prefilled elsewhere, once their KV has moved here
};

// A request prefilled on a prefill replica whose decode replica has just taken KV blocks for it:
// its prompt's KV may now move. cached_tokens of its prompt were in the decode replica's prefix
// cache and need not move.
struct Reservation {
  int32_t slot = 0;
  int32_t cached_tokens = 0;
};

class Replica final : public ReplicaView {
 public:
  // `more_arrivals` points at the simulator's flag; the slot (Request::slot) of every request whose
  // fate is settled here (complete or rejected) is appended to *settled. Both and the recorders outlive the
  // replica.
  Replica(int32_t id, SchedulerLimits limits, int64_t max_model_len, BlockManager kv,
          std::unique_ptr<Policy> policy,
          std::unique_ptr<Backend> backend, std::span<Recorder* const> recorders,
          const bool* more_arrivals, std::vector<int32_t>* settled);

  // A request arrives (status kPending -> kWaiting), or is rejected at once if its prompt alone
  // could never fit in KV memory or reaches the model's context length.
  void enqueue(Request* r, Time now);
  // A request arrives here and is rejected at once, for `reason`.
  void refuse(Request* r, Time now, RejectCause cause, std::string reason);

  // Disaggregated serving. A prefill replica hands a request off when it emits its first token
  // (unless that was its last): the request leaves running() with status kTransferring, still
  // holding its KV blocks here, and its slot is appended to *handoffs; the simulator takes the
  // blocks over until the KV has moved. A decode replica queues such requests first come first
  // served (expect), and at each of its scheduling decisions, after the policy formed its batch
  // without preempting anybody, takes KV blocks for the prompts at the head of that queue while
  // they fit (and while fewer than max_num_seqs requests run or move here), appending each to
  // *reserved; once the KV is in,
  // receive() adds the request to running() to decode its next token.
  // REQUIRES (set_role): before the run; handoffs and reserved outlive the replica.
  void set_role(ReplicaRole role, std::vector<int32_t>* handoffs, std::vector<Reservation>* reserved);
  ReplicaRole role() const { return role_; }
  // REQUIRES: role() is kDecode; r is kTransferring and holds no blocks.
  void expect(Request* r);
  // REQUIRES: r was reserved here.
  void receive(Request* r, Time now);

  // Whether the replica cannot take a batch now: its iteration is in flight; with pipeline stages
  // (Backend::pipeline_stages() > 1), pp batches are in flight, or it formed an empty batch with
  // some in flight and waits for one to complete (see start_iteration).
  bool busy() const { return busy_; }
  // Asks the policy for a batch at `now` and starts it.
  //
  // Pipeline parallelism (pp = Backend::pipeline_stages() > 1), as vLLM's engine with its batch
  // queue (EngineCore.step_with_batch_queue, max_concurrent_batches = pp): up to pp batches are in
  // flight. After a batch starts with fewer than pp in flight the replica may take the next at once
  // (the simulator asks again at the same instant); after an empty batch with some in flight it
  // waits for the oldest to complete, as vLLM's engine blocks on it. As vLLM's scheduler, a batch
  // advances its requests' num_computed when it starts, so that the next chunk of a prompt may go
  // into the next batch, while a request whose token is in flight has nothing to compute and is
  // skipped until its batch completes. Each batch passes the stages in order: it enters stage s
  // when it left stage s - 1 (and its activations arrived) and stage s is free; the returned end is
  // when it leaves the last stage, and the batches complete (finish_iteration) in the order they
  // started. A request preempted while a batch of it is in flight loses that batch's output (vLLM
  // 0.33 delivers the token and holds the request's resumption until it arrives; servesim drops
  // it and lets it resume at once). Decode groups and leaps are off with a pipeline. Returns the iteration's end time, or kNever
  // if the batch was empty (then wake_at() says when the policy wants to be asked again) or the
  // iteration would end past the simulation horizon (then failure() says so, and the run must stop).
  // REQUIRES: !busy()
  Time start_iteration(Time now);
  // Leaping: when the batch just started repeats (Policy::decode_batch_repeats) and the backend can
  // price runs of decodes (Backend::decode_run), leap() extends the iteration in flight over
  // the next ones, up to the first that would start at or after `horizon` (when something from
  // outside may reach this replica), that would need more KV blocks than are free, or that comes
  // after one in which a request finishes. Returns the end of the last iteration covered;
  // finish_iteration then applies them all, and the recorders see every one (on_iteration for the
  // first, on_decode_steps for the rest). The results are exactly those of running the iterations
  // one by one. REQUIRES: busy(), can_leap().
  //
  // Both leaps and decode groups (schedule_decode_group) are off unless enable_grouping(true), and
  // each needs a backend that prices it (Backend::prices_decode_groups, decode_run).
  void enable_grouping(bool on);
  bool can_leap() const { return leapable_; }
  // Whether the leap may go past arrivals (Policy::decode_batch_ignores_arrivals): its horizon is
  // then only the end of time. REQUIRES: can_leap().
  bool leap_ignores_arrivals() const { return ignores_arrivals_; }
  Time leap(Time horizon);
  // Iterations run inside leaps (after the first of each), for benchmarks and tests.
  int64_t leapt_iterations() const { return leapt_; }
  // Requests that arrived while a leap went on past them.
  int64_t arrivals_leapt_past() const { return arrivals_leapt_past_; }

  // Why the replica cannot go on ("" while it can).
  const std::string& failure() const { return failure_; }
  Time wake_at() const { return wake_at_; }
  // Applies the running iteration's results at its end time `now` (with pipeline stages: the
  // oldest batch in flight's). REQUIRES: an iteration in flight.
  void finish_iteration(Time now);
  // The iteration just started ends at `end` instead (a data-parallel rank waits for its group's
  // slowest, SimOptions::lockstep). REQUIRES: busy(), no leap, end >= its own end.
  void stretch_iteration(Time end);
  // Pipeline stages (1: none), and the batches in flight.
  int32_t pipeline_stages() const { return depth_; }
  size_t batches_in_flight() const { return depth_ > 1 ? in_flight_.size() : (busy_ ? 1 : 0); }
  // Brings the decode group's members' num_computed, num_output and last_token up to date (they
  // lag while the group runs; see Sequence::group_ticket), for a reader outside the replica: the
  // requests logged unfinished when a run stops.
  void sync_group();
  // Requests still waiting or running (not done, not rejected), and on a decode replica those
  // whose KV waits for blocks here or is moving here.
  size_t outstanding() const { return waiting_.size() + running_.size() + incoming_.size() + receiving_; }
  int64_t kv_blocks_used() const { return kv_.num_used(); }
  int64_t kv_blocks_total() const { return kv_.num_total(); }
  // For routers: how many of r's leading prompt tokens this replica's prefix cache holds (whole
  // blocks; computes r's block hashes, changes nothing in the cache), and the blocks it caches.
  // REQUIRES: r holds no blocks (not yet sent).
  int64_t cached_prefix_tokens(Request& r) { return kv_.cached_prefix_tokens(r); }
  int64_t cached_blocks() const { return kv_.num_cached(); }

  // ReplicaView
  const std::deque<Sequence*>& waiting() const override { return waiting_; }
  const std::vector<Sequence*>& running() const override { return running_; }
  BlockManager& kv() override { return kv_; }
  const SchedulerLimits& limits() const override { return limits_; }
  bool more_arrivals_expected() const override { return *more_arrivals_; }
  DecodeGroup schedule_decode_group(Batch& batch, int64_t max, GroupPreemption preemption) override;
  void admit(Sequence* seq, int32_t num_cached_tokens = 0) override;
  void preempt(Sequence* seq) override;
  void reject(Sequence* seq, RejectCause cause, std::string reason) override;
  void hold_response(Sequence* seq) override;
  void release(Sequence* seq) override;

 private:
  static Request& req(Sequence* s) { return *static_cast<Request*>(s); }
  static const Request& req(const Sequence* s) { return *static_cast<const Request*>(s); }
  // A decode replica takes blocks for the requests at the head of incoming_ (see set_role).
  void reserve_incoming();
  // Puts seq in waiting_ at its place under QueueOrder::kPriority.
  void insert_by_priority(Sequence* seq);
  void complete(Request& r);
  // When r's client sees what the engine produced at `now`: later by what the request pays outside
  // the engine core (Backend::request_overhead).
  Time client_time(const Request& r, Time now) const;
  // Its last token is out: frees its KV blocks and, unless its response is held, completes it.
  void finish_generation(Request& r);
  // Pipeline stages (replica_pipeline.cc): the batch just formed passes the stages (returns its
  // end, or kNever past the horizon); the oldest batch in flight completes at `now`; an item's
  // output token at `now` (shared with finish_iteration).
  Time start_in_pipeline(Time now);
  void finish_pipelined(Time now);
  void emit_token(BatchItem& item, Request& r, Time now);
  // Takes the requests in leaving_ (done, or handed off) out of running_: by their pointers when
  // leaving_ is in running order (as a rule: the group's members, then the items), by their status
  // otherwise.
  void drop_leaving();
  // Whether the batch just formed may start a leap.
  bool batch_leapable();
  // Applies the leap that ends `now` (its last iteration's end, the event leap() returned).
  void finish_leap(Time now);
  // Whether running request seq may join the decode group (see schedule_decode_group).
  bool decodes_in_step(const Sequence* seq) const;
  // The decode group's members in and out, each brought up to date as it leaves (sync);
  // dissolve_group() empties it.
  void join_group(Sequence* seq);
  void leave_group(Sequence* seq);
  void leave_group_from(uint64_t ticket);  // every member that joined with this ticket or later
  void dissolve_group();
  // A member's lagging counters brought up to date with the group's steps.
  void sync(Sequence* seq) const;
  // A member's num_computed as of now.
  int64_t computed(const Sequence* seq) const { return seq->num_computed + (group_steps_ - seq->group_synced); }
  // Sets bucket b's bit in occupied_ to whether it holds members.
  void note_occupancy(size_t b);
  // Members are filed by (computed() - group_steps_) mod block size, which stays the same as
  // they decode in step: the bucket opens_at_ holds those whose next token opens a block.
  size_t bucket_of(const Sequence* seq) const;
  struct Member;
  // The members whose block allocations change something when the group computes the token at
  // bucket index `opens` (those whose next token opens a block, and with prefix caching those
  // whose next token fills one), in running order: the bucket itself, or with prefix caching
  // touched_. Valid until the buckets change.
  std::span<const Member> touched_members(size_t opens) {
    if (!kv_.prefix_caching() || kv_.block_size() == 1) return buckets_[opens];
    return touched_with_filling(opens);
  }
  std::span<const Member> touched_with_filling(size_t opens);  // with prefix caching
  // leap()'s parts: the buckets that touch (touching_, ascending) for a block size of n; whether
  // the members of bucket `opens` all find a block for their token computed + j + 1 (false: the
  // policy would preempt, so the leap stops there).
  void find_touching(size_t n);
  bool room_to_open(size_t opens, int64_t j) const;
  // Applies a decode iteration ending at `now` to the decode group's `k` steps (the group ran k
  // iterations in a row): the group's counts, and the members whose last token it was, which
  // complete and are appended to leaving_, in running order. Costs what the finishing members
  // cost, not a member each.
  void step_group(Time now, int32_t k);

  const int32_t id_;
  const SchedulerLimits limits_;
  const int64_t max_model_len_;  // 0: no model
  BlockManager kv_;
  std::unique_ptr<Policy> policy_;
  const QueueOrder queue_order_;
  std::unique_ptr<Backend> backend_;
  std::span<Recorder* const> recorders_;
  const bool* more_arrivals_;
  std::vector<int32_t>* settled_;

  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  ReplicaRole role_ = ReplicaRole::kBoth;
  std::vector<int32_t>* handoffs_ = nullptr;
  std::vector<Reservation>* reserved_ = nullptr;
  std::deque<Request*> incoming_;  // decode: waiting for KV blocks here, first come first served
  size_t receiving_ = 0;           // decode: holding blocks here, their KV on the way
  Batch batch_;              // the iteration in flight; its buffer is reused
  IterationRecord record_;   // the iteration in flight
  Time now_ = 0;             // time of the current decision (for admit / release)
  Time wake_at_ = kNever;
  std::string failure_;
  int64_t step_ = 0;
  int32_t preempted_ = 0;    // preemptions while forming the batch in progress
  bool busy_ = false;
  // Pipeline stages (see start_iteration): the batches in flight, oldest first, each with its
  // record and its items' requests' preemption counts when it started; when each stage is free.
  const int32_t depth_;
  struct InFlight {
    Batch batch;
    IterationRecord record;
    std::vector<int32_t> preemptions;
  };
  std::deque<InFlight> in_flight_;
  std::vector<InFlight> spare_;  // finished ones, their buffers reused
  std::vector<Time> stage_free_, stage_time_, send_time_;
  // The decode group: running_[0, group_size_) decode in step, each having emitted its last token
  // at group_end_ (see schedule_decode_group). Kept up to date between iterations: it only grows
  // when asked for, and is forgotten when an iteration ran without it.
  bool grouping_ = false;
  size_t group_size_ = 0;
  bool group_offered_ = false;               // schedule_decode_group gave it to the batch forming
  Time group_end_ = 0;
  int64_t group_context_ = 0;                // its members' computed(), summed
  int32_t group_min_left_ = 0;               // at most the fewest tokens a member has left
  int64_t group_steps_ = 0;                  // iterations the group ran, since ever
  size_t opens_at_ = 0;                      // -group_steps_ mod block size: the bucket whose
                                             // members' next token opens a block
  struct Member {
    uint64_t ticket;  // joining order, which is running order
    Sequence* seq;
  };
  std::vector<std::vector<Member>> buckets_;  // members by bucket_of()
  std::vector<uint64_t> occupied_;           // bit b: whether buckets_[b] holds members
  uint64_t tickets_ = 1;                     // the next member's (0 is none)
  // The members by the group_steps_ after which they have emitted their last token (finish_step()),
  // a min-heap. A member that leaves keeps its entry, which comes back valid when it rejoins with
  // the same finish (one that ran one iteration one by one does); the others' entries go when they
  // come to the top, or when the heap is compacted.
  struct Finish {
    int64_t step;
    Sequence* seq;
  };
  std::vector<Finish> finishes_;
  static bool finishes_later(const Finish& a, const Finish& b) { return a.step > b.step; }
  // The group_steps_ after which member seq has emitted its last token.
  int64_t finish_step(const Sequence* seq) const {
    return seq->group_synced + req(seq).output_tokens - seq->num_output;
  }
  bool finish_valid(const Finish& f) const { return f.seq->group_ticket != 0 && finish_step(f.seq) == f.step; }
  void pop_finish();        // pops finishes_'s top
  void compact_finishes();  // drops the entries that are not valid
  std::vector<Member> touched_;              // see touched_members()
  std::vector<Member> finishing_;            // step_group()'s: the members that finish
  std::vector<const Sequence*> leaving_;     // see drop_leaving()
  // Leaps (see leap()); on with grouping_.
  bool leapable_ = false;                    // the batch in flight may be extended
  bool ignores_arrivals_ = false;            // ... past arrivals
  std::vector<Time> leap_arrivals_;          // when requests joined the queue during the leap
  Time first_end_ = 0;                       // end of the first iteration of the leap in flight
  DecodeDurations leap_run_;                 // the run's durations, from its first iteration on
  bool leap_run_known_ = false;              // leap_run_ is the run of the batch in flight
  int64_t leap_count_ = 0;                   // iterations leapt after the first
  // Where a value changes during a leap: from `iteration` (after the first) on, starting `at`.
  template <typename V>
  struct LeapChange {
    int64_t iteration;
    V value;
    Time at;
  };
  std::vector<LeapChange<int64_t>> leap_kv_changes_;         // the KV blocks used
  std::vector<LeapChange<int32_t>> leap_waiting_changes_;  // the requests waiting
  std::vector<DecodeSteps::Range> leap_ranges_;
  std::vector<size_t> touching_;             // leap()'s: the buckets that touch, ascending
  int64_t leapt_ = 0;
  int64_t arrivals_leapt_past_ = 0;
};

}  // namespace servesim
