// The KV groups of a hybrid layout, as the block manager (sim/kv_cache.h) counts them.
#pragma once

#include <cstdint>

namespace servesim {

// A hybrid KV layout (vLLM's hybrid KV cache manager, backends/kv_layout.h): besides the first
// full-attention group, whose blocks are the block table's, more groups take blocks from the same
// pool, one page each per block id. Without prefix caching only their counts matter:
//  - extra_full more full-attention (or MLA) groups hold as many blocks as the first;
//  - `windowed` groups of sliding-window (or chunked-local) attention hold a table as long as the
//    first, whose leading blocks are freed (become null) once they leave the window: when a
//    request is allocated for, the tokens it has computed decide what is skipped
//    (SlidingWindowManager.remove_skipped_blocks: computed - window + 1 tokens; chunked:
//    computed rounded down to the chunk);
//  - `state` Mamba groups hold one block per request ("none" mode, without prefix caching).
// At admission (the whole sequence must fit: scheduler_reserve_full_isl) a windowed group counts
// at most admission_cap blocks (vLLM's max_admission_blocks_per_request).
struct KvGroups {
  int32_t extra_full = 0;
  int32_t windowed = 0;
  bool chunked = false;       // windowed groups are chunked local (else sliding window)
  int64_t window = 0;         // tokens: the sliding window, or the chunk
  int64_t admission_cap = 0;  // blocks; 0 = none
  int32_t state = 0;
  bool any() const { return extra_full > 0 || windowed > 0 || state > 0; }
  // vLLM's max_admission_blocks_per_request of a windowed group of `block_size`-token blocks, with
  // `in_flight` tokens scheduled and unsettled (max_num_batched_tokens without async scheduling)
  // and a context of max_model_len (0: none).
  void set_admission_cap(int32_t block_size, int64_t in_flight, int64_t max_model_len);
};

}  // namespace servesim
