// The prefix cache's radix tree (sim/prefix_tree.h), through the block manager that uses it,
// against a naive block manager that keeps what vLLM keeps: a hash -> copies map, a reference count
// and a hash per block, and a linked free queue. On random work (prompts that share prefixes,
// chunked prefills, decodes, preemptions, hand-overs), every answer, every block table and every
// count must be the naive one's, block id for block id.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <random>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "sim/kv_cache.h"
#include "sim/prefix_tree.h"

namespace servesim {
namespace {

// vLLM's BlockPool and KVCacheManager, block by block (sim/kv_cache.h before the radix tree).
class NaiveBlockManager {
 public:
  NaiveBlockManager(int32_t block_size, int64_t total, FreeOrder order)
      : bs_(block_size), total_(total), order_(order) {}

  int64_t num_used() const { return used_; }
  int64_t num_free() const {
    return unlimited()
               ? -1
               : (total_ - next_fresh_) + static_cast<int64_t>(queue_.size() + spare_.size());
  }
  int64_t num_cached() const { return static_cast<int64_t>(cache_.size()); }

  int32_t cached_prefix_tokens(Sequence& seq) {
    if (seq.num_tokens() <= 1) return 0;
    const auto max_blocks = static_cast<size_t>((seq.num_tokens() - 1) / bs_);
    hash_sequence_blocks(seq, bs_, max_blocks);
    size_t hits = 0;
    while (hits < max_blocks && cache_.contains(seq.block_hashes[hits])) ++hits;
    return static_cast<int32_t>(hits) * bs_;
  }

  bool can_allocate(const Sequence& seq, int64_t num_tokens, int32_t cached) const {
    const int64_t need =
        (num_tokens + bs_ - 1) / bs_ - static_cast<int64_t>(seq.block_table.size()) - cached / bs_;
    int64_t evictable = 0;
    for (int32_t b = 0; b < cached / bs_ && !unlimited(); ++b) {
      if (ref_[static_cast<size_t>(cache_.at(seq.block_hashes[static_cast<size_t>(b)]).front())] ==
          0)
        ++evictable;
    }
    return unlimited() || std::max<int64_t>(need, 0) + evictable <= num_free();
  }

  bool allocate(Sequence& seq, int64_t num_tokens, int32_t cached) {
    if (!can_allocate(seq, num_tokens, cached)) return false;
    for (int32_t b = 0; b < cached / bs_; ++b) {  // claim the first copies
      const int32_t id = cache_.at(seq.block_hashes[static_cast<size_t>(b)]).front();
      if (ref_[static_cast<size_t>(id)]++ == 0) {
        if (!unlimited()) queue_.erase(std::find(queue_.begin(), queue_.end(), id));
        ++used_;
      }
      seq.block_table.push_back(id);
    }
    if (cached > 0) seq.num_registered_blocks = cached / bs_;
    while (static_cast<int64_t>(seq.block_table.size()) < (num_tokens + bs_ - 1) / bs_) {
      const int32_t id = take();
      ref_[static_cast<size_t>(id)] = 1;
      ++used_;
      seq.block_table.push_back(id);
    }
    const auto full = static_cast<size_t>(num_tokens / bs_);
    hash_sequence_blocks(seq, bs_, full);
    for (auto b = static_cast<size_t>(seq.num_registered_blocks); b < full; ++b) {
      const int32_t id = seq.block_table[b];
      hash_[static_cast<size_t>(id)] = seq.block_hashes[b];
      cache_[seq.block_hashes[b]].push_back(id);
    }
    seq.num_registered_blocks = std::max(seq.num_registered_blocks, static_cast<int32_t>(full));
    return true;
  }

  void free(Sequence& seq) {
    for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
      const auto id = static_cast<size_t>(*it);
      if (--ref_[id] > 0) continue;
      --used_;
      if (hash_[id] == 0 && (unlimited() || order_ == FreeOrder::kHashlessFirst)) {
        spare_.push_back(*it);
      } else if (!unlimited()) {
        queue_.push_back(*it);
      }
    }
    seq.block_table.clear();
    seq.num_registered_blocks = 0;
  }

 private:
  bool unlimited() const { return total_ == BlockManager::kUnlimited; }
  int32_t take() {
    if (!spare_.empty()) {
      const int32_t id = spare_.back();
      spare_.pop_back();
      return id;
    }
    if (unlimited() || next_fresh_ < total_) {
      ref_.push_back(0);
      hash_.push_back(0);
      return next_fresh_++;
    }
    const int32_t id = queue_.front();
    queue_.pop_front();
    if (uint64_t& h = hash_[static_cast<size_t>(id)]; h != 0) {  // evicted: this copy only
      std::vector<int32_t>& copies = cache_.at(h);
      copies.erase(std::find(copies.begin(), copies.end(), id));
      if (copies.empty()) cache_.erase(h);
      h = 0;
    }
    return id;
  }

  const int32_t bs_;
  const int64_t total_;
  const FreeOrder order_;
  int64_t used_ = 0;
  int32_t next_fresh_ = 0;
  std::vector<int32_t> ref_;
  std::vector<uint64_t> hash_;
  std::list<int32_t> queue_;
  std::vector<int32_t> spare_;
  std::unordered_map<uint64_t, std::vector<int32_t>> cache_;
};

// One request as both managers see it: the same prompt, two Sequence objects.
struct Req {
  std::vector<Segment> prompt;
  Sequence seq, naive;
  bool running = false;
  bool repeats = false;  // its prompt is one of a few whole prompts that others send too
};

void init(Req& r, int32_t index, uint64_t output_id) {
  for (Sequence* s : {&r.seq, &r.naive}) {
    *s = Sequence{};
    s->prompt_segments = r.prompt.data();
    s->num_prompt_segments = static_cast<int32_t>(r.prompt.size());
    for (const Segment& g : r.prompt) s->prompt_tokens += g.tokens;
    s->output_id = output_id;
    s->index = index;
  }
}

class PrefixTreeAgainstNaive
    : public ::testing::TestWithParam<std::tuple<FreeOrder, int64_t, int32_t>> {};

TEST_P(PrefixTreeAgainstNaive, EveryAnswerAndBlockTableIsTheNaiveManagers) {
  const auto [order, total, bs] = GetParam();
  BlockManager kv(bs, total, /*prefix_caching=*/true, order);
  NaiveBlockManager naive(bs, total, order);
  std::mt19937_64 rng(static_cast<uint64_t>(bs * 1000 + total + static_cast<int>(order)));
  auto pick = [&](uint64_t n) { return static_cast<int32_t>(rng() % n); };

  // Prompts: a shared system prompt (one of 3) or none, then a few pieces of conversation (from a
  // small pool, so that prompts repeat each other's starts), then their own tokens.
  std::deque<Req> reqs;
  for (int i = 0; i < 60; ++i) {
    Req& r = reqs.emplace_back();
    if (pick(4) > 0) {
      r.prompt.push_back({content_id(1, static_cast<uint64_t>(pick(3))), 1 + pick(40)});
    }
    for (int k = pick(4); k-- > 0;) {
      r.prompt.push_back({content_id(2, static_cast<uint64_t>(pick(6))), 1 + pick(3 * bs)});
    }
    // A third repeat one of a few whole prompts: full hits, which recompute (and copy) the last
    // block, and copies computed side by side.
    r.repeats = pick(3) == 0;
    if (r.repeats) {
      r.prompt = {{content_id(1, 0), 2 * bs},
                  {content_id(7, static_cast<uint64_t>(pick(2))), bs + pick(2)}};
    } else {
      r.prompt.push_back({content_id(3, static_cast<uint64_t>(i)), 1 + pick(2 * bs)});
    }
    init(r, i, content_id(4, static_cast<uint64_t>(i)));
  }
  std::unique_ptr<Sequence> held, held_naive;  // a disaggregated prefill's blocks, handed over

  for (int step = 0; step < 6000; ++step) {
    SCOPED_TRACE(step);
    Req& r = reqs[static_cast<size_t>(pick(reqs.size()))];
    if (!r.running) {  // admit: the cached prefix, the whole-prompt check, a first chunk
      const int32_t cached = kv.cached_prefix_tokens(r.seq);
      ASSERT_EQ(cached, naive.cached_prefix_tokens(r.naive));
      const int64_t all = r.seq.num_tokens();
      ASSERT_EQ(kv.can_allocate(r.seq, all, cached), naive.can_allocate(r.naive, all, cached));
      const int64_t upto = std::min<int64_t>(all, cached + 1 + pick(3 * bs));
      const bool ok = kv.allocate(r.seq, upto, cached);
      ASSERT_EQ(ok, naive.allocate(r.naive, upto, cached));
      if (ok) {
        r.running = true;
        r.seq.num_computed = r.naive.num_computed = static_cast<int32_t>(upto);
      }
    } else if (pick(8) == 0) {  // finish, or preempt (it comes back with its output so far)
      if (pick(6) == 0 && held == nullptr) {  // hand the blocks over, free them later
        held = std::make_unique<Sequence>();
        held_naive = std::make_unique<Sequence>();
        kv.hand_over(r.seq, *held);
        std::swap(held_naive->block_table, r.naive.block_table);
        held_naive->num_registered_blocks = std::exchange(r.naive.num_registered_blocks, 0);
      } else {
        kv.free(r.seq);
        naive.free(r.naive);
      }
      r.running = false;
      r.seq.num_computed = r.naive.num_computed = 0;
      if (pick(2) == 0) {  // finished: the next request of that slot, with its own output
        if (!r.repeats) r.prompt.back().id = content_id(5, rng());
        init(r, static_cast<int32_t>(step + 1000), content_id(6, static_cast<uint64_t>(step)));
      }
    } else {  // one more chunk of its prompt, or one more token
      if (r.seq.num_computed < r.seq.num_tokens()) {
        r.seq.num_computed = std::min(r.seq.num_tokens(), r.seq.num_computed + 1 + pick(2 * bs));
      } else {
        ++r.seq.num_output;
        ++r.seq.num_computed;
      }
      r.naive.num_computed = r.seq.num_computed;
      r.naive.num_output = r.seq.num_output;
      const bool ok = kv.allocate(r.seq, r.seq.num_computed);
      ASSERT_EQ(ok, naive.allocate(r.naive, r.naive.num_computed, 0));
      if (!ok) {  // out of blocks: preempted
        kv.free(r.seq);
        naive.free(r.naive);
        r.running = false;
        r.seq.num_computed = r.naive.num_computed = 0;
      }
    }
    if (held != nullptr && pick(20) == 0) {
      kv.free(*held);
      naive.free(*held_naive);
      held.reset();
      held_naive.reset();
    }
    ASSERT_EQ(kv.num_used(), naive.num_used());
    if (total != BlockManager::kUnlimited) {
      ASSERT_EQ(kv.num_free(), naive.num_free());
    }
    ASSERT_EQ(kv.num_cached(), naive.num_cached());
    for (const Req& q : reqs) ASSERT_EQ(q.seq.block_table, q.naive.block_table);
  }
  // Everything freed: nothing held, every block free again.
  for (Req& q : reqs) {
    kv.free(q.seq);
    naive.free(q.naive);
  }
  if (held != nullptr) {
    kv.free(*held);
    naive.free(*held_naive);
  }
  EXPECT_EQ(kv.num_used(), 0);
  EXPECT_EQ(kv.num_cached(), naive.num_cached());
  if (total != BlockManager::kUnlimited) {
    EXPECT_EQ(kv.num_free(), total);
  }
}

INSTANTIATE_TEST_SUITE_P(FreeOrdersAndSizes, PrefixTreeAgainstNaive,
                         ::testing::Values(std::tuple{FreeOrder::kHashlessFirst, int64_t{24}, 4},
                                           std::tuple{FreeOrder::kHashlessFirst, int64_t{120}, 4},
                                           std::tuple{FreeOrder::kHashlessFirst, int64_t{64}, 16},
                                           std::tuple{FreeOrder::kFifo, int64_t{24}, 4},
                                           std::tuple{FreeOrder::kFifo, int64_t{120}, 4},
                                           std::tuple{FreeOrder::kHashlessFirst,
                                                      BlockManager::kUnlimited, 4}));

}  // namespace
}  // namespace servesim
