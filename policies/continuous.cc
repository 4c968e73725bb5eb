#include "policies/continuous.h"

#include <limits>
#include <string>

#include "sim/config/options.h"

namespace servesim {
namespace {

class ContinuousPolicy final : public Policy {
 public:
  explicit ContinuousPolicy(bool reserve_max) : reserve_max_(reserve_max) {}

  void next_batch(ReplicaView& view, Time /*now*/, Batch& batch) override {
    BlockManager& kv = view.kv();
    const std::vector<Sequence*>& running = view.running();
    int64_t budget = view.limits().max_num_batched_tokens;

    // 1. Running requests, in admission order: each computes what it has not computed yet
    //    (one decode token). The replica's decode group goes in at once, preempting as below.
    const DecodeGroup group =
        view.schedule_decode_group(batch, std::numeric_limits<int64_t>::max(), GroupPreemption::kMostRecent);
    budget -= group.size;
    bool preempted = group.preempted;
    for (auto i = static_cast<size_t>(group.size); i < running.size(); ++i) {
      Sequence* seq = running[i];
      const int32_t n = seq->num_uncomputed();
      if (n == 0) continue;  // as vLLM: a pipeline has this request's token in flight
      bool scheduled = true;
      // Preempt the most recently admitted request until seq's next block fits (paged only; with
      // kv_reserve = max the blocks were reserved at admission and this never loops).
      while (!kv.allocate(*seq, seq->num_computed + n)) {
        Sequence* victim = running.back();
        view.preempt(victim);
        preempted = true;
        if (victim == seq) {
          scheduled = false;
          break;
        }
      }
      if (!scheduled) break;  // seq was the last running request
      batch.items.push_back({seq, n, seq->num_computed});
      budget -= n;
    }
    // As vLLM: no admissions in an iteration that preempted. But when the first running request
    // preempted even itself (it outgrew the whole cache), the iteration would be empty: go on, so
    // that it is rejected below rather than wait forever.
    if (preempted && !batch.empty()) return;

    // 2. Waiting requests, first come first served, each with its whole prompt.
    const std::deque<Sequence*>& queue = view.waiting();
    const auto max_seqs = static_cast<size_t>(view.limits().max_num_seqs);
    bool admitted = false;
    while (!queue.empty() && running.size() < max_seqs) {
      Sequence* seq = queue.front();
      const int32_t n = seq->num_uncomputed();
      if (n > view.limits().max_num_batched_tokens) {
        view.reject(seq, RejectCause::kBatchTokens, std::to_string(n) + " tokens to prefill exceed max_num_batched_tokens " +
                             std::to_string(view.limits().max_num_batched_tokens) +
                             " (continuous batching does not split prompts; use chunked-prefill)");
        continue;
      }
      const int64_t hold = reserve_max_ ? int64_t{seq->num_tokens()} + seq->max_tokens -
                                              seq->num_output
                                        : int64_t{seq->num_tokens()};
      if (!kv.fits_at_all(hold)) {
        view.reject(seq, RejectCause::kKvCapacity, "needs " + std::to_string(kv.blocks_for(hold)) +
                             " KV blocks; the cache has " + std::to_string(kv.num_total()));
        continue;
      }
      if (!kv.can_allocate(*seq, hold)) break;  // strict FCFS: nobody overtakes the head
      if (n > budget) {
        // The head's prompt does not fit beside this iteration's decodes. Rather than let it starve
        // while long generations run, this iteration prefills only (the decodes pause once), as
        // vLLM before chunked prefill schedules prefill-only iterations.
        if (admitted) break;
        batch.clear();
        budget = view.limits().max_num_batched_tokens;
      }
      kv.allocate(*seq, hold);
      view.admit(seq);
      admitted = true;
      batch.items.push_back({seq, n, seq->num_computed});
      budget -= n;
    }
  }

  // An all-decode batch without preemption admitted nobody: the queue's head could not get its
  // blocks (or the queue is empty, or max_num_seqs run). Nothing frees blocks before a request
  // finishes, so the head stays blocked and the batch repeats.
  bool decode_batch_repeats(ReplicaView& /*view*/) const override { return true; }
  // With requests waiting, the head was blocked (its blocks, or max_num_seqs); an arrival queues
  // behind it.
  bool decode_batch_ignores_arrivals(ReplicaView& view) const override { return !view.waiting().empty(); }

  std::string_view name() const override { return "continuous"; }

  toml::table options() const override {
    return toml::table{{"kv_reserve", reserve_max_ ? "max" : "paged"}};
  }

 private:
  const bool reserve_max_;
};

}  // namespace

Result<std::unique_ptr<Policy>> make_continuous_policy(const toml::table& options) {
  OptionReader r(options, "policy");
  const std::string reserve = r.choice("kv_reserve", "paged", {"paged", "max"});
  r.reject_unknown();
  if (!r.ok()) return r.error();
  return std::unique_ptr<Policy>(std::make_unique<ContinuousPolicy>(reserve == "max"));
}

}  // namespace servesim
