// Disaggregated prefill and decode (SimOptions::roles): the simulator's part, the pools, the
// handoffs from prefill to decode replicas and the KV transfers between them. The replicas' part
// (handing off, reserving blocks, receiving) is in sim/replica.cc.
#include <algorithm>
#include <cassert>

#include "sim/replicas_view.h"
#include "sim/simulator.h"
#include "sim/format_number.h"

namespace servesim {

void Simulator::set_up_pools(const SimOptions& options) {
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const ReplicaRole role = options.roles[i];
    assert(role != ReplicaRole::kBoth);
    replicas_[i]->set_role(role, &handoffs_, &reserved_);
    (role == ReplicaRole::kPrefill ? prefill_pool_ : decode_pool_).push_back(i);
    const int64_t blocks = replicas_[i]->kv_blocks_total();
    if (role == ReplicaRole::kDecode && blocks >= 0) {
      const int64_t tokens = blocks * options.block_size;
      min_decode_kv_tokens_ = min_decode_kv_tokens_ < 0 ? tokens : std::min(min_decode_kv_tokens_, tokens);
    }
  }
  assert(!prefill_pool_.empty() && !decode_pool_.empty());
  links_ = options.links;
  link_free_.assign(replicas_.size(), 0);
  decode_router_ = options.router ? options.router() : make_round_robin_router();
  // Handoffs and transfers happen at events anywhere: every replica's horizon is the next event.
  leaps_stop_at_events_ = true;
  narrow_horizons_ = false;
}

void Simulator::hand_off(Time now) {
  for (const int32_t slot : handoffs_) {
    Request& r = requests_[static_cast<size_t>(slot)];
    if (transfers_.size() <= static_cast<size_t>(slot)) transfers_.resize(static_cast<size_t>(slot) + 1);
    Transfer& t = transfers_[static_cast<size_t>(slot)];
    // The prefill replica's blocks stay held, by the transfer, until the KV has moved.
    replicas_[static_cast<size_t>(r.replica)]->kv().hand_over(r, t.prefill_blocks);
    size_t d;
    const int16_t parent_decode =
        r.spec->after.empty() ? -1 : requests_[static_cast<size_t>(r.spec->after.front())].decode_replica;
    if (session_affinity_ && parent_decode >= 0) {
      d = static_cast<size_t>(parent_decode);
    } else {
      const size_t k = decode_router_->route(r, ReplicasView(replicas_, &decode_pool_));
      assert(k < decode_pool_.size());
      d = decode_pool_[k];
    }
    t.record = TransferRecord{};
    t.record.request = &r;
    t.record.prefill_replica = r.replica;
    t.record.decode_replica = static_cast<int32_t>(d);
    t.record.ready = now;
    replicas_[d]->expect(&r);
    touch(d);
  }
  handoffs_.clear();
}

void Simulator::start_transfers(Time now) {
  for (const Reservation& res : reserved_) {
    Request& r = requests_[static_cast<size_t>(res.slot)];
    Transfer& t = transfers_[static_cast<size_t>(res.slot)];
    const auto p = static_cast<size_t>(r.replica);
    const auto d = static_cast<size_t>(r.decode_replica);
    t.record.tokens = r.prompt_tokens - res.cached_tokens;
    t.record.bytes = static_cast<double>(t.record.tokens) * kv_bytes_per_token_[p];
    const double bandwidth = std::min(links_[p].bytes_per_second, links_[d].bytes_per_second);
    const Time moving = seconds_to_time(t.record.bytes / bandwidth);
    const Time start = std::max({now, link_free_[p], link_free_[d]});
    const Time free_at = add_time(start, moving);
    const Time end = add_time(free_at, std::max(links_[p].latency, links_[d].latency));
    if (end == kNever) {
      if (failure_.empty()) {
        failure_ = "the KV of request '" + r.id() + "' (" + format_number(t.record.bytes) +
                   " bytes) would arrive at its decode replica past the simulation horizon of 1e9 s; " +
                   "check the link's bandwidth";
      }
      continue;
    }
    link_free_[p] = link_free_[d] = free_at;
    t.record.reserved = now;
    t.record.start = start;
    t.record.end = end;
    events_.push(end, EventKind::kTransferEnd, res.slot);
  }
  reserved_.clear();
}

void Simulator::end_transfer(int32_t slot, Time now) {
  Request& r = requests_[static_cast<size_t>(slot)];
  Transfer& t = transfers_[static_cast<size_t>(slot)];
  const auto p = static_cast<size_t>(r.replica);
  const auto d = static_cast<size_t>(r.decode_replica);
  replicas_[p]->kv().free(t.prefill_blocks);
  touch(p);
  replicas_[d]->receive(&r, now);
  touch(d);
  for (Recorder* rec : recorders_) rec->on_transfer(t.record);
}

}  // namespace servesim
