#include "backends/roofline.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace servesim {

RooflineModel::RooflineModel(HardwareSpec hw, ModelSpec model, RooflineOptions options)
    : hw_(std::move(hw)), model_(std::move(model)), options_(options) {}

double RooflineModel::memory_time(double bytes) const {
  return bytes / (hw_.memory_bandwidth * hw_.memory_efficiency);
}

double RooflineModel::gemm_time(double flops, double bytes, double rows) const {
  double eff = hw_.gemm_efficiency;
  if (hw_.gemm_half_rows > 0) eff *= rows / (rows + hw_.gemm_half_rows);
  const double peak = options_.weights == DType::kFp8 && hw_.fp8_flops > 0 ? hw_.fp8_flops
                                                                           : hw_.fp16_flops;
  return std::max(flops / (peak * eff), memory_time(bytes));
}

double RooflineModel::attention_time(double flops, double bytes) const {
  return std::max(flops / (hw_.fp16_flops * hw_.attention_efficiency),
                  bytes / (hw_.memory_bandwidth * hw_.attention_efficiency));
}

RooflineBreakdown RooflineModel::price(const Batch& batch) const {
  assert(!batch.empty());
  thread_local std::vector<Item> items;
  items.clear();
  for (const BatchItem& b : batch.items) {
    // An item produces a token when it catches up with its sequence (padding rows compute one too).
    const bool emits = b.padding || b.context_tokens + b.new_tokens >= b.seq->num_tokens();
    items.push_back({b.new_tokens, b.context_tokens, emits});
  }
  return price(items.data(), items.size());
}

RooflineBreakdown RooflineModel::price(const Item* items, size_t n) const {
  const ModelSpec& m = model_;
  const double tp = options_.tp;
  const double wb = dtype_bytes(options_.weights);
  const double ab = dtype_bytes(options_.activations);
  const double kvb = dtype_bytes(options_.kv);
  const double h = static_cast<double>(m.hidden_size);
  const double hd = static_cast<double>(m.head_dim);
  const double q_dim = static_cast<double>(m.num_heads) * hd / tp;
  // KV heads split across tp; with fewer KV heads than GPUs each GPU keeps one.
  const double kv_heads = std::max(1.0, static_cast<double>(m.num_kv_heads) / tp);
  const double kv_dim = kv_heads * hd;
  const double inter = static_cast<double>(m.intermediate_size) / tp;
  const double layers = static_cast<double>(m.num_layers);

  double tokens = 0, emitting = 0;
  RooflineBreakdown t;
  for (size_t i = 0; i < n; ++i) {
    const double new_t = static_cast<double>(items[i].new_tokens);
    const double ctx = static_cast<double>(items[i].context_tokens);
    tokens += new_t;
    if (items[i].emits) emitting += 1;
    // Token j of the chunk attends to the cached tokens and to the chunk's tokens up to itself.
    const double pairs = new_t * ctx + new_t * (new_t + 1) / 2;
    const double flops = 4 * pairs * q_dim;  // QK^T and PV, 2 FLOPs per multiply-add each
    const double bytes = (ctx + new_t) * 2 * kv_dim * kvb    // read K and V (the new ones included)
                         + new_t * 2 * kv_dim * kvb           // write the new K and V
                         + 2 * new_t * q_dim * ab;            // read Q, write the output
    t.attention += attention_time(flops, bytes) * layers;
  }

  // Dense projections of one layer, each priced on its own (weights read once per iteration).
  auto linear = [&](double in, double out) {
    return gemm_time(2 * tokens * in * out, (in * out) * wb + tokens * (in + out) * ab, tokens);
  };
  double layer = linear(h, q_dim + 2 * kv_dim) + linear(q_dim, h);
  if (m.qkv_bias) {  // Qwen2: the bias vectors are read and added to every token's Q, K and V
    layer += memory_time((q_dim + 2 * kv_dim) * wb + 2 * tokens * (q_dim + 2 * kv_dim) * ab);
  }
  if (m.num_experts > 1) {
    // Tokens go to experts_per_token of num_experts experts; the weights of every expert that
    // some token chose are read (expected count for tokens spread uniformly).
    const double e = static_cast<double>(m.num_experts);
    const double k = static_cast<double>(m.experts_per_token);
    const double touched = e * (1 - std::pow(1 - k / e, tokens));
    const double routed = tokens * k;
    layer += gemm_time(2 * tokens * h * e, h * e * wb + tokens * h * ab, tokens);  // router
    layer += gemm_time(2 * routed * h * 2 * inter, touched * h * 2 * inter * wb + routed * (h + 2 * inter) * ab,
                       routed / touched);
    layer += gemm_time(2 * routed * inter * h, touched * inter * h * wb + routed * (inter + h) * ab,
                       routed / touched);
  } else {
    layer += linear(h, 2 * inter) + linear(inter, h);
  }
  t.gemm = layer * layers;
  // RMSNorms (two per layer), SiLU-and-multiply, residual adds: activation traffic.
  t.other = memory_time(layers * tokens * (2 * 2 * h + 3 * inter + 2 * h) * ab) +
            memory_time(tokens * h * (wb + ab));  // the embedding rows read
  // The LM head for the sequences that sample a token (logits in fp32).
  if (emitting > 0) {
    const double vocab = static_cast<double>(m.vocab_size) / tp;
    t.lm_head = gemm_time(2 * emitting * h * vocab, h * vocab * wb + emitting * (h * ab + vocab * 4),
                          emitting);
  }
  if (options_.tp > 1) {
    // Two ring all-reduces of the activations per layer.
    const double bytes = tokens * h * ab;
    const double one = hw_.interconnect_latency + 2 * (tp - 1) / tp * bytes / hw_.interconnect_bandwidth;
    t.communication = 2 * layers * one;
  }
  t.overhead = hw_.overhead;
  return t;
}

}  // namespace servesim
