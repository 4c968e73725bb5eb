#include "policies/chunked_prefill.h"

#include <algorithm>
#include <string>
#include <vector>

#include "sim/options.h"

namespace servesim {
namespace {

// SGLang falls back from longest-prefix-match to FCFS when more requests than this wait.
constexpr size_t kLpmMaxWaiting = 128;

class ChunkedPrefillPolicy final : public Policy {
 public:
  ChunkedPrefillPolicy(bool prefix_cached, int32_t threshold, bool lpm)
      : prefix_cached_(prefix_cached), threshold_(threshold), lpm_(lpm) {}

  void next_batch(ReplicaView& view, Time /*now*/, Batch& batch) override {
    BlockManager& kv = view.kv();
    const std::vector<Sequence*>& running = view.running();
    int32_t budget = view.limits().max_num_batched_tokens;
    bool preempted = false;

    // 1. Running requests first, in admission order.
    for (size_t i = 0; i < running.size() && budget > 0; ++i) {
      Sequence* seq = running[i];
      const int32_t n = cap(seq->num_uncomputed(), budget);
      bool scheduled = true;
      while (!kv.allocate(*seq, int64_t{seq->num_computed} + n)) {
        Sequence* victim = running.back();  // the most recently admitted
        view.preempt(victim);
        preempted = true;
        if (victim == seq) {
          scheduled = false;
          break;
        }
      }
      if (!scheduled) break;
      batch.items.push_back({seq, n, seq->num_computed});
      budget -= n;
    }
    // As vLLM: no admissions in an iteration that preempted. But when the first running request
    // preempted even itself (it outgrew the whole cache), the iteration would be empty: go on, so
    // that it is rejected below rather than wait forever.
    if (preempted && !batch.items.empty()) return;

    // 2. Waiting requests.
    const std::deque<Sequence*>& queue = view.waiting();
    const auto max_seqs = static_cast<size_t>(view.limits().max_num_seqs);
    if (lpm_ && queue.size() > 1 && queue.size() <= kLpmMaxWaiting) {
      order_by_prefix(queue, kv);
    } else {
      order_.assign(queue.begin(), queue.end());
    }
    for (Sequence* seq : order_) {
      if (budget <= 0 || running.size() >= max_seqs) break;
      if (!kv.fits_at_all(seq->num_tokens())) {
        view.reject(seq, "needs " + std::to_string(kv.blocks_for(seq->num_tokens())) +
                             " KV blocks; the cache has " + std::to_string(kv.num_total()));
        continue;
      }
      const int32_t cached = kv.cached_prefix_tokens(*seq);
      const int32_t n = cap(seq->num_tokens() - cached, budget);
      if (!kv.allocate(*seq, int64_t{cached} + n, cached)) break;  // nobody overtakes it
      view.admit(seq, cached);
      batch.items.push_back({seq, n, cached});
      budget -= n;
    }
  }

  std::string_view name() const override { return prefix_cached_ ? "prefix-cached" : "chunked-prefill"; }

  toml::table options() const override {
    toml::table t{{"long_prefill_token_threshold", threshold_}};
    if (prefix_cached_) t.insert("order", lpm_ ? "lpm" : "fcfs");
    return t;
  }

 private:
  // Tokens to compute this iteration: what is left, within the budget and the per-request cap.
  int32_t cap(int32_t left, int32_t budget) const {
    int32_t n = std::min(left, budget);
    if (threshold_ > 0) n = std::min(n, threshold_);
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
  const int32_t threshold_;
  const bool lpm_;
  std::vector<Sequence*> order_;                    // this iteration's admission order (reused)
  std::vector<std::pair<int32_t, Sequence*>> scored_;
};

Result<std::unique_ptr<Policy>> make(const toml::table& options, bool prefix_cached) {
  OptionReader r(options, "policy");
  const auto threshold =
      static_cast<int32_t>(r.integer("long_prefill_token_threshold", 0, 0, INT32_MAX));
  bool lpm = false;
  if (prefix_cached) lpm = r.choice("order", "fcfs", {"fcfs", "lpm"}) == "lpm";
  r.reject_unknown();
  if (!r.ok()) return r.error();
  return std::unique_ptr<Policy>(std::make_unique<ChunkedPrefillPolicy>(prefix_cached, threshold, lpm));
}

}  // namespace

Result<std::unique_ptr<Policy>> make_chunked_prefill_policy(const toml::table& options) {
  return make(options, false);
}

Result<std::unique_ptr<Policy>> make_prefix_cached_policy(const toml::table& options) {
  return make(options, true);
}

}  // namespace servesim
