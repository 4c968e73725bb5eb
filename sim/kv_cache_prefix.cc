// The block manager's prefix caching (sim/kv_cache.h): lookups, claims of cached blocks,
// registration of computed ones, and their release, over the prefix tree (sim/prefix_tree.h).
#include <algorithm>
#include <cassert>
#include <utility>

#include "sim/kv_cache.h"

namespace servesim {

// FullAttentionManager.find_longest_cache_hit, capped at num_tokens - 1 as
// KVCacheManager.get_computed_blocks caps it: a walk down the tree from the root along seq's
// contents while they have copies.
int32_t BlockManager::cached_prefix_tokens(Sequence& seq) {
  assert(seq.block_table.empty());
  if (!prefix_caching_ || seq.num_tokens() <= 1) return 0;
  const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  path_.clear();
  tree_.walk(seq, max_blocks, path_);
  path_seq_ = &seq;
  path_version_ = tree_.version();
  return static_cast<int32_t>(path_.size()) * block_size_;
}

const std::vector<PrefixTree::Node>& BlockManager::hit_path(const Sequence& seq,
                                                            int32_t num_blocks) const {
  if (path_seq_ != &seq || path_version_ != tree_.version() ||
      path_.size() < static_cast<size_t>(num_blocks)) {
    // Not the walk just made: walk again (the sequence's hashes are a memo, not its state).
    const_cast<BlockManager*>(this)->cached_prefix_tokens(const_cast<Sequence&>(seq));
  }
  assert(path_.size() >= static_cast<size_t>(num_blocks));
  return path_;
}

int64_t BlockManager::evictable_hits(const Sequence& seq, int32_t num_cached_tokens) const {
  // Cached blocks that nobody holds sit in the free queue: claiming them uses up free room
  // (SingleTypeKVCacheManager.get_num_blocks_to_allocate counts them as blocks to allocate).
  if (unlimited()) return 0;
  const int32_t num_blocks = num_cached_tokens / block_size_;
  const std::vector<Node>& path = hit_path(seq, num_blocks);
  return std::count_if(path.begin(), path.begin() + num_blocks,
                       [&](Node n) { return tree_.ref(n) == 0; });
}

void BlockManager::claim_cached(Sequence& seq, int32_t cached_blocks) {
  const std::vector<Node>& path = hit_path(seq, cached_blocks);
  for (int32_t b = 0; b < cached_blocks; ++b) {
    const Node node = path[static_cast<size_t>(b)];
    const bool unheld = tree_.ref(node) == 0;
    PrefixTree::SlotState& s = tree_.state(node);
    if (unheld) {
      if (!unlimited()) {  // out of the free queue: its own entry, or the range it lies in
        if (s.queued != kNone) {
          queue_.remove(s.queued);
          s.queued = kNone;
        } else {
          s.out = true;
        }
        --queued_;
      }
      ++used_;
    }
    ++s.ref;
    seq.block_table.push_back(tree_.first_block(node));
    append_run(seq, node, 1, false);
  }
}

void BlockManager::append_run(Sequence& seq, Node first, int32_t count, bool hold) {
  if (!seq.block_runs.empty()) {
    BlockRun& last = seq.block_runs.back();
    if (last.chunk == first.chunk && last.slot + last.count == first.slot && last.hold == hold) {
      last.count += count;
      return;
    }
  }
  seq.block_runs.push_back({first.chunk, first.slot, count, hold});
}

void BlockManager::register_blocks(Sequence& seq, size_t num_blocks) {
  auto k = static_cast<size_t>(seq.num_registered_blocks);
  if (k >= num_blocks) return;
  // Along what the tree already holds (copies computed side by side), then new contents.
  Node node = PrefixTree::kRoot;
  if (k > 0) {
    const BlockRun& last = seq.block_runs.back();
    node = {last.chunk, last.slot + last.count - 1};
  }
  for (; k < num_blocks; ++k) {
    const Node next = tree_.child(node, seq, static_cast<int32_t>(k));
    if (!next.valid()) break;
    tree_.add_copy(next, seq.block_table[k]);
    append_run(seq, next, 1, false);
    node = next;
  }
  if (k < num_blocks) {
    const std::span<const int32_t> fresh(seq.block_table.data() + k, num_blocks - k);
    append_run(seq, tree_.extend(node, seq, static_cast<int32_t>(k), fresh),
               static_cast<int32_t>(fresh.size()), true);
  }
  seq.num_registered_blocks = static_cast<int32_t>(num_blocks);
}

void BlockManager::free_cached(Sequence& seq) {
  // Tail first (vLLM's KVCacheManager.free, so that a sequence's tail is evicted before its head):
  // the blocks after the registered ones have no hash; then the registered ones, run by run.
  for (auto b = seq.block_table.size(); b-- > static_cast<size_t>(seq.num_registered_blocks);) {
    release_hashless(seq.block_table[b]);
  }
  auto b = static_cast<size_t>(seq.num_registered_blocks);
  for (auto run = seq.block_runs.rbegin(); run != seq.block_runs.rend(); ++run) {
    b -= static_cast<size_t>(run->count);
    if (run->hold) {  // the blocks it registered: at once
      [[maybe_unused]] const PrefixTree::Hold hold = tree_.release_hold({run->chunk, run->slot});
      assert(hold.holder == &seq && hold.from == run->slot && hold.to == run->slot + run->count);
      release_hold({run->chunk, run->slot}, run->slot + run->count - 1);
      continue;
    }
    for (int32_t i = run->count; i-- > 0;) {
      release(seq.block_table[b + static_cast<size_t>(i)], {run->chunk, run->slot + i});
    }
  }
  assert(b == 0);
}

void BlockManager::release_hashless(int32_t id) {
  --used_;  // its one holder was the sequence
  if (unlimited() || free_order_ == FreeOrder::kHashlessFirst) {
    spare_.push_back(id);  // vLLM's BlockPool.free_blocks: reused before any cached block
  } else {
    queue_.push_back({id, {}});
    ++queued_;
  }
}

void BlockManager::release(int32_t id, Node node) {
  int64_t* queued;
  if (tree_.first_block(node) == id) {
    PrefixTree::SlotState& s = tree_.state(node);
    assert(s.ref > 0);
    --s.ref;
    if (tree_.ref(node) > 0) return;  // still shared by another sequence
    queued = &s.queued;
  } else {
    PrefixTree::Copy& c = tree_.later_copy(node, id);
    assert(c.ref > 0);
    if (--c.ref > 0) return;
    queued = &c.queued;
  }
  --used_;
  // Cached: evicted least recently freed first; cached blocks stay cached forever when unlimited.
  if (!unlimited()) {
    *queued = queue_.push_back({id, node});
    ++queued_;
  }
}

void BlockManager::release_hold(Node first, int32_t last) {
  // Slots last down to first.slot, each freed unless someone claimed it since: as runs of the
  // free queue (one when the chunk keeps no per-slot state).
  const int32_t chunk = first.chunk;
  if (tree_.plain_run(chunk)) {  // nobody else holds any
    const int32_t n = last - first.slot + 1;
    used_ -= n;
    if (!unlimited()) {
      queue_.push_back({kRange, first, last});
      queued_ += n;
    }
    return;
  }
  int32_t top = last;
  for (int32_t j = last; j >= first.slot - 1; --j) {
    const PrefixTree::SlotState* s = j >= first.slot ? tree_.find_state({chunk, j}) : nullptr;
    if (j >= first.slot && (s == nullptr || s->ref == 0)) continue;
    if (top > j) {  // slots top down to j + 1 freed
      const int32_t n = top - j;
      used_ -= n;
      if (!unlimited()) {
        queue_.push_back({kRange, {chunk, j + 1}, top});
        queued_ += n;
      }
    }
    top = j - 1;
  }
}

}  // namespace servesim
