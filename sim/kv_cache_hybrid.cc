// BlockManager with a hybrid KV layout (sim/kv_cache.h, KvGroups): the groups besides the first
// full-attention group, counted as vLLM's SingleTypeKVCacheManagers count them without prefix
// caching (vllm/v1/core/single_type_kv_cache_manager.py).
#include <algorithm>
#include <cassert>

#include "sim/kv_cache.h"

namespace servesim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void KvGroups::set_admission_cap(int32_t block_size, int64_t in_flight, int64_t max_model_len) {
  if (windowed == 0) return;
  int64_t tokens = chunked ? window + in_flight : window - 1 + in_flight;
  if (max_model_len > 0) tokens = std::min(tokens, max_model_len);
  // A sliding window may start inside a block: one more.
  admission_cap = ceil_div(tokens, block_size) + (chunked ? 0 : 1);
}

int64_t BlockManager::skipped_window_blocks(int64_t computed) const {
  const int64_t w = groups_.window;
  const int64_t skipped = groups_.chunked ? computed / w * w : std::max<int64_t>(0, computed - w + 1);
  return skipped / block_size_;
}

void BlockManager::release_skipped(Sequence& seq) {
  if (groups_.windowed == 0 || seq.block_table.empty()) return;
  const int64_t skip = std::min<int64_t>(skipped_window_blocks(seq.num_computed), seq.window_blocks);
  if (skip <= seq.window_nulls) return;
  hybrid_used_ -= (skip - seq.window_nulls) * groups_.windowed;
  seq.window_nulls = static_cast<int32_t>(skip);
}

int64_t BlockManager::hybrid_need_new(int64_t num_tokens, bool admission) const {
  const int64_t full = blocks_for(num_tokens);
  const int64_t window = admission && groups_.admission_cap > 0 ? std::min(full, groups_.admission_cap) : full;
  return full * (1 + groups_.extra_full) + window * groups_.windowed + groups_.state;
}

int64_t BlockManager::hybrid_need(const Sequence& seq, int64_t num_tokens, bool admission) const {
  // A request that holds no blocks (new, or preempted: recomputed from the start) needs its whole
  // tables; a running one what its tables lack (get_num_blocks_to_allocate).
  if (seq.block_table.empty()) return hybrid_need_new(num_tokens, admission);
  const int64_t full = blocks_for(num_tokens);
  const int64_t table = static_cast<int64_t>(seq.block_table.size());
  return std::max<int64_t>(full - table, 0) * (1 + groups_.extra_full) +
         std::max<int64_t>(full - seq.window_blocks, 0) * groups_.windowed;
}

bool BlockManager::allocate_hybrid(Sequence& seq, int64_t num_tokens) {
  // vLLM's allocate_slots: blocks out of the window are freed first, even when what follows fails.
  release_skipped(seq);
  const bool fresh = seq.block_table.empty();
  const int64_t need = hybrid_need(seq, num_tokens, false);
  if (need > num_free()) return false;
  const int64_t full = blocks_for(num_tokens);
  const int64_t before = static_cast<int64_t>(seq.block_table.size());
  if (seq.block_table.capacity() == 0 && !kept_tables_.empty()) {
    seq.block_table = std::move(kept_tables_.back());
    kept_tables_.pop_back();
  }
  take_blocks(seq, std::max(full, before));
  const int64_t grown = static_cast<int64_t>(seq.block_table.size()) - before;
  hybrid_used_ += grown * groups_.extra_full + (fresh ? groups_.state : 0);
  if (full > seq.window_blocks) {
    hybrid_used_ += (full - seq.window_blocks) * groups_.windowed;
    seq.window_blocks = static_cast<int32_t>(full);
  }
  if (!plain_) compact_queue();
  return true;
}

void BlockManager::free_hybrid(Sequence& seq) {
  if (!seq.block_table.empty()) {
    hybrid_used_ -= static_cast<int64_t>(seq.block_table.size()) * groups_.extra_full + groups_.state +
                    static_cast<int64_t>(seq.window_blocks - seq.window_nulls) * groups_.windowed;
  }
  seq.window_blocks = 0;
  seq.window_nulls = 0;
  assert(hybrid_used_ >= 0);
}

}  // namespace servesim
