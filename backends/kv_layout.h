// The KV cache's layout as vLLM 0.33's hybrid KV cache manager lays it out on one GPU: the layers
// grouped by KV spec (full attention, sliding window, chunked local, MLA, Mamba state), one page
// size across groups, the block count that an amount of memory holds, and the requests of N tokens
// it holds at once ("maximum concurrency"). scripts/vllm_kv_xcheck.py checks it against vLLM's own
// planner.
//
// Rules (vllm/v1/core/kv_cache_planning.py and the layers' get_kv_cache_spec):
//  - A layer's page is block_size x its KV bytes per token on one GPU: 2 x KV heads per GPU x
//    head dim x element size (heads replicated when tp exceeds them); MLA's one latent vector of
//    kv_lora_rank + qk_rope_head_dim, not split by tp; a Mamba layer's state (convolution and
//    recurrent, split by tp) padded to the attention page.
//  - With Mamba layers the attention block size grows until one attention page holds a state:
//    a multiple of lcm(block size, 64) (the FlashInfer GDN prefill's checkpoints, with prefix
//    caching) or of the block size.
//  - Layers of one spec form one group when all layers share it. Otherwise each kind's layers split
//    into groups of the same size: the smallest kind's count, or the largest's when it is below
//    1.5 x the smallest; group i of a kind takes every k-th layer from its i-th. Kinds in the order
//    of their first layer.
//  - Without the hybrid manager (vLLM's default for chunked local attention; its
//    --disable-hybrid-kv-cache-manager), sliding-window and chunked layers keep full attention's KV
//    when the model has full layers: one group.
//  - One block id holds a page in every layer of the largest group: num_blocks = memory / (page x
//    that group's layers), floored; block 0 is vLLM's null block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/model.h"
#include "sim/kv_groups.h"
#include "sim/result.h"

namespace servesim {

struct KvLayoutOptions {
  int32_t tp = 1;
  DType kv = DType::kBf16;           // KV element type (MLA, attention); Mamba state: the model's
  int32_t block_size = 16;           // tokens per block before any Mamba alignment
  bool hybrid_manager = true;        // false: vLLM's --disable-hybrid-kv-cache-manager
  bool chunked_local_hybrid = false; // VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1
  bool prefix_caching = true;        // Mamba "align" mode (a state block per 64-token multiple)
  int64_t max_in_flight_tokens = 16384;  // sliding/chunked groups keep these too: 2 x 8192
};

struct KvGroup {
  AttentionKind kind = AttentionKind::kFull;
  std::vector<int32_t> layers;
  int64_t window = 0;              // sliding window or chunk (tokens); 0 = none
  double page_bytes = 0;           // one layer's page, one GPU
};

struct KvLayout {
  std::vector<KvGroup> groups;
  int64_t block_size = 16;
  double bytes_per_block = 0;      // one block id over every layer of the largest group
  bool hybrid = false;             // more than one group, or a group that is not full/MLA
  int64_t mamba_blocks = 0;        // blocks a request holds in each Mamba group

  // Blocks in `memory` bytes (the null block included).
  int64_t num_blocks(double memory) const;
  // Blocks one request of `tokens` tokens reserves at most in all groups together.
  int64_t blocks_per_request(int64_t tokens, int64_t max_in_flight_tokens) const;
  // Requests of `tokens` tokens that `num_blocks` blocks hold at once, as vLLM logs it.
  double max_concurrency(int64_t num_blocks, int64_t tokens, int64_t max_in_flight_tokens) const;
};

// The layout of `model`'s KV cache on one GPU.
KvLayout kv_layout(const ModelSpec& model, const KvLayoutOptions& o);

// The block manager's view of a layout: its groups besides the first full-attention (or MLA)
// group. None when the layout has no such group (every layer sliding: Mistral; the block manager
// then holds full attention's blocks) or is one group. Mamba groups only without prefix caching.
KvGroups scheduler_groups(const KvLayout& layout, bool prefix_caching);

}  // namespace servesim
