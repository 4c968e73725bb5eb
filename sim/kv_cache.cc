#include "sim/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>
#include <span>
#include <utility>

namespace servesim {

BlockManager::BlockManager(int32_t block_size, int64_t num_blocks, bool prefix_caching,
                           FreeOrder free_order, KvGroups groups)
    : block_size_(block_size),
      block_shift_(std::has_single_bit(static_cast<uint32_t>(block_size)) ? std::countr_zero(static_cast<uint32_t>(block_size)) : -1),
      total_(num_blocks),
      prefix_caching_(prefix_caching),
      free_order_(free_order),
      plain_(!prefix_caching && (num_blocks == kUnlimited || free_order == FreeOrder::kHashlessFirst)),
      groups_(groups),
      hybrid_(groups.any()),
      tree_(block_size) {
  assert(block_size >= 1);
  assert(!hybrid_ || !prefix_caching);
  assert(num_blocks >= 0 || num_blocks == kUnlimited);
}

bool BlockManager::can_allocate(const Sequence& seq, int64_t num_tokens,
                                int32_t num_cached_tokens) const {
  if (hybrid_) return hybrid_need(seq, num_tokens, seq.block_table.empty()) <= num_free();
  const int64_t held = static_cast<int64_t>(seq.block_table.size()) + (num_cached_tokens > 0 ? num_cached_tokens / block_size_ : 0);
  const int64_t need = blocks_for(num_tokens) - held;
  const int64_t evictable = num_cached_tokens > 0 ? evictable_hits(seq, num_cached_tokens) : 0;
  return std::max<int64_t>(need, 0) + evictable <= num_free();
}

bool BlockManager::allocate_blocks(Sequence& seq, int64_t num_tokens, int32_t num_cached_tokens) {
  assert(num_cached_tokens % block_size_ == 0);
  assert(num_cached_tokens == 0 || seq.block_table.empty());
  if (hybrid_) return allocate_hybrid(seq, num_tokens);
  if (!can_allocate(seq, num_tokens, num_cached_tokens)) return false;
  if (seq.block_table.capacity() == 0 && !kept_tables_.empty()) {
    seq.block_table = std::move(kept_tables_.back());
    kept_tables_.pop_back();
  }
  if (prefix_caching_ && seq.block_runs.capacity() == 0 && !kept_runs_.empty()) {
    seq.block_runs = std::move(kept_runs_.back());
    kept_runs_.pop_back();
  }
  if (num_cached_tokens > 0) {
    const int32_t cached_blocks = num_cached_tokens / block_size_;
    claim_cached(seq, cached_blocks);
    seq.num_registered_blocks = cached_blocks;
  }
  take_blocks(seq, blocks_for(num_tokens));
  // Register the blocks these tokens fill: they are computed by the iteration being scheduled
  // (vLLM's KVCacheManager.allocate_slots -> cache_blocks).
  if (prefix_caching_) register_blocks(seq, static_cast<size_t>(num_tokens / block_size_));
  if (!plain_) compact_queue();
  return true;
}

void BlockManager::take_blocks(Sequence& seq, int64_t num_blocks) {
  // Freed blocks without a hash first (the last freed first), taken together (without prefix
  // caching, in the order they lie: free() put them there in their table's order), then blocks
  // never used, then the free queue's (vLLM's BlockPool.get_new_blocks from its free queue).
  const size_t before = seq.block_table.size();
  int64_t want = num_blocks - static_cast<int64_t>(before);
  if (want == 1 && !spare_.empty()) {  // a decode's next block: the same, without the bulk's moves
    seq.block_table.push_back(spare_.back());
    spare_.pop_back();
    want = 0;
  } else if (want > 0 && !spare_.empty()) {
    const auto bulk = static_cast<std::ptrdiff_t>(std::min<int64_t>(want, static_cast<int64_t>(spare_.size())));
    const size_t from = seq.block_table.size();
    seq.block_table.insert(seq.block_table.end(), spare_.end() - bulk, spare_.end());
    spare_.resize(spare_.size() - static_cast<size_t>(bulk));
    if (!plain_) {  // in the order they are popped
      std::reverse(seq.block_table.begin() + static_cast<std::ptrdiff_t>(from), seq.block_table.end());
    }
    want -= bulk;
  }
  for (; want > 0 && (unlimited() || next_fresh_ < total_); --want) seq.block_table.push_back(next_fresh_++);
  if (want > 0) take_queued(seq, want);
  used_ += static_cast<int64_t>(seq.block_table.size() - before);
}

void BlockManager::take_queued(Sequence& seq, int64_t count) {
  assert(count <= queued_);
  queued_ -= count;
  while (count > 0) {
    Queued& e = queue_.front();
    if (e.block != kRange) {  // one block: its content, if any, is evicted
      const Queued q = e;
      queue_.pop_front();
      if (q.node.valid()) {
        if (tree_.first_block(q.node) == q.block) {
          tree_.evict_first(q.node);
        } else {
          tree_.evict_later(q.node, q.block);
        }
      }
      seq.block_table.push_back(q.block);
      --count;
      continue;
    }
    // A hold's blocks, from its last: the ones nobody claimed since are evicted.
    const int32_t chunk = e.node.chunk, low = e.node.slot;
    if (tree_.plain_run(chunk)) {
      const int32_t n = static_cast<int32_t>(std::min<int64_t>(count, e.top - low + 1));
      tree_.evict_run(chunk, e.top - n + 1, e.top, seq.block_table);
      e.top -= n;
      count -= n;
    } else {
      const Node node{chunk, e.top--};
      PrefixTree::SlotState& s = tree_.state(node);
      if (s.out) {  // claimed since (and queued on its own if freed again)
        s.out = false;
      } else {
        assert(tree_.ref(node) == 0);
        seq.block_table.push_back(tree_.first_block(node));
        tree_.evict_first(node);
        --count;
      }
    }
    if (e.top < low) queue_.pop_front();
  }
}

void BlockManager::free(Sequence& seq) {
  if (hybrid_) free_hybrid(seq);
  if (plain_) {  // every block goes back to spare_, in the table's order: copied, not reversed
    spare_.insert(spare_.end(), seq.block_table.begin(), seq.block_table.end());
    used_ -= static_cast<int64_t>(seq.block_table.size());
  } else if (prefix_caching_) {
    free_cached(seq);
  } else {  // kFifo: every block joins the queue, tail first
    for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) queue_.push_back({*it, {}});
    used_ -= static_cast<int64_t>(seq.block_table.size());
    queued_ += static_cast<int64_t>(seq.block_table.size());
  }
  keep_table(seq);
  seq.num_registered_blocks = 0;
  if (!plain_) compact_queue();
}

void BlockManager::compact_queue() {
  queue_.maybe_compact([&](const Queued& q, int64_t at) {
    if (q.block < 0 || !q.node.valid()) return;
    if (tree_.first_block(q.node) == q.block) {
      tree_.state(q.node).queued = at;
    } else {
      tree_.later_copy(q.node, q.block).queued = at;
    }
  });
}

void BlockManager::hand_over(Sequence& from, Sequence& to) {
  to.block_table.clear();
  to.block_table.swap(from.block_table);
  to.block_runs.clear();
  to.block_runs.swap(from.block_runs);
  to.num_registered_blocks = std::exchange(from.num_registered_blocks, 0);
  to.window_blocks = std::exchange(from.window_blocks, 0);
  to.window_nulls = std::exchange(from.window_nulls, 0);
  if (prefix_caching_) tree_.pass_holds(to.block_runs, from, to);
}

void BlockManager::keep_table(Sequence& seq) {
  std::vector<int32_t> table = std::exchange(seq.block_table, {});
  std::vector<BlockRun> runs = std::exchange(seq.block_runs, {});
  if (table.capacity() > 0 && kept_tables_.size() < kKeptTables) {
    table.clear();
    kept_tables_.push_back(std::move(table));
  }
  if (runs.capacity() > 0 && kept_runs_.size() < kKeptTables) {
    runs.clear();
    kept_runs_.push_back(std::move(runs));
  }
}

}  // namespace servesim
