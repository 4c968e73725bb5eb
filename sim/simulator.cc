#include "sim/simulator.h"

#include "sim/replicas_view.h"
#include "sim/format_number.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <utility>

namespace servesim {

Simulator::Simulator(const SimOptions& options, std::vector<std::unique_ptr<Policy>> policies,
                     std::vector<std::unique_ptr<Backend>> backends, std::vector<Recorder*> recorders)
    : recorders_(std::move(recorders)),
      max_concurrency_(options.max_concurrency),
      max_model_len_(options.max_model_len),
      default_max_tokens_(options.default_max_tokens) {
  assert(options.replicas >= 1);
  first_replica_ = options.first_replica;
  total_replicas_ = options.total_replicas;
  assert(policies.size() == static_cast<size_t>(options.replicas));
  assert(backends.size() == policies.size());
  assert(options.roles.empty() || (options.roles.size() == policies.size() && options.links.size() == policies.size()));
  for (int32_t i = 0; i < options.replicas; ++i) {
    auto& backend = backends[static_cast<size_t>(i)];
    if (!options.roles.empty()) kv_bytes_per_token_.push_back(backend->kv_bytes_per_block() / options.block_size);
    const int64_t blocks =
        options.kv_blocks >= 0 ? options.kv_blocks : backend->kv_blocks(options.block_size);
    std::unique_ptr<Policy>& policy = policies[static_cast<size_t>(i)];
    const FreeOrder free_order = policy->kv_free_order();
    if (policy->holds_finished_requests()) reuse_slots_ = false;
    const SchedulerLimits& limits = options.replica_limits.empty() ? options.limits : options.replica_limits[static_cast<size_t>(i)];
    KvGroups groups = options.kv_groups_set ? options.kv_groups : backend->kv_groups();
    groups.set_admission_cap(options.block_size, limits.max_num_batched_tokens, options.max_model_len);
    replicas_.push_back(std::make_unique<Replica>(
        options.first_replica + i, options.replica_limits.empty() ? options.limits : options.replica_limits[static_cast<size_t>(i)],
        options.max_model_len,
        BlockManager(options.block_size, blocks, options.prefix_caching, free_order, groups),
        std::move(policy), std::move(backend), recorders_,
        &more_arrivals_, &settled_));
  }
  pending_wake_.assign(replicas_.size(), kNever);
  touched_flag_.assign(replicas_.size(), 0);
  for (size_t i = 0; i < replicas_.size(); ++i) touch(i);
  child_arrivals_.resize(replicas_.size());
  const bool leaps = options.leap && std::all_of(recorders_.begin(), recorders_.end(), [](const Recorder* r) {
                       return r->accepts_grouped_decodes();
                     });
  lockstep_ = options.lockstep > 1 ? options.lockstep : 0;
  for (auto& rep : replicas_) rep->enable_grouping(leaps && lockstep_ == 0);
  if (max_concurrency_ > 0 || lockstep_ > 0) narrow_horizons_ = false;
  router_ = options.router ? options.router() : make_round_robin_router();
  session_affinity_ = options.session_affinity;
  // A router that reads the replicas' state may send the next request anywhere: every replica's
  // horizon is then the next arrival anywhere, and no leap goes past an arrival (the state a router
  // reads at an arrival is the state of stepping there). So with disaggregation (set_up_pools).
  leaps_stop_at_events_ = !router_->next_in_turn().has_value();
  if (leaps_stop_at_events_ || !session_affinity_) narrow_horizons_ = false;
  if (!options.roles.empty()) set_up_pools(options);
}


Simulator::Simulator(const std::vector<RequestSpec>& specs, const SimOptions& options,
                     std::vector<std::unique_ptr<Policy>> policies,
                     std::vector<std::unique_ptr<Backend>> backends,
                     std::vector<Recorder*> recorders)
    : Simulator(options, std::move(policies), std::move(backends), std::move(recorders)) {
  const size_t n = specs.size();
  requests_.resize(n);
  child_start_.assign(n + 1, 0);
  parents_left_.assign(n, 0);
  ready_at_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const RequestSpec& spec = specs[i];
    init_request(requests_[i], spec, static_cast<int32_t>(i), static_cast<int32_t>(i));
    parents_left_[i] = static_cast<int32_t>(spec.after.size());
    for (int32_t p : spec.after) ++child_start_[static_cast<size_t>(p) + 1];
    if (spec.after.empty()) independent_.push_back(static_cast<int32_t>(i));
    if (spec.after.size() > 1) narrow_horizons_ = false;
  }
  pending_dependents_ = static_cast<int64_t>(n - independent_.size());
  std::partial_sum(child_start_.begin(), child_start_.end(), child_start_.begin());
  children_.resize(static_cast<size_t>(child_start_[n]));
  std::vector<int32_t> fill(child_start_.begin(), child_start_.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t p : specs[i].after) children_[static_cast<size_t>(fill[static_cast<size_t>(p)]++)] = static_cast<int32_t>(i);
  }
  auto by_arrival = [&](int32_t a, int32_t b) {
    return requests_[static_cast<size_t>(a)].arrival < requests_[static_cast<size_t>(b)].arrival;
  };
  if (!std::is_sorted(independent_.begin(), independent_.end(), by_arrival)) {
    std::stable_sort(independent_.begin(), independent_.end(), by_arrival);
  }
  more_arrivals_ = !requests_.empty();
}

Simulator::Simulator(RequestStream& stream, const SimOptions& options,
                     std::vector<std::unique_ptr<Policy>> policies,
                     std::vector<std::unique_ptr<Backend>> backends,
                     std::vector<Recorder*> recorders)
    : Simulator(options, std::move(policies), std::move(backends), std::move(recorders)) {
  stream_ = &stream;
  in_place_ = stream.gives_in_place();
  look_ahead(1);
  more_arrivals_ = !upcoming_.empty();
}

void Simulator::arrive(Request& r, Time now) {
  r.due = now;
  if (max_concurrency_ > 0 && in_flight_ >= max_concurrency_) {
    held_.push_back(r.slot);
    return;
  }
  send(r, now);
}

void Simulator::send(Request& r, Time now) {
  r.arrival = now;
  ++in_flight_;
  size_t target;
  if (!r.spec->after.empty() && session_affinity_) {
    // Follow the first parent, whose KV blocks are cached there.
    target = static_cast<size_t>(requests_[static_cast<size_t>(r.spec->after.front())].replica);
  } else if (!prefill_pool_.empty()) {
    const size_t k = router_->route(r, ReplicasView(replicas_, &prefill_pool_));
    assert(k < prefill_pool_.size());
    target = prefill_pool_[k];
  } else {
    target = router_->route(r, ReplicasView(replicas_));
    assert(target < replicas_.size());
  }
  if (min_decode_kv_tokens_ >= 0 && r.prompt_tokens > min_decode_kv_tokens_) {
    // Its KV could never move to some decode replica: refused at once, as a prompt too large for
    // the cache is.
    replicas_[target]->refuse(&r, now, RejectCause::kKvCapacity,
                              "prompt of " + std::to_string(r.prompt_tokens) + " tokens does not fit the " +
                                  std::to_string(min_decode_kv_tokens_) +
                                  " tokens of KV of the smallest decode replica");
  } else {
    replicas_[target]->enqueue(&r, now);
  }
  touch(target);
}

void Simulator::release_slot(Time now) {
  --in_flight_;
  if (held_.empty()) return;
  // Sent through the event queue, so that the scheduling at `now` sees it even when this runs
  // after the replicas formed their batches.
  events_.push(now, EventKind::kSend, held_.front());
  held_.pop_front();
  ++in_flight_;  // its slot is taken now
}

void Simulator::settle_dependents(Time now) {
  // Looping by index: a rejected child is settled here too, and its own children follow.
  for (size_t k = 0; k < settled_.size(); ++k) {
    const auto p = static_cast<size_t>(settled_[k]);
    const Request& parent = requests_[p];
    if (parent.replica >= 0) {
      // It was sent: its slot comes free for the next request held when its client has the
      // response (the API server's time after the engine's, Backend::request_overhead).
      if (parent.finished > now) {
        events_.push(parent.finished, EventKind::kRelease, 0);
      } else {
        release_slot(now);
      }
    }
    if (stream_ != nullptr) {
      // Nothing follows a streamed request: its memory is free for the next arrival.
      if (!settled_in_order(parent) && bug_.empty()) bug_ = order_error(parent);
      if (reuse_slots_) free_slots_.push_back(static_cast<int32_t>(p));
      continue;
    }
    for (int32_t c = child_start_[p]; c < child_start_[p + 1]; ++c) {
      const auto ci = static_cast<size_t>(children_[static_cast<size_t>(c)]);
      Request& child = requests_[ci];
      if (child.status != RequestStatus::kPending) continue;  // already rejected
      if (parent.status == RequestStatus::kRejected) {
        child.status = RequestStatus::kRejected;
        child.arrival = now;
        child.reason = "its parent '" + parent.id() + "' was rejected";
        child.cause = RejectCause::kParentRejected;
        --pending_dependents_;
        for (Recorder* rec : recorders_) rec->on_request(child);
        settled_.push_back(static_cast<int32_t>(ci));
        continue;
      }
      ready_at_[ci] = std::max(ready_at_[ci], parent.finished);
      if (--parents_left_[ci] == 0) {
        const Time at = add_time(ready_at_[ci], child.spec->think_time);
        if (at == kNever) {
          if (failure_.empty()) {
            failure_ = "request '" + child.id() + "' would arrive past the simulation horizon " +
                       "of 1e9 s (its parents finish at " + format_number(to_seconds(ready_at_[ci])) +
                       " s, and its think_time is " + format_number(to_seconds(child.spec->think_time)) +
                       " s)";
          }
          continue;
        }
        events_.push(at, EventKind::kArrival, static_cast<int32_t>(ci));
        child_arrivals_[static_cast<size_t>(requests_[static_cast<size_t>(child.spec->after.front())].replica)].push(at);
      }
    }
  }
  settled_.clear();
}

void Simulator::schedule_idle(Time now) {
  // First every idle replica forms its batch; then those whose batch repeats leap, knowing when the
  // others' first iterations end; the events go in, in replica order.
  starting_.clear();
  // In replica order, as if every replica were asked (those untouched would not start anything).
  std::sort(touched_.begin(), touched_.end());
  for (const size_t i : touched_) {
    touched_flag_[i] = 0;
    Replica& rep = *replicas_[i];
    if (rep.busy()) continue;
    if (lockstep_ > 0) {
      start_lockstep(i, now);
      continue;
    }
    starting_.push_back({i, rep.start_iteration(now)});
    // A pipeline takes the next batch at once while it has room (vLLM's batch queue).
    while (starting_.back().end != kNever && !rep.busy()) starting_.push_back({i, rep.start_iteration(now)});
    if (!rep.failure().empty() && failure_.empty()) failure_ = rep.failure();
  }
  touched_.clear();
  // The transfers that decode replicas took blocks for start now; their ends bound the leaps.
  if (!reserved_.empty()) start_transfers(now);
  // A request settled while scheduling (a rejection) may release another at `now`, which under a
  // wide horizon any replica may receive before its first iteration ends.
  const bool leaps = failure_.empty() && (narrow_horizons_ || settled_.empty());
  for (const Starting& s : starting_) {
    Replica& rep = *replicas_[s.replica];
    const auto id = static_cast<int32_t>(s.replica);
    if (s.end != kNever) {
      const Time end = !leaps || !rep.can_leap() ? s.end
                       : rep.leap(rep.leap_ignores_arrivals() && !leaps_stop_at_events_ ? kNever
                                                                                      : horizon(s.replica, now));
      events_.push(end, EventKind::kIterationEnd, id);
    } else if (rep.wake_at() != kNever && rep.wake_at() > now &&
               rep.wake_at() != pending_wake_[s.replica]) {
      pending_wake_[s.replica] = rep.wake_at();
      events_.push(rep.wake_at(), EventKind::kWake, id);
    }
  }
}

void Simulator::start_lockstep(size_t i, Time now) {
  const size_t first = i / static_cast<size_t>(lockstep_) * static_cast<size_t>(lockstep_);
  const size_t last = std::min(first + static_cast<size_t>(lockstep_), replicas_.size());
  for (size_t r = first; r < last; ++r) {
    if (replicas_[r]->busy() || (pending_wake_[r] != kNever && pending_wake_[r] > now)) return;  // mid-step
  }
  Time end = kNever;
  const size_t from = starting_.size();
  for (size_t r = first; r < last; ++r) {
    touched_flag_[r] = 0;
    const Time e = replicas_[r]->start_iteration(now);
    if (!replicas_[r]->failure().empty() && failure_.empty()) failure_ = replicas_[r]->failure();
    if (e != kNever) end = end == kNever ? e : std::max(end, e);
    starting_.push_back({r, e});
  }
  if (end == kNever) return;  // the whole group is idle
  for (size_t k = from; k < starting_.size(); ++k) {
    const size_t r = starting_[k].replica;
    if (starting_[k].end != kNever) {
      replicas_[r]->stretch_iteration(end);  // as long as the slowest rank
      starting_[k].end = end;
    } else if (pending_wake_[r] != end) {
      // Nothing to run: it steps with the group (vLLM's dummy batch) and looks again when it ends.
      pending_wake_[r] = end;
      events_.push(end, EventKind::kWake, static_cast<int32_t>(r));
    }
  }
}

Time Simulator::horizon(size_t i, Time now) {
  if (narrow_horizons_) {
    // Round robin sends replica i the m-th next independent request.
    const size_t count = replicas_.size();
    const size_t m = (i + count - *router_->next_in_turn()) % count;
    Time h = arrival_after(m);
    if (!child_arrivals_[i].empty()) h = std::min(h, child_arrivals_[i].top());
    return h;
  }
  // Anything may happen at the next event anywhere, or when another replica's first iteration
  // ends (its leap, if any, ends later and finishes nothing earlier).
  Time h = has_next_arrival() ? next_arrival_time() : kNever;
  if (!events_.empty()) h = std::min(h, events_.top().time);
  for (const Starting& s : starting_) {
    if (s.replica != i && s.end != kNever) h = std::min(h, s.end);
  }
  return std::max(h, now);
}

int64_t Simulator::arrivals_leapt_past() const {
  int64_t n = 0;
  for (const auto& rep : replicas_) n += rep->arrivals_leapt_past();
  return n;
}

int64_t Simulator::leapt_iterations() const {
  int64_t n = 0;
  for (const auto& rep : replicas_) n += rep->leapt_iterations();
  return n;
}

bool Simulator::stopped(const std::atomic<bool>* stop) const {
  return (stop != nullptr && stop->load(std::memory_order_relaxed)) ||
         (halt_ != nullptr && halt_->load(std::memory_order_relaxed));
}

void Simulator::dispatch(const Event& e, Time now) {
  const auto t = static_cast<size_t>(e.target);
  switch (e.kind) {
    case EventKind::kIterationEnd:
      replicas_[t]->finish_iteration(now);
      touch(t);
      if (!handoffs_.empty()) hand_off(now);
      break;
    case EventKind::kTransferEnd:
      end_transfer(e.target, now);
      break;
    case EventKind::kWake:
      pending_wake_[t] = kNever;
      touch(t);
      break;
    case EventKind::kArrival:
      --pending_dependents_;
      child_arrivals_[static_cast<size_t>(requests_[static_cast<size_t>(requests_[t].spec->after.front())].replica)].pop();
      arrive(requests_[t], now);
      break;
    case EventKind::kSend:
      --in_flight_;  // send() takes the slot reserved for it
      send(requests_[t], now);
      break;
    case EventKind::kRelease:
      release_slot(now);
      break;
  }
}

RunResult Simulator::run(const std::atomic<bool>* stop) {
  while (true) {
    if (stopped(stop)) {
      return finish({RunOutcome::kInterrupted, ""});
    }
    if (!failure_.empty()) return finish({RunOutcome::kFailed, failure_, true});
    if (!bug_.empty()) return finish({RunOutcome::kFailed, bug_});
    Time now = kNever;
    if (has_next_arrival()) now = next_arrival_time();
    if (!events_.empty()) now = std::min(now, events_.top().time);
    if (now == kNever) break;

    do {
      while (!events_.empty() && events_.top().time == now) dispatch(events_.pop(), now);
      for (int64_t k = 1; has_next_arrival() && next_arrival_time() == now; ++k) {
        arrive(take_arrival(), now);
        // A burst of a million arrivals at one instant still heeds Ctrl-C.
        if (k % 4096 == 0 && stopped(stop)) {
          return finish({RunOutcome::kInterrupted, ""});
        }
      }
      // Requests that finished just now release children with no think time: they arrive now too.
      settle_dependents(now);
    } while (!events_.empty() && events_.top().time == now);
    // Waiting can still bring an arrival if one is due, or if something in flight (an iteration, a
    // scheduled dependent arrival) may release one. Dependent requests whose parents merely wait,
    // and requests held by max_concurrency while every request in flight merely waits, do not
    // count: a policy waiting for them would wait forever.
    const bool more = has_next_arrival() || ((pending_dependents_ > 0 || !held_.empty()) && !events_.empty());
    if (more != more_arrivals_) {
      // A policy that waited for more arrivals (a static batch filling up) decides otherwise now.
      for (size_t i = 0; i < replicas_.size(); ++i) {
        if (replicas_[i]->outstanding() > 0) touch(i);
      }
    }
    more_arrivals_ = more;
    schedule_idle(now);
    settle_dependents(now);  // releases and rejections made while scheduling
  }
  return finish_drained();
}

// No events and no arrivals left: every request must be settled, or a policy stopped making
// progress (which would otherwise have been a hang).
RunResult Simulator::finish_drained() {
  size_t stuck = 0;
  for (const auto& rep : replicas_) stuck += rep->outstanding();
  if (stuck > 0) {
    return finish({RunOutcome::kFailed,
                   "the policy stopped making progress with " + std::to_string(stuck) +
                       " requests waiting or running (a bug in the policy)"});
  }
  if (!failure_.empty()) return finish({RunOutcome::kFailed, failure_, true});
  if (!bug_.empty()) return finish({RunOutcome::kFailed, bug_});
  // A done run has settled every request, at times inside the horizon, in order (a streamed one
  // was checked when its slot was freed).
  if (stream_ == nullptr) {
    for (const Request& r : requests_) {
      if (!settled_in_order(r)) return finish({RunOutcome::kFailed, order_error(r)});
    }
  }
  return finish({RunOutcome::kDone, ""});
}

bool Simulator::settled_in_order(const Request& r) {
  if (r.status == RequestStatus::kRejected) return true;
  const bool finished = r.status == RequestStatus::kDone && r.finished >= 0;
  return finished && r.arrival >= 0 && r.scheduled >= r.arrival && r.first_token >= r.scheduled &&
         r.finished >= r.first_token && r.finished <= kTimeHorizon;
}

std::string Simulator::order_error(const Request& r) {
  return "request '" + r.id() + "' did not finish in order inside the horizon " +
         "(a bug: please report it with the workload)";
}

RunResult Simulator::finish(RunResult result) {
  if (result.outcome != RunOutcome::kDone) {
    // Arrived requests that never completed are logged as unfinished, with the tokens they got.
    for (const auto& rep : replicas_) rep->sync_group();
    for (const Request& r : requests_) {
      const bool arrived = r.status != RequestStatus::kPending;
      const bool settled = r.status == RequestStatus::kRejected || r.finished >= 0;
      if (arrived && !settled) {
        for (Recorder* rec : recorders_) rec->on_request(r);
      }
    }
  }
  for (Recorder* rec : recorders_) rec->on_run_end(result.outcome, result.error);
  return result;
}

}  // namespace servesim
