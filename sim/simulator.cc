#include "sim/simulator.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace servesim {

Simulator::Simulator(const std::vector<RequestSpec>& specs, const SimOptions& options,
                     std::vector<std::unique_ptr<Policy>> policies,
                     std::vector<std::unique_ptr<Backend>> backends,
                     std::vector<Recorder*> recorders)
    : recorders_(std::move(recorders)) {
  assert(options.replicas >= 1);
  assert(policies.size() == static_cast<size_t>(options.replicas));
  assert(backends.size() == policies.size());
  requests_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const RequestSpec& spec = specs[i];
    assert(i == 0 || specs[i - 1].arrival <= spec.arrival);
    Request& r = requests_[i];
    r.spec = &spec;
    r.index = static_cast<int32_t>(i);
    r.arrival = spec.arrival;
    r.prompt_tokens = spec.prompt_tokens;
    r.max_tokens = spec.max_tokens > 0 ? spec.max_tokens : options.default_max_tokens;
    r.output_tokens = std::min(spec.output_tokens, r.max_tokens);  // the engine stops at max_tokens
    r.capped = spec.output_tokens > r.max_tokens;
  }
  for (int32_t i = 0; i < options.replicas; ++i) {
    auto& backend = backends[static_cast<size_t>(i)];
    const int64_t blocks =
        options.kv_blocks >= 0 ? options.kv_blocks : backend->kv_blocks(options.block_size);
    replicas_.push_back(std::make_unique<Replica>(
        i, options.limits, BlockManager(options.block_size, blocks),
        std::move(policies[static_cast<size_t>(i)]), std::move(backend), recorders_,
        &more_arrivals_));
  }
  pending_wake_.assign(replicas_.size(), kNever);
  more_arrivals_ = !requests_.empty();
}

void Simulator::schedule_idle(Time now) {
  for (size_t i = 0; i < replicas_.size(); ++i) {
    Replica& rep = *replicas_[i];
    if (rep.busy()) continue;
    const Time end = rep.start_iteration(now);
    const auto id = static_cast<int32_t>(i);
    if (end != kNever) {
      events_.push(end, EventKind::kIterationEnd, id);
    } else if (rep.wake_at() != kNever && rep.wake_at() > now && rep.wake_at() != pending_wake_[i]) {
      pending_wake_[i] = rep.wake_at();
      events_.push(rep.wake_at(), EventKind::kWake, id);
    }
  }
}

RunResult Simulator::run(const std::atomic<bool>* stop) {
  const size_t n = requests_.size();
  const auto num_replicas = replicas_.size();
  size_t round_robin = 0;
  while (true) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
      return finish({RunOutcome::kInterrupted, ""});
    }
    Time now = kNever;
    if (next_arrival_ < n) now = requests_[next_arrival_].arrival;
    if (!events_.empty()) now = std::min(now, events_.top().time);
    if (now == kNever) break;

    while (!events_.empty() && events_.top().time == now) {
      const Event e = events_.pop();
      if (e.kind == EventKind::kIterationEnd) {
        replicas_[static_cast<size_t>(e.replica)]->finish_iteration(now);
      } else {
        pending_wake_[static_cast<size_t>(e.replica)] = kNever;
      }
    }
    while (next_arrival_ < n && requests_[next_arrival_].arrival == now) {
      Request& r = requests_[next_arrival_++];
      replicas_[round_robin]->enqueue(&r, now);
      round_robin = (round_robin + 1) % num_replicas;
    }
    more_arrivals_ = next_arrival_ < n;
    schedule_idle(now);
  }

  // No events and no arrivals left: every request must be settled, or a policy stopped making
  // progress (which would otherwise have been a hang).
  size_t stuck = 0;
  for (const auto& rep : replicas_) stuck += rep->outstanding();
  if (stuck > 0) {
    return finish({RunOutcome::kFailed,
                   "the policy stopped making progress with " + std::to_string(stuck) +
                       " requests waiting or running (a bug in the policy)"});
  }
  return finish({RunOutcome::kDone, ""});
}

RunResult Simulator::finish(RunResult result) {
  if (result.outcome != RunOutcome::kDone) {
    // Arrived requests that never completed are logged as unfinished.
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
