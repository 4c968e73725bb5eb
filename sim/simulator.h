// The discrete-event simulation of one run: a workload's requests arrive, are routed to replicas
// (by a router, round robin unless told otherwise; with session affinity, a request that depends on
// others goes where its first parent went, so that a conversation stays with its prefix cache), and
// each replica runs iterations back to back while it has work.
//
// With max_concurrency, a request whose time has come is held until fewer than that many are in
// flight (a closed loop, as `vllm bench serve --max-concurrency`).
//
// A request with parents (RequestSpec::after) arrives when the last of them finishes, plus its think
// time; if a parent is rejected, so is the request.
//
// Order within one instant t: first the events due at t in insertion order (iteration ends, wake-ups,
// dependent arrivals), then every independent arrival at t, repeated while settling requests makes
// more arrivals due at t; then each idle replica, in replica order, forms its next batch. So a
// scheduling decision at t sees every request that arrived at or before t, including those arriving
// at the very instant an iteration ends, and all requests arriving at the same instant together.
//
// Disaggregated (SimOptions::roles): a prefill replica's iteration end hands its prefilled
// requests to decode replicas at once (routed then); a decode replica takes blocks for them when it
// next forms a batch, and their transfers start then; a transfer's end is an event like an
// iteration's, after which both replicas decide again.
#pragma once

#include <atomic>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "policies/policy.h"
#include "routers/router.h"
#include "sim/event_queue.h"
#include "sim/recorder.h"
#include "sim/replica.h"
#include "sim/request.h"
#include "sim/request_stream.h"

namespace servesim {

struct SimOptions {
  int32_t replicas = 1;
  SchedulerLimits limits;
  std::vector<SchedulerLimits> replica_limits;  // per replica; empty: `limits` for every one
  int32_t block_size = 16;           // tokens per KV block
  int64_t kv_blocks = -1;            // KV blocks per replica; -1 = what the backend says
  bool prefix_caching = false;       // automatic prefix caching in the block managers
  // The KV layout's groups besides the first full-attention one (sim/kv_cache.h): kv_groups when
  // kv_groups_set (the run's kv.* keys), else each backend's.
  KvGroups kv_groups;
  bool kv_groups_set = false;
  int32_t default_max_tokens = 0;    // for requests that give no max_tokens; 0: the model's
                                     // context length minus the prompt, else 2048
  int64_t max_model_len = 0;         // the model's context length; 0: no model
  // Closed loop, as `vllm bench serve --max-concurrency`: at most this many requests in flight
  // (sent and not yet finished or rejected); a request whose time has come waits, first come first
  // sent, until one finishes, and its latencies count from when it is sent. 0: open loop.
  int64_t max_concurrency = 0;
  // Group decodes (ReplicaView::schedule_decode_group) and leap over runs of repeating decode
  // iterations where the backend can price them (the roofline; groups also the unit backend) and
  // every recorder accepts them: the results are exactly those of listing every item and running
  // every iteration, only faster. False: run every iteration one by one, every item listed (for
  // checking).
  bool leap = true;
  // Makes the router that picks each independent request's replica (routers/registry.h); empty:
  // round robin.
  std::function<std::unique_ptr<Router>()> router;
  // A request with parents (a conversation's next turn) goes where its first parent went, where its
  // conversation's KV blocks are cached, without asking the router.
  bool session_affinity = true;
  // Disaggregated prefill and decode: each replica's role (empty: every replica does both). A
  // request is sent to a prefill replica (by `router`, among the prefill replicas), emits its first
  // token there, and then goes to a decode replica (by a second router of the same kind, among
  // the decode replicas; with session affinity, where its first parent decoded). The decode
  // replica takes KV blocks for the prompt when it can (Replica::set_role); meanwhile the prefill
  // replica keeps holding them, so a full decode pool stops the prefill pool's admissions (pull
  // transfers, as DistServe and vLLM's NixlConnector). The KV then moves over the link between
  // the two replicas: each replica's link end carries one transfer at a time, first come first
  // served; a transfer takes bytes / min(both ends' bandwidth) + max(both ends' latency), its
  // bytes being the prompt tokens the decode replica's prefix cache lacks times the prefill
  // replica's backend's KV bytes per token.
  std::vector<ReplicaRole> roles;
  struct LinkEnd {
    double bytes_per_second = 0;  // > 0
    Time latency = 0;
  };
  std::vector<LinkEnd> links;  // per replica, with roles
  // Data-parallel ranks that step together (vLLM's DP engines of a mixture of experts): replicas
  // k*lockstep .. (k+1)*lockstep - 1 form each group. A group's ranks start their iterations at
  // once, and each lasts as long as the group's longest; a rank with nothing to run waits for the
  // group (vLLM runs a dummy batch on it), and the group starts again when all are done. Decode
  // groups and leaps are off for them. 0 or 1: every replica steps on its own.
  int32_t lockstep = 0;
  // Threads to simulate on: a run that can be split by replicas (sim/sharded.h) is simulated in
  // that many groups of replicas at once, with the same results. 1: on the caller's thread.
  int32_t threads = 1;
  // One group of a split run (set by ShardedSimulation): this simulator's replicas are the run's
  // replicas first_replica, first_replica + 1, ... of total_replicas, and its requests those that
  // round robin sends them, in order; replicas and requests carry the run's numbers (Replica's id,
  // Request::index). 0: a whole run.
  int32_t first_replica = 0, total_replicas = 0;
};

struct RunResult {
  RunOutcome outcome = RunOutcome::kDone;
  std::string error;       // set when outcome is kFailed
  bool bad_input = false;  // kFailed because of the inputs (a time past the horizon), not a bug
};

class Simulator {
 public:
  // specs: the workload (it must outlive the simulator; independent requests need not be sorted);
  // policies and backends: one each per replica. Recorders are called in the given order and must
  // outlive the simulator. REQUIRES: `after` indices are valid and acyclic; each spec's prompt
  // segments add up to its prompt_tokens.
  Simulator(const std::vector<RequestSpec>& specs, const SimOptions& options,
            std::vector<std::unique_ptr<Policy>> policies,
            std::vector<std::unique_ptr<Backend>> backends, std::vector<Recorder*> recorders);
  // The same over a stream of independent requests (it must outlive the simulator), holding only
  // those in flight: a request's slot is reused once it is settled and recorded, and requests()
  // then holds the slots, not the workload. A request out of order, or one with `after`, fails the
  // run; so does a stream's error (as bad input).
  Simulator(RequestStream& stream, const SimOptions& options,
            std::vector<std::unique_ptr<Policy>> policies,
            std::vector<std::unique_ptr<Backend>> backends, std::vector<Recorder*> recorders);

  // Runs to the end of the workload, or until *stop becomes true (SIGINT). Calls every recorder's
  // on_run_end before returning.
  RunResult run(const std::atomic<bool>* stop = nullptr);
  // A second flag that stops run() as *stop does (a split run's groups stop when one fails).
  void halt_with(const std::atomic<bool>* halt) { halt_ = halt; }

  const std::deque<Request>& requests() const { return requests_; }
  const Replica& replica(int32_t i) const { return *replicas_[static_cast<size_t>(i)]; }
  // Iterations the replicas leapt over (all but the first of every leap).
  int64_t leapt_iterations() const;
  // Requests that arrived at a replica while it leapt on past them.
  int64_t arrivals_leapt_past() const;

 private:
  // What both constructors share: the replicas.
  Simulator(const SimOptions& options, std::vector<std::unique_ptr<Policy>> policies,
            std::vector<std::unique_ptr<Backend>> backends, std::vector<Recorder*> recorders);
  void init_request(Request& r, const RequestSpec& spec, int32_t index, int32_t slot) const;
  // The independent arrivals, from the workload or the stream (sim/arrivals.cc).
  bool has_next_arrival() const;
  Time next_arrival_time() const;  // REQUIRES: has_next_arrival()
  Time arrival_after(size_t m);    // of the m-th next (0: the next); kNever when there is none
  Request& take_arrival();         // REQUIRES: has_next_arrival()
  bool look_ahead(size_t count);   // reads the stream until `count` wait in upcoming_
  static bool settled_in_order(const Request& r);
  static std::string order_error(const Request& r);
  // A request's time to be sent has come: sends it, or holds it while max_concurrency are in flight.
  void arrive(Request& r, Time now);
  // Routes r to a replica at `now`.
  void send(Request& r, Time now);
  // Disaggregated: routes the requests the prefill replicas handed off to decode replicas, takes
  // their KV blocks over from the prefill replica; starts the transfers the decode replicas
  // reserved blocks for; ends a transfer.
  void set_up_pools(const SimOptions& options);  // sim/disaggregation.cc, as the three below
  void hand_off(Time now);
  void start_transfers(Time now);
  void end_transfer(int32_t slot, Time now);
  void settle_dependents(Time now);
  // Starts the iterations of the data-parallel group of replica i together (SimOptions::lockstep)
  // when none of its ranks is busy: each lasts as long as the longest, and the ranks with nothing
  // to run are woken when it ends.
  void start_lockstep(size_t i, Time now);
  // A request's max_concurrency slot is free: the next request held is sent.
  void release_slot(Time now);
  void schedule_idle(Time now);
  // The earliest time at which something from outside may reach replica i, which is idle at `now`
  // and about to start an iteration (see schedule_idle).
  Time horizon(size_t i, Time now);
  RunResult finish(RunResult result);
  bool stopped(const std::atomic<bool>* stop) const;
  // run()'s parts: one event handled at its time; the outcome once no event or arrival is left.
  void dispatch(const Event& e, Time now);
  RunResult finish_drained();
  const std::atomic<bool>* halt_ = nullptr;

  std::deque<Request> requests_;  // by slot (a request's index, unless streamed)
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<Recorder*> recorders_;
  std::vector<Time> pending_wake_;  // per replica, to push each wake-up once
  EventQueue events_;
  std::vector<int32_t> independent_;  // requests without parents, by arrival (stable)
  size_t next_arrival_ = 0;           // into independent_
  std::unique_ptr<Router> router_;
  // Disaggregation (empty pools: off). The router above picks among prefill_pool_.
  std::vector<size_t> prefill_pool_, decode_pool_;
  std::unique_ptr<Router> decode_router_;
  std::vector<SimOptions::LinkEnd> links_;
  std::vector<double> kv_bytes_per_token_;  // per replica, from its backend
  std::vector<Time> link_free_;              // per replica: when its link end is free
  int64_t min_decode_kv_tokens_ = -1;        // the smallest decode replica's KV, in tokens; -1: unlimited
  std::vector<int32_t> handoffs_;            // slots handed off since looked at
  std::vector<Reservation> reserved_;        // reservations made since looked at
  struct Transfer {
    Sequence prefill_blocks;  // the KV blocks it holds on its prefill replica until moved
    TransferRecord record;
  };
  // By slot (grown as needed). A deque: growing it never moves a Transfer, whose prefill_blocks'
  // address the prefix tree keeps as the holder of the blocks it holds (a vector's reallocation
  // left the tree a dangling holder).
  std::deque<Transfer> transfers_;
  bool session_affinity_ = true;
  // Whether every leap stops at the next event anywhere: the router looks at the replicas (all but
  // round robin), or requests move between replicas (disaggregation).
  bool leaps_stop_at_events_ = false;
  // Dependencies: children of request i are children_[child_start_[i] .. child_start_[i + 1]).
  std::vector<int32_t> child_start_, children_;
  std::vector<int32_t> parents_left_;
  std::string failure_;  // why the run cannot go on (a time past the horizon); "" while it can
  std::vector<Time> ready_at_;         // when the last parent so far finished
  int64_t pending_dependents_ = 0;     // dependent requests not arrived (nor rejected) yet
  std::vector<int32_t> settled_;       // settled since last looked at (filled by the replicas)
  bool more_arrivals_ = true;
  int64_t max_concurrency_ = 0;   // 0: unlimited
  int64_t in_flight_ = 0;         // sent, not settled
  std::deque<int32_t> held_;      // due, waiting for a slot under max_concurrency (slots)
  std::string bug_;               // an inconsistency found in a streamed request
  const int64_t max_model_len_;
  const int32_t default_max_tokens_;
  // Streaming: the stream, the slots free for reuse, and the next requests read ahead (for the
  // replicas' horizons). Specs a stream gives in place stay there; those it makes are kept in
  // read_ while ahead, and by slot in specs_ while in flight.
  RequestStream* stream_ = nullptr;
  bool in_place_ = false;
  std::deque<RequestSpec> specs_;
  std::vector<int32_t> free_slots_;
  bool reuse_slots_ = true;  // false when a policy keeps finished requests (static batching)
  std::deque<const RequestSpec*> upcoming_;
  std::deque<RequestSpec> read_;
  bool stream_done_ = false;
  Time last_streamed_ = 0;
  int64_t streamed_ = 0;
  int32_t first_replica_ = 0, total_replicas_ = 0;  // SimOptions'
  // Leaps. With an open loop and no request after several others, a replica receives only the
  // independent arrivals that round robin sends it and the dependent requests that follow its own
  // requests; otherwise anything in flight anywhere may send it a request.
  int32_t lockstep_ = 0;  // SimOptions::lockstep
  bool narrow_horizons_ = true;
  // Per replica: arrival times of the dependent requests it will receive (events pushed).
  std::vector<std::priority_queue<Time, std::vector<Time>, std::greater<>>> child_arrivals_;
  struct Starting {
    size_t replica;
    Time end;  // of its first iteration, or kNever when it did not start one
  };
  std::vector<Starting> starting_;  // schedule_idle's replicas (reused)
  // The replicas whose next decision may have changed since schedule_idle last asked them (a request
  // sent to them, an iteration ended, a wake-up, the end of arrivals): only these are asked, so that
  // an event costs the same whatever the number of replicas. Each at most once in touched_.
  void touch(size_t replica) {
    if (touched_flag_[replica] == 0) {
      touched_flag_[replica] = 1;
      touched_.push_back(replica);
    }
  }
  std::vector<size_t> touched_;
  std::vector<uint8_t> touched_flag_;
};

}  // namespace servesim
