#include "sim/kv_cache.h"

#include <cassert>

namespace servesim {

BlockManager::BlockManager(int32_t block_size, int64_t num_blocks)
    : block_size_(block_size), total_(num_blocks) {
  assert(block_size >= 1);
  assert(num_blocks >= 0 || num_blocks == kUnlimited);
}

int64_t BlockManager::num_free() const {
  return unlimited() ? std::numeric_limits<int32_t>::max() - used_ : total_ - used_;
}

bool BlockManager::can_allocate(const Sequence& seq, int64_t num_tokens) const {
  const int64_t need = blocks_for(num_tokens) - static_cast<int64_t>(seq.block_table.size());
  return need <= 0 || need <= num_free();
}

bool BlockManager::allocate(Sequence& seq, int64_t num_tokens) {
  const int64_t need = blocks_for(num_tokens) - static_cast<int64_t>(seq.block_table.size());
  if (need <= 0) return true;
  if (need > num_free()) return false;
  for (int64_t i = 0; i < need; ++i) {
    int32_t id;
    if (!free_list_.empty()) {
      id = free_list_.back();
      free_list_.pop_back();
    } else {
      id = next_fresh_++;
    }
    seq.block_table.push_back(id);
  }
  used_ += need;
  return true;
}

void BlockManager::free(Sequence& seq) {
  // Freed in reverse so that the tail blocks, the least likely to be shared, are reused first.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    free_list_.push_back(*it);
  }
  used_ -= static_cast<int64_t>(seq.block_table.size());
  seq.block_table.clear();
}

}  // namespace servesim
