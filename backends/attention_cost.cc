#include "backends/attention_cost.h"

#include <algorithm>
#include <cmath>

namespace servesim {
namespace {

// Gated DeltaNet's chunked prefill works on chunks of this many tokens (fla's chunk_gated_delta_rule).
constexpr double kLinearChunk = 64;

// Sum of the integers a..b (0 when b < a).
double sum_range(double a, double b) { return b < a ? 0 : (a + b) * (b - a + 1) / 2; }

}  // namespace

double windowed_pairs(double n, double ctx, double window) {
  // Token j (0-based) of the chunk sees min(window, ctx + j + 1) tokens: x = ctx+1 .. ctx+n.
  const double lo = ctx + 1, hi = ctx + n;
  if (window <= 0 || hi <= window) return sum_range(lo, hi);
  if (lo > window) return n * window;
  return sum_range(lo, window) + (hi - window) * window;
}

double chunked_pairs(int64_t n, int64_t ctx, int64_t chunk) {
  // Position p sees p mod chunk + 1 tokens; walk the chunks the n positions cross.
  double pairs = 0;
  for (int64_t p = ctx; p < ctx + n;) {
    const int64_t end = std::min(ctx + n, (p / chunk + 1) * chunk);
    pairs += sum_range(static_cast<double>(p % chunk + 1), static_cast<double>((end - 1) % chunk + 1));
    p = end;
  }
  return pairs;
}

AttentionShapes::AttentionShapes(const ModelSpec& m, int32_t tp, DType kv, DType activations) {
  const double t = tp;
  tp_ = t;
  rank_ = static_cast<double>(m.kv_lora_rank);
  rope_ = static_cast<double>(m.qk_rope_head_dim);
  nope_ = static_cast<double>(m.qk_nope_head_dim);
  v_ = static_cast<double>(m.v_head_dim);
  window_ = static_cast<double>(m.sliding_window);
  chunk_ = std::max<int64_t>(m.attention_chunk_size, 1);
  linear_kv_ = static_cast<double>(m.linear_value_heads);
  linear_k_heads_ = static_cast<double>(m.linear_key_heads);
  linear_dk_ = static_cast<double>(m.linear_key_head_dim);
  linear_dv_ = static_cast<double>(m.linear_value_head_dim);
  state_bytes_ = m.linear_state_values() / t * dtype_bytes(m.dtype);
  heads_ = static_cast<double>(m.num_heads) / t;
  q_dim_ = heads_ * static_cast<double>(m.head_dim);
  kv_dim_ = std::max(1.0, static_cast<double>(m.num_kv_heads) / t) * static_cast<double>(m.head_dim);
  kvb_ = dtype_bytes(kv);
  ab_ = dtype_bytes(activations);
}

AttentionWork AttentionShapes::full(double n, double ctx, double kv_tokens, double pairs, double self) const {
  AttentionWork w;
  w.flops = 4 * pairs * q_dim_;  // QK^T and PV, 2 FLOPs per multiply-add each
  w.self_flops = 4 * self * q_dim_;
  w.bytes = kv_tokens * 2 * kv_dim_ * kvb_   // read K and V (the new ones included)
            + n * 2 * kv_dim_ * kvb_          // write the new K and V
            + 2 * n * q_dim_ * ab_;           // read Q, write the output
  (void)ctx;
  return w;
}

AttentionWork AttentionShapes::mla(double n, double ctx) const {
  const double rank = rank_, rope = rope_;
  const double latent = (rank + rope) * kvb_;  // one token's cache, on every GPU
  AttentionWork w;
  if (n == 1) {  // absorbed: queries in the latent space, one "KV head" of rank + rope
    w.flops = 2 * heads_ * (2 * rank + rope) * (ctx + 1);
    w.bytes = (ctx + 1) * latent + latent + heads_ * (rank + rope + rank) * ab_;
    return w;
  }
  const double qk = nope_ + rope_;
  const double v = v_;
  const double pairs = n * ctx + n * (n + 1) / 2;
  w.flops = 2 * pairs * heads_ * (qk + v);
  w.self_flops = 2 * (n * (n + 1) / 2) * heads_ * (qk + v);
  w.decompress_flops = 2 * ctx * rank * heads_ * (nope_ + v);
  // Latents read and written; the expanded K and V written and read back; Q read, output written.
  w.bytes = (ctx + n) * latent + n * latent + 2 * ctx * heads_ * (qk + v) * ab_ +
            n * heads_ * (qk + v) * ab_;
  return w;
}

AttentionWork AttentionShapes::linear(double n) const {
  const double nv = linear_kv_ / tp_, dk = linear_dk_, dv = linear_dv_;
  const double k = linear_k_heads_ / tp_ * dk;
  AttentionWork w;
  // State read and written once; q, k, v, gates in, outputs out per token.
  w.bytes = 2 * state_bytes_ + n * (2 * k + 2 * nv * dv) * ab_;
  // Per token and value head: decay, k^T S, the rank-one update and q S (3 multiply-adds per state
  // element); prompt chunks add the intra-chunk products (chunks of 64 tokens).
  w.flops = n * nv * (6 * dk * dv + (n > 1 ? 2 * kLinearChunk * (dk + dv) : 0));
  return w;
}

AttentionWork AttentionShapes::work(AttentionKind kind, int64_t new_tokens, int64_t context) const {
  const double n = static_cast<double>(new_tokens), ctx = static_cast<double>(context);
  switch (kind) {
    case AttentionKind::kMla: return mla(n, ctx);
    case AttentionKind::kLinear: return linear(n);
    case AttentionKind::kSlidingWindow: {
      const double w = window_;
      const double read = std::min(ctx, std::max(w - 1, 0.0)) + n;
      return full(n, ctx, read, windowed_pairs(n, ctx, w), windowed_pairs(n, 0, w));
    }
    case AttentionKind::kChunkedLocal: {
      const int64_t c = chunk_;
      const double read = static_cast<double>(context % c) + n;
      return full(n, ctx, std::min(read, ctx + n), chunked_pairs(new_tokens, context, c),
                  chunked_pairs(new_tokens, 0, c));
    }
    default: return full(n, ctx, ctx + n, n * ctx + n * (n + 1) / 2, n * (n + 1) / 2);
  }
}

AttentionShapes::Affine AttentionShapes::decode_affine(AttentionKind kind) const {
  // work(kind, 1, ctx) is affine in ctx for these kinds: its value at 0 and its slope.
  const AttentionWork at0 = work(kind, 1, 0), at1 = work(kind, 1, 1);
  return {at1.bytes - at0.bytes, at0.bytes, at1.flops - at0.flops, at0.flops};
}

}  // namespace servesim
