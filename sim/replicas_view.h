// The replicas as a router sees them (routers/router.h): all of a simulator's, or one pool's.
// Internal to the simulator (sim/simulator.cc, sim/disaggregation.cc).
#pragma once

#include <memory>
#include <vector>

#include "routers/router.h"
#include "sim/replica.h"

namespace servesim {

// The replicas as routers see them: all, or one pool's (its i-th replica is replicas[pool[i]]).
class ReplicasView final : public RouterView {
 public:
  ReplicasView(const std::vector<std::unique_ptr<Replica>>& replicas, const std::vector<size_t>* pool = nullptr)
      : replicas_(replicas), pool_(pool) {}
  size_t replicas() const override { return pool_ != nullptr ? pool_->size() : replicas_.size(); }
  ReplicaLoad load(size_t i) const override {
    const Replica& r = at(i);
    return {static_cast<int64_t>(r.outstanding()), r.kv_blocks_used(), r.kv_blocks_total()};
  }
  int64_t cached_prefix_tokens(size_t i, Request& r) const override { return at(i).cached_prefix_tokens(r); }
  int64_t cached_blocks(size_t i) const override { return at(i).cached_blocks(); }

 private:
  Replica& at(size_t i) const { return *replicas_[pool_ != nullptr ? (*pool_)[i] : i]; }
  const std::vector<std::unique_ptr<Replica>>& replicas_;
  const std::vector<size_t>* pool_;
};

}  // namespace servesim
