#include "policies/static_batch.h"

#include <cmath>
#include <limits>
#include <vector>

#include "sim/config/options.h"

namespace servesim {
namespace {

class StaticPolicy final : public Policy {
 public:
  StaticPolicy(Time max_wait, bool release_batch, bool pad)
      : max_wait_(max_wait), release_batch_(release_batch), pad_(pad) {}

  void next_batch(ReplicaView& view, Time now, Batch& batch) override {
    if (!members_.empty()) {
      if (!all_done()) {
        continue_batch(batch);
        return;
      }
      if (release_batch_) {
        for (Sequence* m : members_) view.release(m);  // every response returns as the batch drains
      }
      members_.clear();
    }
    form_batch(view, now, batch);
  }

  std::string_view name() const override { return "static"; }
  bool holds_finished_requests() const override { return true; }  // members_
  bool asks_about_arrivals() const override { return true; }      // whether to wait to fill up

  toml::table options() const override {
    toml::table t;
    if (max_wait_ == kNever) {
      t.insert("max_wait", std::numeric_limits<double>::infinity());
    } else {
      t.insert("max_wait", to_seconds(max_wait_));
    }
    t.insert("release", release_batch_ ? "batch" : "each");
    t.insert("padding", pad_ ? "pad" : "shrink");
    return t;
  }

 private:
  bool all_done() const {
    for (const Sequence* m : members_) {
      if (m->status != RequestStatus::kDone) return false;
    }
    return true;
  }

  void continue_batch(Batch& batch) const {
    for (Sequence* m : members_) {
      if (m->status != RequestStatus::kDone) {
        batch.items.push_back({m, m->num_uncomputed(), m->num_computed});
      } else if (pad_) {
        // A finished row still occupies its place in the padded batch and costs a decode.
        batch.items.push_back({m, 1, m->num_tokens(), /*padding=*/true});
      }
    }
  }

  static int64_t reservation(const Sequence& s) {
    return static_cast<int64_t>(s.num_tokens()) + s.max_tokens;  // prompt + max_tokens
  }

  void form_batch(ReplicaView& view, Time now, Batch& batch) {
    const std::deque<Sequence*>& queue = view.waiting();
    BlockManager& kv = view.kv();
    // With no batch running, all KV memory is free: a head that does not fit now never will.
    while (!queue.empty() && !kv.fits_at_all(reservation(*queue.front()))) {
      view.reject(queue.front(), RejectCause::kKvCapacity, "prompt + max_tokens needs " +
                                     std::to_string(kv.blocks_for(reservation(*queue.front()))) +
                                     " KV blocks; the cache has " + std::to_string(kv.num_total()));
    }
    if (queue.empty()) return;

    // How many of the oldest waiting requests fit in one batch.
    const size_t limit = static_cast<size_t>(view.limits().max_num_seqs);
    int64_t free_blocks = kv.num_free();
    size_t k = 0;
    while (k < queue.size() && k < limit) {
      const int64_t need = kv.blocks_for(reservation(*queue[k]));
      if (need > free_blocks) break;
      free_blocks -= need;
      ++k;
    }
    const bool full = k == limit || k < queue.size();
    if (!full && view.more_arrivals_expected()) {
      if (max_wait_ == kNever) return;  // wait for a full batch or the end of the workload
      const Time deadline = add_time(queue.front()->arrival, max_wait_);
      if (deadline == kNever) return;  // past the horizon: as good as forever
      if (now < deadline) {
        batch.wake_at = deadline;
        return;
      }
    }
    for (size_t i = 0; i < k; ++i) {
      Sequence* seq = queue.front();
      kv.allocate(*seq, reservation(*seq));  // cannot fail: counted above
      view.admit(seq);
      if (release_batch_) view.hold_response(seq);
      members_.push_back(seq);
      batch.items.push_back({seq, seq->num_uncomputed(), seq->num_computed});
    }
  }

  const Time max_wait_;
  const bool release_batch_;
  const bool pad_;
  std::vector<Sequence*> members_;  // the running batch, finished members included
};

}  // namespace

Result<std::unique_ptr<Policy>> make_static_policy(const toml::table& options) {
  OptionReader r(options, "policy");
  const double inf = std::numeric_limits<double>::infinity();
  const double max_wait = r.number("max_wait", 0.0, 0.0, inf);
  const std::string release = r.choice("release", "each", {"each", "batch"});
  const std::string padding = r.choice("padding", "shrink", {"shrink", "pad"});
  r.reject_unknown();
  if (!r.ok()) return r.error();
  // A wait past the simulation horizon is as good as forever.
  const Time wait = seconds_to_time(max_wait);
  return std::unique_ptr<Policy>(
      std::make_unique<StaticPolicy>(wait, release == "batch", padding == "pad"));
}

}  // namespace servesim
