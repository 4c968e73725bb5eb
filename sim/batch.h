// One iteration's work for one replica: the list a policy forms and a backend prices.
//
// Each item is a prefill chunk (new_tokens >= 1 of a prompt or of a recomputation) or one decode
// token, with the number of tokens already in the KV cache beside it. A padding item (static batching
// with padding = "pad") costs compute like a decode but produces nothing.
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
  // When items is empty but requests wait: the earliest time the policy wants to be asked again
  // (static batching waiting out max_wait). kNever = only when something arrives or finishes.
  Time wake_at = kNever;

  bool empty() const { return items.empty(); }
  void clear() {
    items.clear();
    wake_at = kNever;
  }
};

}  // namespace servesim
