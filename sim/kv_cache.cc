#include "sim/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>
#include <utility>

namespace servesim {
namespace {

uint64_t mix(uint64_t h, uint64_t v) { return content_id(h, v); }

}  // namespace

BlockManager::BlockManager(int32_t block_size, int64_t num_blocks, bool prefix_caching,
                           FreeOrder free_order)
    : block_size_(block_size),
      block_shift_(std::has_single_bit(static_cast<uint32_t>(block_size)) ? std::countr_zero(static_cast<uint32_t>(block_size)) : -1),
      total_(num_blocks),
      prefix_caching_(prefix_caching),
      free_order_(free_order),
      plain_(!prefix_caching && (num_blocks == kUnlimited || free_order == FreeOrder::kHashlessFirst)) {
  assert(block_size >= 1);
  assert(num_blocks >= 0 || num_blocks == kUnlimited);
}

void BlockManager::unlink(int32_t id) {
  const auto i = static_cast<size_t>(id);
  if (prev_[i] != kNone) next_[static_cast<size_t>(prev_[i])] = next_[i];
  else head_ = next_[i];
  if (next_[i] != kNone) prev_[static_cast<size_t>(next_[i])] = prev_[i];
  else tail_ = prev_[i];
  prev_[i] = next_[i] = kNone;
  --queued_;
}

void BlockManager::push_free(int32_t id) {
  const auto i = static_cast<size_t>(id);
  prev_[i] = tail_;
  next_[i] = kNone;
  if (tail_ != kNone) next_[static_cast<size_t>(tail_)] = id;
  else head_ = id;
  tail_ = id;
  ++queued_;
}

int32_t BlockManager::take_block() {
  int32_t id;
  if (!spare_.empty()) {  // a freed block without a hash: nothing is evicted
    id = spare_.back();
    spare_.pop_back();
  } else if (unlimited() || next_fresh_ < total_) {
    id = next_fresh_++;
    ref_.push_back(0);
    hash_.push_back(0);
    prev_.push_back(kNone);
    next_.push_back(kNone);
    same_hash_.push_back(kNone);
  } else {
    assert(head_ != kNone);
    id = head_;
    unlink(id);
    if (hash_[static_cast<size_t>(id)] != 0) evict(id);  // the least recently freed cached block
  }
  return id;
}

void BlockManager::register_block(int32_t id, uint64_t hash) {
  // vLLM's BlockPool._insert_block_hash: a block whose hash is already cached under another block
  // is cached too, as a further copy; lookups keep finding the first.
  hash_[static_cast<size_t>(id)] = hash;
  same_hash_[static_cast<size_t>(id)] = kNone;
  int32_t last = cache_.find(hash);
  if (last == BlockHashIndex::kMissing) {
    cache_.insert(hash, id);
    return;
  }
  while (same_hash_[static_cast<size_t>(last)] != kNone) last = same_hash_[static_cast<size_t>(last)];
  same_hash_[static_cast<size_t>(last)] = id;
}

void BlockManager::evict(int32_t id) {
  // vLLM's BlockHashToBlockMap.pop(hash, block_id): only this copy goes; the others stay cached.
  uint64_t& h = hash_[static_cast<size_t>(id)];
  int32_t& after = same_hash_[static_cast<size_t>(id)];
  const int32_t first = cache_.find(h);
  if (first == id) {
    if (after != kNone) {
      cache_.assign(h, after);
    } else {
      cache_.erase(h);
    }
  } else {
    int32_t prev = first;
    while (same_hash_[static_cast<size_t>(prev)] != id) prev = same_hash_[static_cast<size_t>(prev)];
    same_hash_[static_cast<size_t>(prev)] = after;
  }
  after = kNone;
  h = 0;
}

void BlockManager::hash_blocks(Sequence& seq, size_t num_blocks) const {
  // Walk the content from the first token not yet hashed; each block's hash chains the previous
  // block's hash with the (content id, offset, length) pieces it covers.
  if (seq.block_hashes.size() >= num_blocks) return;
  const int64_t bs = block_size_;
  int64_t pos = static_cast<int64_t>(seq.block_hashes.size()) * bs;
  int32_t s = 0;          // the prompt segment holding `pos`
  int64_t seg_start = 0;  // its first token
  while (s < seq.num_prompt_segments && seg_start + seq.prompt_segments[s].tokens <= pos) {
    seg_start += seq.prompt_segments[s].tokens;
    ++s;
  }
  while (seq.block_hashes.size() < num_blocks) {
    const int64_t end = pos + bs;
    uint64_t h = seq.block_hashes.empty() ? 0x736572766573696dULL : seq.block_hashes.back();
    while (pos < end) {
      uint64_t id;
      int64_t offset, len;
      if (pos < seq.prompt_tokens) {
        const Segment& seg = seq.prompt_segments[s];
        id = seg.id;
        offset = pos - seg_start;
        len = std::min<int64_t>(seg_start + seg.tokens, end) - pos;
        if (pos + len == seg_start + seg.tokens) {
          seg_start += seg.tokens;
          ++s;
        }
      } else {
        id = seq.output_id;
        offset = pos - seq.prompt_tokens;
        len = end - pos;
      }
      h = mix(mix(h, id), static_cast<uint64_t>(offset) << 32 | static_cast<uint64_t>(len));
      pos += len;
    }
    seq.block_hashes.push_back(h == 0 ? 1 : h);  // 0 means "not cached"
  }
}

int32_t BlockManager::lookup(uint64_t hash) const { return cache_.find(hash); }

// FullAttentionManager.find_longest_cache_hit, capped at num_tokens - 1 as
// KVCacheManager.get_computed_blocks caps it.
int32_t BlockManager::cached_prefix_tokens(Sequence& seq) {
  assert(seq.block_table.empty());
  if (!prefix_caching_ || seq.num_tokens() <= 1) return 0;
  const auto max_blocks = static_cast<size_t>((seq.num_tokens() - 1) / block_size_);
  hash_blocks(seq, max_blocks);
  size_t hits = 0;
  while (hits < max_blocks && lookup(seq.block_hashes[hits]) != kNone) ++hits;
  return static_cast<int32_t>(hits) * block_size_;
}

int64_t BlockManager::evictable_hits(const Sequence& seq, int32_t num_cached_tokens) const {
  // Cached blocks that nobody holds sit in the free queue: claiming them uses up free room
  // (SingleTypeKVCacheManager.get_num_blocks_to_allocate counts them as blocks to allocate).
  int64_t n = 0;
  for (int32_t b = 0; b < num_cached_tokens / block_size_; ++b) {
    const int32_t id = lookup(seq.block_hashes[static_cast<size_t>(b)]);
    if (ref_[static_cast<size_t>(id)] == 0 && !unlimited()) ++n;
  }
  return n;
}

bool BlockManager::can_allocate(const Sequence& seq, int64_t num_tokens,
                                int32_t num_cached_tokens) const {
  const int64_t held = static_cast<int64_t>(seq.block_table.size()) + (num_cached_tokens > 0 ? num_cached_tokens / block_size_ : 0);
  const int64_t need = blocks_for(num_tokens) - held;
  const int64_t evictable = num_cached_tokens > 0 ? evictable_hits(seq, num_cached_tokens) : 0;
  return std::max<int64_t>(need, 0) + evictable <= num_free();
}

bool BlockManager::allocate_blocks(Sequence& seq, int64_t num_tokens, int32_t num_cached_tokens) {
  assert(num_cached_tokens % block_size_ == 0);
  assert(num_cached_tokens == 0 || seq.block_table.empty());
  if (!can_allocate(seq, num_tokens, num_cached_tokens)) return false;
  if (seq.block_table.capacity() == 0 && !kept_tables_.empty()) {
    seq.block_table = std::move(kept_tables_.back());
    kept_tables_.pop_back();
  }

  // Claim the cached leading blocks.
  const int32_t cached_blocks = num_cached_tokens > 0 ? num_cached_tokens / block_size_ : 0;
  for (int32_t b = 0; b < cached_blocks; ++b) {
    const int32_t id = lookup(seq.block_hashes[static_cast<size_t>(b)]);
    int32_t& ref = ref_[static_cast<size_t>(id)];
    if (ref == 0) {
      if (!unlimited()) unlink(id);
      ++used_;
    }
    ++ref;
    seq.block_table.push_back(id);
  }
  if (num_cached_tokens > 0) seq.num_registered_blocks = cached_blocks;

  // Fresh blocks for the rest: freed blocks without a hash first, taken together (a prompt takes
  // many) in the order take_block would pop them (without prefix caching, in the order they lie:
  // free() put them there in their table's order), then the others one by one.
  const int64_t want = blocks_for(num_tokens) - static_cast<int64_t>(seq.block_table.size());
  if (want == 1 && !spare_.empty()) {  // a decode's next block: the same, without the bulk's moves
    const int32_t id = spare_.back();
    spare_.pop_back();
    if (!plain_) ref_[static_cast<size_t>(id)] = 1;
    ++used_;
    seq.block_table.push_back(id);
  } else if (want > 0 && !spare_.empty()) {
    const auto bulk = static_cast<std::ptrdiff_t>(std::min<int64_t>(want, static_cast<int64_t>(spare_.size())));
    const size_t from = seq.block_table.size();
    seq.block_table.insert(seq.block_table.end(), spare_.end() - bulk, spare_.end());
    spare_.resize(spare_.size() - static_cast<size_t>(bulk));
    if (!plain_) {  // in take_block's order, each with its one holder
      std::reverse(seq.block_table.begin() + static_cast<std::ptrdiff_t>(from), seq.block_table.end());
      for (size_t b = from; b < seq.block_table.size(); ++b) ref_[static_cast<size_t>(seq.block_table[b])] = 1;
    }
    used_ += bulk;
  }
  for (const int64_t blocks = blocks_for(num_tokens); static_cast<int64_t>(seq.block_table.size()) < blocks;) {
    const int32_t id = take_block();
    ref_[static_cast<size_t>(id)] = 1;
    ++used_;
    seq.block_table.push_back(id);
  }

  // Register the blocks these tokens fill: they are computed by the iteration being scheduled
  // (vLLM's KVCacheManager.allocate_slots -> cache_blocks).
  if (prefix_caching_) {
    const auto full = static_cast<size_t>(num_tokens / block_size_);
    hash_blocks(seq, full);
    for (auto b = static_cast<size_t>(seq.num_registered_blocks); b < full; ++b) {
      const int32_t id = seq.block_table[b];
      assert(hash_[static_cast<size_t>(id)] == 0);  // a fresh block, never a claimed one
      register_block(id, seq.block_hashes[b]);
    }
    seq.num_registered_blocks = static_cast<int32_t>(std::max(full, static_cast<size_t>(seq.num_registered_blocks)));
  }
  return true;
}

void BlockManager::free(Sequence& seq) {
  if (plain_) {  // every block goes back to spare_, in the table's order: copied, not reversed
    spare_.insert(spare_.end(), seq.block_table.begin(), seq.block_table.end());
    used_ -= static_cast<int64_t>(seq.block_table.size());
    keep_table(seq);
    seq.num_registered_blocks = 0;
    return;
  }
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    const int32_t id = *it;
    int32_t& ref = ref_[static_cast<size_t>(id)];
    assert(ref > 0);
    if (--ref > 0) continue;  // still shared by another sequence
    --used_;
    const bool hashless = hash_[static_cast<size_t>(id)] == 0;
    if (unlimited()) {
      if (hashless) spare_.push_back(id);  // cached blocks stay cached forever when unlimited
    } else if (hashless && free_order_ == FreeOrder::kHashlessFirst) {
      spare_.push_back(id);  // vLLM's BlockPool.free_blocks: reused before any cached block
    } else {
      push_free(id);  // cached: evicted least recently freed first
    }
  }
  keep_table(seq);
  seq.num_registered_blocks = 0;
}

void BlockManager::keep_table(Sequence& seq) {
  std::vector<int32_t> table = std::exchange(seq.block_table, {});
  if (table.capacity() == 0 || kept_tables_.size() >= kKeptTables) return;
  table.clear();
  kept_tables_.push_back(std::move(table));
}

}  // namespace servesim
