#include "policies/chunked_prefill.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "policies/vllm_config.h"

namespace servesim {
namespace {

// SGLang falls back from longest-prefix-match to FCFS when more requests than this wait.
constexpr size_t kLpmMaxWaiting = 128;

// vLLM's Scheduler.schedule() (vllm/v1/core/sched/scheduler.py), one iteration of it.
class ChunkedPrefillPolicy final : public Policy {
 public:
  ChunkedPrefillPolicy(bool prefix_cached, VllmSchedulerConfig config)
      : prefix_cached_(prefix_cached), config_(config) {}

  // Mirrors vLLM's Scheduler.schedule(); kept whole to read side by side.
  void next_batch(ReplicaView& view, Time /*now*/, Batch& batch) override {
    BlockManager& kv = view.kv();
    const std::vector<Sequence*>& running = view.running();
    const std::deque<Sequence*>& waiting = view.waiting();
    int32_t budget = view.limits().max_num_batched_tokens;
    const int32_t cap = threshold(running.size() + waiting.size(), budget);

    // 1. Running requests first, in admission order; the replica's decode group at once, preempting
    //    as below when the victim is the most recently admitted.
    const DecodeGroup group = view.schedule_decode_group(
        batch, budget, config_.priority ? GroupPreemption::kByPolicy : GroupPreemption::kMostRecent);
    auto i = static_cast<size_t>(group.size);
    budget -= group.size;
    bool preempted = group.preempted;
    while (i < running.size() && budget > 0) {
      Sequence* seq = running[i];
      const int32_t n = chunk(seq->num_uncomputed(), cap, budget);
      if (n == 0) {  // as vLLM: a pipeline has its last prompt chunk or its decode in flight
        ++i;
        continue;
      }
      Sequence* victim = nullptr;
      while (!kv.allocate(*seq, int64_t{seq->num_computed} + n)) {
        // Out of KV blocks: preempt (recompute) the lowest-priority running request, which under
        // fcfs is the most recently admitted, until seq fits or seq itself was preempted.
        victim = config_.priority ? lowest_priority(running) : running.back();
        const auto at = static_cast<size_t>(std::find(running.begin(), running.end(), victim) -
                                            running.begin());
        if (at < i) {  // priority: a request scheduled earlier in this step gives its tokens back
          budget += at < static_cast<size_t>(batch.group) ? 1 : unschedule(batch, victim);
          --i;
        }
        view.preempt(victim);
        preempted = true;
        if (victim == seq) break;
      }
      if (victim == seq) {
        if (config_.priority) continue;  // the requests after it may still fit
        break;
      }
      batch.items.push_back({seq, n, seq->num_computed});
      budget -= n;
      ++i;
    }
    // As vLLM: no admissions in an iteration that preempted. But when the running requests
    // preempted even themselves (one outgrew the whole cache), the iteration would be empty: go
    // on, so that it is rejected below rather than wait forever (vLLM would stall).
    if (preempted && !batch.empty()) return;

    // 2. Waiting requests, in queue order (or longest cached prefix first).
    const bool by_prefix = config_.lpm && waiting.size() > 1 && waiting.size() <= kLpmMaxWaiting;
    if (by_prefix) order_by_prefix(waiting, kv);
    const auto max_seqs = static_cast<size_t>(view.limits().max_num_seqs);
    size_t k = 0;
    while (budget > 0 && running.size() < max_seqs) {
      Sequence* seq = by_prefix ? (k < order_.size() ? order_[k++] : nullptr)
                                : (waiting.empty() ? nullptr : waiting.front());
      if (seq == nullptr) break;
      if (!kv.fits_at_all(seq->num_tokens())) {
        view.reject(seq, RejectCause::kKvCapacity, "needs " + std::to_string(kv.blocks_for(seq->num_tokens())) +
                             " KV blocks; the cache has " + std::to_string(kv.num_total()));
        continue;
      }
      const int32_t cached = kv.cached_prefix_tokens(*seq);
      // scheduler_reserve_full_isl: the whole sequence must fit now, not just this chunk
      // (KVCacheManager.allocate_slots, full_sequence_must_fit). Nobody overtakes it.
      if (config_.scheduler_reserve_full_isl && !kv.can_allocate(*seq, seq->num_tokens(), cached)) {
        break;
      }
      const int32_t n = chunk(seq->num_tokens() - cached, cap, budget);
      if (!kv.allocate(*seq, int64_t{cached} + n, cached)) break;  // nobody overtakes it
      view.admit(seq, cached);
      batch.items.push_back({seq, n, cached});
      budget -= n;
    }
  }

  // An all-decode batch admitted nobody: the queue is empty, or max_num_seqs run, or the budget is
  // spent on decodes, or the head's blocks could not be allocated. The first three hold while
  // nothing arrives or finishes; so does the last without prefix caching, as free blocks only
  // shrink until a request finishes. With prefix caching, the running requests' new blocks may
  // evict cached blocks and change what the head (or the longest-prefix order) would find, so
  // only the first three are trusted.
  bool decode_batch_repeats(ReplicaView& view) const override {
    const size_t running = view.running().size();
    return !view.kv().prefix_caching() || view.waiting().empty() ||
           running >= static_cast<size_t>(view.limits().max_num_seqs) ||
           static_cast<int64_t>(running) >= view.limits().max_num_batched_tokens;
  }

  // With requests waiting and first come first served, an arrival queues behind the head, which
  // stays blocked: unless longest-prefix order may put it first, priority may put it ahead, or an
  // adaptive threshold shrinks the head's chunk as requests grow in number.
  bool decode_batch_ignores_arrivals(ReplicaView& view) const override {
    return !config_.priority && !config_.lpm && !config_.long_prefill_token_threshold_adaptive &&
           !view.waiting().empty();
  }

  std::string_view name() const override { return prefix_cached_ ? "prefix-cached" : "chunked-prefill"; }
  toml::table options() const override { return config_.to_toml(prefix_cached_); }
  QueueOrder queue_order() const override {
    return config_.priority ? QueueOrder::kPriority : QueueOrder::kFcfs;
  }
  FreeOrder kv_free_order() const override { return config_.release->free_order; }

 private:
  // long_prefill_token_threshold for this iteration (0: no cap), with `num_requests` running or
  // waiting (Scheduler.get_request_counts, at the top of schedule()): lifted for a lone request,
  // floored at a fair share of the budget when adaptive.
  int32_t threshold(size_t num_requests, int32_t budget) const {
    int32_t t = config_.long_prefill_token_threshold;
    if (config_.release->lone_request_uncapped && num_requests <= 1) return 0;
    if (t > 0 && config_.long_prefill_token_threshold_adaptive && num_requests > 0) {
      t = std::max(t, static_cast<int32_t>(budget / static_cast<int64_t>(num_requests)));
    }
    return t;
  }

  // Tokens to compute this iteration: what is left, within the cap and the budget.
  static int32_t chunk(int32_t left, int32_t cap, int32_t budget) {
    if (cap > 0) left = std::min(left, cap);
    return std::min(left, budget);
  }

  // vLLM: max(running, key=(priority, arrival_time)), the first such in running order.
  static Sequence* lowest_priority(const std::vector<Sequence*>& running) {
    Sequence* v = running.front();
    for (Sequence* s : running) {
      if (std::tie(s->priority, s->arrival) > std::tie(v->priority, v->arrival)) v = s;
    }
    return v;
  }

  // Takes seq's item out of the batch; returns its tokens.
  static int32_t unschedule(Batch& batch, const Sequence* seq) {
    auto it = std::find_if(batch.items.begin(), batch.items.end(),
                           [&](const BatchItem& item) { return item.seq == seq; });
    const int32_t n = it->new_tokens;
    batch.items.erase(it);
    return n;
  }

  // Longest cached prefix first; ties keep queue order.
  void order_by_prefix(const std::deque<Sequence*>& queue, BlockManager& kv) {
    scored_.clear();
    for (Sequence* s : queue) scored_.push_back({kv.cached_prefix_tokens(*s), s});
    std::stable_sort(scored_.begin(), scored_.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    order_.clear();
    for (const auto& [match, s] : scored_) order_.push_back(s);
  }

  const bool prefix_cached_;
  const VllmSchedulerConfig config_;
  std::vector<Sequence*> order_;                    // lpm: this iteration's admission order (reused)
  std::vector<std::pair<int32_t, Sequence*>> scored_;
};

Result<std::unique_ptr<Policy>> make(const toml::table& options, bool prefix_cached) {
  Result<VllmSchedulerConfig> config = read_vllm_scheduler_config(options, prefix_cached);
  if (!config.ok()) return config.error();
  return std::unique_ptr<Policy>(std::make_unique<ChunkedPrefillPolicy>(prefix_cached, config.value()));
}

}  // namespace

Result<std::unique_ptr<Policy>> make_chunked_prefill_policy(const toml::table& options) {
  return make(options, false);
}

Result<std::unique_ptr<Policy>> make_prefix_cached_policy(const toml::table& options) {
  return make(options, true);
}

}  // namespace servesim
