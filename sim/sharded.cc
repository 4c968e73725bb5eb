#include "sim/sharded.h"

#include <algorithm>
#include <cassert>
#include <thread>
#include <utility>

#include "routers/router.h"

namespace servesim {

// One group's stream: its queue of the shared stream's requests, which it takes whole into a
// queue of its own when that is empty, so that it locks once for many requests.
class StreamSplitter::Part final : public RequestStream {
 public:
  Part(StreamSplitter& splitter, size_t group) : splitter_(splitter), group_(group) {}

  bool next(RequestSpec& spec) override {
    if (own_copies_.empty() && !take()) return false;
    spec = std::move(own_copies_.front());
    own_copies_.pop_front();
    return true;
  }
  const RequestSpec* next_in_place() override {
    if (own_places_.empty() && !take()) return nullptr;
    const RequestSpec* spec = own_places_.front();
    own_places_.pop_front();
    return spec;
  }
  bool gives_in_place() const override { return splitter_.in_place_; }
  const std::string& error() const override { return error_; }

  // Under the splitter's lock:
  size_t queued() const { return splitter_.in_place_ ? places_.size() : copies_.size(); }
  void add(const RequestSpec* spec, RequestSpec&& copy) {
    if (splitter_.in_place_) {
      places_.push_back(spec);
    } else {
      copies_.push_back(std::move(copy));
    }
  }

 private:
  // Takes the queue (reading for it if need be); false when nothing is left, and then error_
  // says why, if the stream failed.
  bool take() {
    std::unique_lock<std::mutex> lock(splitter_.mutex_);
    if (queued() == 0) splitter_.read_for(group_, lock);
    if (queued() == 0) {
      error_ = splitter_.error_;
      return false;
    }
    places_.swap(own_places_);
    copies_.swap(own_copies_);
    splitter_.taken_.notify_all();  // room in the queue, for a group waiting to add to it
    return true;
  }

  StreamSplitter& splitter_;
  const size_t group_;
  std::deque<const RequestSpec*> places_, own_places_;  // in place
  std::deque<RequestSpec> copies_, own_copies_;         // else
  std::string error_;
};

StreamSplitter::StreamSplitter(RequestStream& source, std::vector<int32_t> group_of)
    : source_(source), in_place_(source.gives_in_place()), group_of_(std::move(group_of)) {
  const int32_t groups = *std::max_element(group_of_.begin(), group_of_.end()) + 1;
  for (int32_t g = 0; g < groups; ++g) parts_.push_back(std::make_unique<Part>(*this, static_cast<size_t>(g)));
}

RequestStream& StreamSplitter::part(size_t group) { return *parts_[group]; }

void StreamSplitter::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  ended_ = true;
  taken_.notify_all();
}

void StreamSplitter::read_for(size_t group, std::unique_lock<std::mutex>& lock) {
  RequestSpec copy;
  while (parts_[group]->queued() < kBatch && !ended_) {
    const RequestSpec* spec = nullptr;
    if (in_place_) {
      spec = source_.next_in_place();
    } else if (source_.next(copy)) {
      spec = &copy;
    }
    if (spec == nullptr) {
      ended_ = true;
      error_ = source_.error();
      break;
    }
    // As Simulator::look_ahead checks a stream's order, over the whole stream.
    if (!spec->after.empty() || spec->arrival < last_ || spec->arrival < 0 || spec->arrival > kTimeHorizon) {
      ended_ = true;
      error_ = "request '" + spec->id + "' of the stream " +
               (!spec->after.empty() ? std::string("follows other requests, which a stream cannot hold")
                                     : "arrives out of order or outside the horizon") +
               " (a bug: please report it with the workload)";
      break;
    }
    last_ = spec->arrival;
    const size_t owner = static_cast<size_t>(group_of_[static_cast<size_t>(read_ % static_cast<int64_t>(group_of_.size()))]);
    ++read_;
    Part& part = *parts_[owner];
    // A full queue: wait for its group to take from it (it does not wait for this one to go on).
    if (owner != group) taken_.wait(lock, [&] { return part.queued() < kAhead || ended_; });
    part.add(spec, std::move(copy));
  }
  taken_.notify_all();  // the others may have been given requests, or the end
}

bool ShardedSimulation::possible(const SimOptions& options, const std::vector<std::unique_ptr<Policy>>& policies,
                                 const std::vector<Recorder*>& recorders) {
  if (options.threads <= 1 || options.replicas < 2 || options.total_replicas != 0 || !options.roles.empty() ||
      options.max_concurrency > 0 || options.lockstep > 1) {
    return false;
  }
  // Round robin from the first replica: the k-th request goes to replica k mod replicas.
  const std::unique_ptr<Router> router = options.router ? options.router() : make_round_robin_router();
  if (router->next_in_turn() != std::optional<size_t>(0)) return false;
  const auto shards = [](const Recorder* r) { return r->can_shard(); };
  const auto asks = [](const std::unique_ptr<Policy>& p) { return p->asks_about_arrivals(); };
  return std::all_of(recorders.begin(), recorders.end(), shards) &&
         std::none_of(policies.begin(), policies.end(), asks);
}

ShardedSimulation::ShardedSimulation(RequestStream& stream, const SimOptions& options,
                                     std::vector<std::unique_ptr<Policy>> policies,
                                     std::vector<std::unique_ptr<Backend>> backends,
                                     std::vector<Recorder*> recorders)
    : recorders_(std::move(recorders)) {
  assert(possible(options, policies, recorders_));
  // Groups of consecutive replicas, as even as they come (the first ones one larger).
  const int32_t replicas = options.replicas;
  const int32_t count = std::min(options.threads, replicas);
  std::vector<int32_t> group_of(static_cast<size_t>(replicas));
  std::vector<int32_t> first(static_cast<size_t>(count) + 1, 0);
  for (int32_t g = 0; g < count; ++g) {
    first[static_cast<size_t>(g) + 1] = first[static_cast<size_t>(g)] + replicas / count + (g < replicas % count ? 1 : 0);
    for (int32_t i = first[static_cast<size_t>(g)]; i < first[static_cast<size_t>(g) + 1]; ++i) group_of[static_cast<size_t>(i)] = g;
  }
  splitter_ = std::make_unique<StreamSplitter>(stream, std::move(group_of));
  groups_.resize(static_cast<size_t>(count));
  for (int32_t g = 0; g < count; ++g) {
    Group& group = groups_[static_cast<size_t>(g)];
    const auto begin = static_cast<size_t>(first[static_cast<size_t>(g)]);
    const auto end = static_cast<size_t>(first[static_cast<size_t>(g) + 1]);
    SimOptions part = options;
    part.threads = 1;
    part.replicas = static_cast<int32_t>(end - begin);
    part.first_replica = static_cast<int32_t>(begin);
    part.total_replicas = replicas;
    if (!options.replica_limits.empty()) {
      part.replica_limits.assign(options.replica_limits.begin() + static_cast<std::ptrdiff_t>(begin),
                                 options.replica_limits.begin() + static_cast<std::ptrdiff_t>(end));
    }
    part.router = {};  // round robin
    std::vector<std::unique_ptr<Policy>> part_policies;
    std::vector<std::unique_ptr<Backend>> part_backends;
    for (size_t i = begin; i < end; ++i) {
      part_policies.push_back(std::move(policies[i]));
      part_backends.push_back(std::move(backends[i]));
    }
    std::vector<Recorder*> part_recorders;
    for (Recorder* r : recorders_) {
      group.recorders.push_back(r->shard());
      part_recorders.push_back(group.recorders.back().get());
    }
    group.sim = std::make_unique<Simulator>(splitter_->part(static_cast<size_t>(g)), part, std::move(part_policies),
                                            std::move(part_backends), std::move(part_recorders));
  }
}

ShardedSimulation::~ShardedSimulation() = default;

RunResult ShardedSimulation::run(const std::atomic<bool>* stop) {
  std::vector<std::thread> threads;
  for (size_t g = 0; g < groups_.size(); ++g) {
    threads.emplace_back([this, g, stop] {
      Group& group = groups_[g];
      group.sim->halt_with(&halt_);
      group.result = group.sim->run(stop);
      if (group.result.outcome != RunOutcome::kDone) {
        // A failure stops the others (they need not go on); so does a stop, which they see too:
        // either way the stream ends, for a group that waits to hand this one a request.
        halt_.store(true, std::memory_order_relaxed);
        splitter_->stop();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  RunResult result;
  // A group halted because another failed reports an interruption: the failure is the run's.
  for (const Group& group : groups_) {
    if (group.result.outcome == RunOutcome::kFailed) {
      result = group.result;
      break;
    }
    if (group.result.outcome == RunOutcome::kInterrupted) result = group.result;
  }
  for (size_t i = 0; i < recorders_.size(); ++i) {
    for (Group& group : groups_) recorders_[i]->absorb(*group.recorders[i]);
  }
  for (Recorder* r : recorders_) r->on_run_end(result.outcome, result.error);
  return result;
}

}  // namespace servesim
