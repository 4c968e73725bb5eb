// The work of one sequence's attention in one layer on one GPU, by attention kind: the FLOPs and the
// bytes that cross device memory when `new_tokens` tokens attend after `context` cached ones.
//  - full: every earlier token; K and V per KV head (heads split by tp, replicated past them).
//  - sliding window W: each token sees the last W tokens (itself included); KV read is bounded.
//  - chunked local C: each token sees the tokens of its own C-token chunk up to itself.
//  - MLA (DeepSeek): a decode runs the absorbed form over the latent cache (kv_lora_rank +
//    qk_rope_head_dim values per token, the same on every GPU): QK over rank + rope and PV over the
//    rank per head; a prompt chunk runs the decompressed form: the cached latents are expanded
//    by kv_b_proj (a GEMM: `decompress_flops`), then attention with qk_nope + qk_rope and v heads.
//  - linear (Gated DeltaNet): a constant state per sequence read and written once per layer, and
//    per token its recurrence (a decode) or the chunked algorithm (chunks of 64 tokens).
// The affine parts of a one-token decode (per cached token, per sequence) are exposed for the
// decode group's closed form.
#pragma once

#include <cstdint>

#include "backends/model.h"

namespace servesim {

struct AttentionWork {
  double flops = 0;             // attention FLOPs (all pairs)
  double self_flops = 0;        // of which the chunk's tokens with each other (causal triangle)
  double bytes = 0;
  double decompress_flops = 0;  // MLA prompt chunks: expanding the cached latents (a GEMM)
};

class AttentionShapes {
 public:
  // kv: the cache's element type; activations: Q, outputs and a linear layer's state.
  AttentionShapes(const ModelSpec& m, int32_t tp, DType kv, DType activations);

  AttentionWork work(AttentionKind kind, int64_t new_tokens, int64_t context) const;

  // A one-token decode over `context` cached tokens in a layer of `kind` (not sliding or chunked):
  // bytes = context x per_context + per_item, FLOPs likewise.
  struct Affine {
    double bytes_per_context = 0, bytes_per_item = 0, flops_per_context = 0, flops_per_item = 0;
  };
  Affine decode_affine(AttentionKind kind) const;

 private:
  AttentionWork full(double n, double ctx, double kv_tokens, double pairs, double self) const;
  AttentionWork mla(double n, double ctx) const;
  AttentionWork linear(double n) const;

  double q_dim_ = 0, kv_dim_ = 0, kvb_ = 0, ab_ = 0;
  double heads_ = 0;  // attention heads per GPU
  double tp_ = 1;
  // The model's shapes that attention reads (kept by value: the model may move).
  double rank_ = 0, rope_ = 0, nope_ = 0, v_ = 0, window_ = 0;
  int64_t chunk_ = 1;
  double linear_kv_ = 0, linear_dk_ = 0, linear_dv_ = 0, linear_k_heads_ = 0, state_bytes_ = 0;
};

// Pairs (query, key) of `n` tokens after `ctx` cached ones when each sees at most `window` tokens
// (itself included); window 0 = unbounded.
double windowed_pairs(double n, double ctx, double window);
// The same when each sees the tokens of its own `chunk`-token chunk up to itself.
double chunked_pairs(int64_t n, int64_t ctx, int64_t chunk);

}  // namespace servesim
