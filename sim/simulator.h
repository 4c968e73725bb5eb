// The discrete-event simulation of one run: a workload's requests arrive, are routed to replicas
// (round robin), and each replica runs iterations back to back while it has work.
//
// Order within one instant t: first the events due at t in insertion order (iteration ends, wake-ups),
// then every arrival at t, then each idle replica, in replica order, forms its next batch. So a
// scheduling decision at t sees every request that arrived at or before t, including those arriving
// at the very instant an iteration ends, and all requests arriving at the same instant together.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "policies/policy.h"
#include "sim/event_queue.h"
#include "sim/recorder.h"
#include "sim/replica.h"
#include "sim/request.h"

namespace servesim {

struct SimOptions {
  int32_t replicas = 1;
  SchedulerLimits limits;
  int32_t block_size = 16;           // tokens per KV block
  int64_t kv_blocks = -1;            // KV blocks per replica; -1 = what the backend says
  int32_t default_max_tokens = 2048; // for requests that do not give max_tokens
};

struct RunResult {
  RunOutcome outcome = RunOutcome::kDone;
  std::string error;  // set when outcome is kFailed
};

class Simulator {
 public:
  // specs: sorted by arrival. policies and backends: one each per replica. Recorders are called in
  // the given order and must outlive the simulator.
  Simulator(const std::vector<RequestSpec>& specs, const SimOptions& options,
            std::vector<std::unique_ptr<Policy>> policies,
            std::vector<std::unique_ptr<Backend>> backends, std::vector<Recorder*> recorders);

  // Runs to the end of the workload, or until *stop becomes true (SIGINT). Calls every recorder's
  // on_run_end before returning.
  RunResult run(const std::atomic<bool>* stop = nullptr);

  const std::vector<Request>& requests() const { return requests_; }
  const Replica& replica(int32_t i) const { return *replicas_[static_cast<size_t>(i)]; }

 private:
  void schedule_idle(Time now);
  RunResult finish(RunResult result);

  std::vector<Request> requests_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<Recorder*> recorders_;
  std::vector<Time> pending_wake_;  // per replica, to push each wake-up once
  EventQueue events_;
  size_t next_arrival_ = 0;
  bool more_arrivals_ = true;
};

}  // namespace servesim
