// One iteration's work for one replica: the list a policy forms and a backend prices.
//
// Each item is a prefill chunk (new_tokens >= 1 of a prompt or of a recomputation) or one decode
// token, with the number of tokens already in the KV cache beside it. A padding item (static batching
// with padding = "pad") costs compute like a decode but produces nothing.
//
// Besides the items, a batch may hold the replica's decode group (ReplicaView::schedule_decode_group):
// its first `group` running requests, each computing its one next token, described only by their
// count and the sum of their contexts. They come before the items, in admission order. A backend
// sees a group only if it prices one (Backend::prices_decode_groups); a recorder, only if it takes
// one (Recorder::accepts_grouped_decodes).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/request.h"
#include "sim/time.h"

namespace servesim {

struct BatchItem {
  Sequence* seq = nullptr;
  int32_t new_tokens = 0;      // tokens computed in this iteration
  int32_t context_tokens = 0;  // tokens already in the KV cache before this iteration
  bool padding = false;        // costs compute, produces no token

  // Filled in by the replica after the iteration ran:
  bool emitted = false;        // this item produced an output token at the iteration's end
  Time token_gap = -1;         // time since the request's previous streamed token, or -1
};

struct Batch {
  std::vector<BatchItem> items;
  int32_t group = 0;          // decodes of the replica's decode group, not in items
  int64_t group_context = 0;  // the tokens already in the KV cache of those, summed
  // When items is empty but requests wait: the earliest time the policy wants to be asked again
  // (static batching waiting out max_wait). kNever = only when something arrives or finishes.
  Time wake_at = kNever;

  bool empty() const { return items.empty() && group == 0; }
  size_t size() const { return items.size() + static_cast<size_t>(group); }
  void clear() {
    items.clear();
    group = 0;
    group_context = 0;
    wake_at = kNever;
  }
};

}  // namespace servesim
