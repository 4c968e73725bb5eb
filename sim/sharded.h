// A run split by replicas over threads (SimOptions::threads). Under round robin, with independent
// requests and an open loop, a replica's schedule depends on nothing but the requests sent to it:
// the k-th request goes to replica k mod replicas whatever the others do. Such a run is simulated
// as groups of consecutive replicas, each a Simulator on a thread of its own, reading its requests
// from one shared stream (StreamSplitter) and reporting to recorders of its own (Recorder::shard);
// at the end each recorder absorbs its shards, in group order. The rows and metrics are those of
// the run on one thread; only the order in which rows of different replicas reach the recorders
// (and so the database's rowids) differs, and it is the same from run to run.
//
// Not split (ShardedSimulation::possible is false): other routers (they read the replicas' state),
// disaggregation, max_concurrency, requests with parents (not a stream), a policy that asks
// whether more requests will arrive (static batching), a recorder that cannot shard (a per-batch
// log, a test's checker), or one replica.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "policies/policy.h"
#include "sim/recorder.h"
#include "sim/request_stream.h"
#include "sim/simulator.h"

namespace servesim {

// One stream read by several groups of a split run: the k-th request goes to the group holding
// replica k mod replicas. Each group's part() gives its requests in order; a group reading reads
// until it has kBatch of its own, and keeps the others' in their queues (copies, unless the stream
// gives its requests in place), which each takes whole when it needs more. A queue holds at most
// kAhead requests: the group that would add another waits until its owner takes them, so memory
// follows the gap between the groups, not the workload. The order the simulator checks (arrivals
// non-decreasing, within the horizon, no parents) is checked here for the whole stream, with the
// simulator's message.
class StreamSplitter {
 public:
  static constexpr size_t kBatch = 64;
  static constexpr size_t kAhead = size_t{1} << 16;

  // group_of: per replica, its group (0 .. groups - 1). REQUIRES: source outlives this.
  StreamSplitter(RequestStream& source, std::vector<int32_t> group_of);
  RequestStream& part(size_t group);
  // Ends every part's stream at once (a group failed, or the run was stopped): nothing waits.
  void stop();

 private:
  class Part;
  // Reads the source until `group`'s queue holds kBatch requests or the source ends. Under mutex_.
  void read_for(size_t group, std::unique_lock<std::mutex>& lock);

  RequestStream& source_;
  const bool in_place_;
  const std::vector<int32_t> group_of_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::mutex mutex_;
  std::condition_variable taken_;  // a part took its queue (room in it)
  int64_t read_ = 0;               // requests read from the source
  Time last_ = 0;                  // the last one's arrival
  bool ended_ = false;             // the source gave its last, failed, or stop()
  std::string error_;              // why it failed
};

class ShardedSimulation {
 public:
  // Whether a run of these options, policies and recorders over a stream can be split.
  static bool possible(const SimOptions& options, const std::vector<std::unique_ptr<Policy>>& policies,
                       const std::vector<Recorder*>& recorders);
  // REQUIRES: possible(options, policies, recorders); as Simulator's streaming constructor.
  ShardedSimulation(RequestStream& stream, const SimOptions& options,
                    std::vector<std::unique_ptr<Policy>> policies,
                    std::vector<std::unique_ptr<Backend>> backends, std::vector<Recorder*> recorders);
  ~ShardedSimulation();

  // Runs every group to its end, or until *stop becomes true; then each recorder absorbs its
  // shards and ends the run. The outcome: the first group's failure (in group order) if any
  // failed, else interrupted if any was, else done.
  RunResult run(const std::atomic<bool>* stop = nullptr);

  int32_t groups() const { return static_cast<int32_t>(groups_.size()); }

 private:
  struct Group {
    std::vector<std::unique_ptr<Recorder>> recorders;  // shards of the run's, in their order
    std::unique_ptr<Simulator> sim;
    RunResult result;
  };
  std::vector<Recorder*> recorders_;
  std::unique_ptr<StreamSplitter> splitter_;
  std::vector<Group> groups_;
  std::atomic<bool> halt_{false};
};

}  // namespace servesim
