#include "backends/roofline.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace servesim {

RooflineModel::RooflineModel(HardwareSpec hw, ModelSpec model, RooflineOptions options)
    : hw_(std::move(hw)), model_(std::move(model)), options_(options) {
  // One new token over `ctx` cached ones (a decode): 4 (ctx + 1) q_dim FLOPs against
  // (ctx + 2) 2 kv_dim kvb + 2 q_dim ab bytes, both affine in ctx. When the memory time is the larger
  // at ctx = 0 and grows at least as fast, it is the larger for every context, and the decodes of a
  // batch are priced together from their count and their contexts' sum.
  const double q_dim = static_cast<double>(model_.num_heads) * static_cast<double>(model_.head_dim) / options_.tp;
  const double kv_dim = std::max(1.0, static_cast<double>(model_.num_kv_heads) / options_.tp) *
                        static_cast<double>(model_.head_dim);
  const double kvb = dtype_bytes(options_.kv), ab = dtype_bytes(options_.activations);
  const double compute = hw_.fp16_flops * hw_.attention_efficiency;
  const double memory = hw_.memory_bandwidth * hw_.attention_efficiency;
  decode_bytes_per_context_ = 2 * kv_dim * kvb;
  decode_bytes_per_item_ = 2 * (2 * kv_dim * kvb) + 2 * q_dim * ab;
  const double compute_slope = 4 * q_dim / compute, memory_slope = decode_bytes_per_context_ / memory;
  decodes_memory_bound_ = compute > 0 && memory > 0 && memory_slope >= compute_slope &&
                          decode_bytes_per_item_ / memory >= 4 * q_dim / compute;
  // decode_attention() in fixed point, for decode_durations: a per context token, c per item.
  constexpr double kScale = 1e9 * static_cast<double>(DecodeDurations::kOne);  // seconds -> 2^-31 ns
  constexpr double kMax = 0x1p62;
  const auto layers = static_cast<double>(model_.num_layers);
  const double a = std::round(decode_bytes_per_context_ / memory * layers * kScale);
  const double c =
      std::round((decode_bytes_per_item_ / memory + hw_.attention_sequence_overhead) * layers * kScale);
  if (a >= 0 && a < kMax && c >= 0 && c < kMax) {
    decode_per_context_ = static_cast<int64_t>(a);
    decode_per_item_ = static_cast<int64_t>(c);
  }
}

double RooflineModel::memory_time(double bytes) const {
  return bytes / (hw_.memory_bandwidth * hw_.memory_efficiency);
}

double RooflineModel::gemm_time(double flops, double bytes, double rows) const {
  double eff = hw_.gemm_efficiency;
  if (hw_.gemm_half_rows > 0) eff *= rows / (rows + hw_.gemm_half_rows);
  const double peak = options_.weights == DType::kFp8 && hw_.fp8_flops > 0 ? hw_.fp8_flops
                                                                           : hw_.fp16_flops;
  if (hw_.gemm_tile_rows > 0 && rows > 0) {
    flops *= std::ceil(rows / hw_.gemm_tile_rows) * hw_.gemm_tile_rows / rows;
  }
  return std::max(flops / (peak * eff), memory_time(bytes));
}

double RooflineModel::attention_time(double flops, double bytes, double efficiency) const {
  return std::max(flops / (hw_.fp16_flops * efficiency), bytes / (hw_.memory_bandwidth * efficiency));
}

RooflineBreakdown RooflineModel::price(const Batch& batch) const {
  return price_rest(price_attention(batch));
}

RooflineModel::AttentionPart RooflineModel::price_attention(const Batch& batch) const {
  assert(!batch.empty());
  assert(batch.group == 0 || decodes_memory_bound_);
  return price_items(batch.items.size(), [&](size_t i) {
    const BatchItem& b = batch.items[i];
    // An item produces a token when it catches up with its sequence (padding rows compute one too).
    const bool emits = b.padding || b.context_tokens + b.new_tokens >= b.seq->num_tokens();
    return Item{b.new_tokens, b.context_tokens, emits};
  }, batch.group, batch.group_context);
}

RooflineBreakdown RooflineModel::price(const Item* items, size_t n) const {
  return price_rest(price_items(n, [&](size_t i) { return items[i]; }));
}

template <typename ItemAt>
RooflineModel::AttentionPart RooflineModel::price_items(size_t n, ItemAt item_at, int64_t group,
                                                        int64_t group_context) const {
  const ModelSpec& m = model_;
  const double tp = options_.tp;
  const double ab = dtype_bytes(options_.activations);
  const double kvb = dtype_bytes(options_.kv);
  const double hd = static_cast<double>(m.head_dim);
  const double q_dim = static_cast<double>(m.num_heads) * hd / tp;
  // KV heads split across tp; with fewer KV heads than GPUs each GPU keeps one.
  const double kv_heads = std::max(1.0, static_cast<double>(m.num_kv_heads) / tp);
  const double kv_dim = kv_heads * hd;
  const double layers = static_cast<double>(m.num_layers);
  const double prefill_efficiency = hw_.prefill_attention_efficiency > 0
                                        ? hw_.prefill_attention_efficiency
                                        : hw_.attention_efficiency;

  // One-token items, priced together (see the constructor); the decode group's are all such.
  int64_t tokens = group, emitting = group;
  int64_t decodes = group, decode_context = group_context;
  RooflineBreakdown t;
  for (size_t i = 0; i < n; ++i) {
    const Item item = item_at(i);
    if (item.new_tokens == 1 && decodes_memory_bound_) {
      tokens += 1;
      if (item.emits) emitting += 1;
      ++decodes;
      decode_context += item.context_tokens;
      continue;
    }
    const double new_t = static_cast<double>(item.new_tokens);
    const double ctx = static_cast<double>(item.context_tokens);
    tokens += item.new_tokens;
    if (item.emits) emitting += 1;
    // Token j of the chunk attends to the cached tokens and to the chunk's tokens up to itself.
    const double pairs = new_t * ctx + new_t * (new_t + 1) / 2;
    const double flops = 4 * pairs * q_dim;  // QK^T and PV, 2 FLOPs per multiply-add each
    const double bytes = (ctx + new_t) * 2 * kv_dim * kvb    // read K and V (the new ones included)
                         + new_t * 2 * kv_dim * kvb           // write the new K and V
                         + 2 * new_t * q_dim * ab;            // read Q, write the output
    const double efficiency = item.new_tokens > 1 ? prefill_efficiency : hw_.attention_efficiency;
    double time = attention_time(flops, bytes, efficiency);
    if (item.new_tokens > 1 && hw_.prefill_self_attention_efficiency > 0) {
      // The chunk's causal triangle at its own efficiency, the pairs over the cache at the other.
      const double self = 4 * (new_t * (new_t + 1) / 2) * q_dim, cache = 4 * (new_t * ctx) * q_dim;
      time = std::max(cache / (hw_.fp16_flops * efficiency) +
                          self / (hw_.fp16_flops * hw_.prefill_self_attention_efficiency),
                      bytes / (hw_.memory_bandwidth * efficiency));
    }
    t.attention += (time + hw_.attention_sequence_overhead) * layers;
  }
  if (decodes > 0) t.attention += decode_attention(decodes, decode_context);
  return {t, tokens, emitting};
}

bool RooflineModel::decode_shape(const Batch& batch, DecodeShape& out) const {
  if (!decodes_memory_bound_ || batch.empty()) return false;
  out = DecodeShape{batch.group, batch.group_context, batch.group};
  for (const BatchItem& b : batch.items) {
    if (b.new_tokens != 1) return false;
    if (b.padding || b.context_tokens + b.new_tokens >= b.seq->num_tokens()) ++out.emitting;
    ++out.count;
    out.context_sum += b.context_tokens;
  }
  return true;
}

Time RooflineModel::decode_rest(const DecodeShape& shape) const {
  return priced_duration(
      price_rest(RooflineBreakdown{}, static_cast<double>(shape.count), static_cast<double>(shape.emitting)).total());
}

bool RooflineModel::decode_durations(const Batch& batch, DecodeDurations& out) const {
  DecodeShape shape;
  return decode_shape(batch, shape) && decode_durations(shape, decode_rest(shape), out);
}

bool RooflineModel::decode_durations(const DecodeShape& shape, Time rest, DecodeDurations& out) const {
  if (rest == kNever || decode_per_context_ < 0) return false;
  constexpr int64_t kMax = int64_t{1} << 62;
  const int64_t per_context = decode_per_context_, per_item = decode_per_item_;
  const Wide step = static_cast<Wide>(per_context) * shape.count;
  const Wide fixed = static_cast<Wide>(per_item) * shape.count + DecodeDurations::kOne / 2;
  const Wide x = static_cast<Wide>(per_context) * shape.context_sum + fixed;
  if (step >= kMax || fixed >= kMax ||
      (x >> DecodeDurations::kFractionBits) > kTimeHorizon - rest) {
    return false;
  }
  out.rest = rest;
  out.per_context = per_context;
  out.fixed = static_cast<int64_t>(fixed);
  out.count = shape.count;
  out.context_sum = shape.context_sum;
  return true;
}

RooflineBreakdown RooflineModel::price_rest(RooflineBreakdown t, double tokens, double emitting) const {
  const ModelSpec& m = model_;
  const double tp = options_.tp;
  const double wb = dtype_bytes(options_.weights);
  const double ab = dtype_bytes(options_.activations);
  const double h = static_cast<double>(m.hidden_size);
  const double hd = static_cast<double>(m.head_dim);
  const double q_dim = static_cast<double>(m.num_heads) * hd / tp;
  const double kv_heads = std::max(1.0, static_cast<double>(m.num_kv_heads) / tp);
  const double kv_dim = kv_heads * hd;
  const double inter = static_cast<double>(m.intermediate_size) / tp;
  const double layers = static_cast<double>(m.num_layers);
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
