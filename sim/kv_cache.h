// The paged KV block manager of one replica, as vLLM's: KV memory is a fixed number of blocks of
// `block_size` tokens; a sequence holds a block table that grows as its tokens are computed.
//
// Policies ask it for room (can_allocate / allocate) and give room back (free); they never count
// bytes themselves. Block ids come from a free list; with an unlimited cache (the unit backend
// without kv.blocks) ids are handed out fresh and nothing is preallocated, so the cost of an
// allocation never depends on the cache's size.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/request.h"

namespace servesim {

class BlockManager {
 public:
  static constexpr int64_t kUnlimited = -1;

  // REQUIRES: block_size >= 1; num_blocks >= 0 or kUnlimited.
  BlockManager(int32_t block_size, int64_t num_blocks);

  int32_t block_size() const { return block_size_; }
  bool unlimited() const { return total_ == kUnlimited; }
  // Total blocks, or kUnlimited.
  int64_t num_total() const { return total_; }
  int64_t num_used() const { return used_; }
  // Free blocks; a very large number when unlimited.
  int64_t num_free() const;

  // Blocks needed to hold `tokens` tokens.
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  // True if a sequence of `tokens` tokens could fit in an empty cache.
  bool fits_at_all(int64_t tokens) const { return unlimited() || blocks_for(tokens) <= total_; }

  // True if `seq` can grow to hold `num_tokens` tokens in total (a no-op when it already does).
  bool can_allocate(const Sequence& seq, int64_t num_tokens) const;
  // Grows seq's block table to hold `num_tokens` tokens. Returns false, changing nothing, if there
  // are not enough free blocks.
  bool allocate(Sequence& seq, int64_t num_tokens);
  // Returns all of seq's blocks to the free list. Safe on a sequence that holds none.
  void free(Sequence& seq);

 private:
  int32_t block_size_;
  int64_t total_;
  int64_t used_ = 0;
  int32_t next_fresh_ = 0;           // ids below this have been handed out at least once
  std::vector<int32_t> free_list_;   // ids handed back, reused LIFO
};

}  // namespace servesim
