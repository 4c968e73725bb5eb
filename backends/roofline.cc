#include "backends/roofline.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <tuple>
#include <vector>

#include "backends/collectives.h"
#include "backends/moe_routing.h"

namespace servesim {

namespace {

// Weight-only kernels (Marlin-style) dequantize each weight on the CUDA cores, about two operations
// per element, once per 64 rows of the product they serve; overlapped with the weights' loads, not
// with the tensor cores. An estimate, not a measurement: it makes a 4-bit GEMM of 64 rows about
// 15 % slower than a 16-bit one on an H100 when compute-bound, in line with Marlin's reported loss
// at large batch (Frantar et al., 2024).
constexpr double kDequantOps = 2, kDequantRows = 64;

// Fused-MoE kernels pad each expert's rows to a tile of BLOCK_SIZE_M rows (vLLM's
// moe_align_block_size; 16 in fused_moe's default configs for small batches, larger tiles at
// large batches leave the padding a smaller share).
constexpr double kMoeTileRows = 16;

// Peak and efficiency of the tensor cores for element type d, 0 peak when the GPU has none.
std::pair<double, double> tensor_peak(const HardwareSpec& hw, DType d) {
  const auto eff = [&](double e) { return e > 0 ? e : hw.gemm_efficiency; };
  switch (d) {
    case DType::kFp8: return {hw.fp8_flops, eff(hw.fp8_gemm_efficiency)};
    case DType::kFp4: return {hw.fp4_flops, eff(hw.fp4_gemm_efficiency)};
    case DType::kInt8: return {hw.int8_ops, eff(hw.int8_gemm_efficiency)};
    default: return {hw.fp16_flops, hw.gemm_efficiency};
  }
}

}  // namespace

RooflineModel::RooflineModel(HardwareSpec hw, ModelSpec model, RooflineOptions options)
    : hw_(std::move(hw)), model_(std::move(model)), options_(options),
      shapes_(model_, options_.tp, options_.kv, options_.activations) {
  const WeightFormat& f = options_.format;
  plain_ = {hw_.fp16_flops, hw_.gemm_efficiency, dtype_bytes(options_.weights), false};
  quantized_ = plain_;
  if (!f.method.empty()) {
    const DType compute = compute_dtype(f, options_.activations, hw_.fp8_flops, hw_.fp4_flops);
    auto [peak, eff] = tensor_peak(hw_, compute);
    const bool dequantize = peak <= 0 || compute == options_.activations;
    if (dequantize) std::tie(peak, eff) = tensor_peak(hw_, DType::kBf16);
    quantized_ = {peak, eff, dtype_bytes(f.dtype) + f.scale_bytes, dequantize};
  }
  for (int64_t i = 0; i < model_.num_layers; ++i) {
    const AttentionKind k = model_.attention_of(i);
    const bool moe = model_.moe_at(i);
    auto c = std::find_if(classes_.begin(), classes_.end(), [&](const LayerClass& x) { return x.kind == k && x.moe == moe; });
    if (c == classes_.end()) c = classes_.insert(classes_.end(), {k, moe, 0});
    c->count += 1;
    auto kk = std::find_if(kinds_.begin(), kinds_.end(), [&](const auto& x) { return x.first == k; });
    if (kk == kinds_.end()) kk = kinds_.insert(kinds_.end(), {k, 0});
    kk->second += 1;
  }
  // A one-token decode is affine in its context (sliding and chunked layers excepted): per layer on
  // average, bytes and FLOPs per cached token and per sequence. When the memory time is the larger
  // at no context and grows at least as fast, it is the larger for every context, and the decodes
  // of a batch are priced together from their count and their contexts' sum.
  const double compute = hw_.fp16_flops * hw_.attention_efficiency;
  const double memory = hw_.memory_bandwidth * hw_.attention_efficiency;
  const auto layers = static_cast<double>(model_.num_layers);
  double per_context = 0, per_item = 0;
  bool bound = compute > 0 && memory > 0;
  for (const auto& [kind, count] : kinds_) {
    if (kind == AttentionKind::kSlidingWindow || kind == AttentionKind::kChunkedLocal) bound = false;
    if (!bound) break;
    const AttentionShapes::Affine a = shapes_.decode_affine(kind);
    const double peak = kind == AttentionKind::kMla && hw_.mla_decode_compute_efficiency > 0
                            ? hw_.fp16_flops * hw_.mla_decode_compute_efficiency : compute;
    bound = a.bytes_per_context / memory >= a.flops_per_context / peak &&
            a.bytes_per_item / memory >= a.flops_per_item / peak;
    per_context += a.bytes_per_context * count;
    per_item += a.bytes_per_item * count;
  }
  decodes_memory_bound_ = bound;
  decode_bytes_per_context_ = per_context / layers;
  decode_bytes_per_item_ = per_item / layers;
  // decode_attention() in fixed point, for decode_durations: a per context token, c per item.
  constexpr double kScale = 1e9 * static_cast<double>(DecodeDurations::kOne);  // seconds -> 2^-31 ns
  constexpr double kMax = 0x1p62;
  const double a = std::round(decode_bytes_per_context_ / memory * layers * kScale);
  const double c =
      std::round((decode_bytes_per_item_ / memory + hw_.attention_sequence_overhead) * layers * kScale);
  if (bound && a >= 0 && a < kMax && c >= 0 && c < kMax) {
    decode_per_context_ = static_cast<int64_t>(a);
    decode_per_item_ = static_cast<int64_t>(c);
  }
}

double RooflineModel::memory_time(double bytes) const {
  return bytes / (hw_.memory_bandwidth * hw_.memory_efficiency);
}

double RooflineModel::gemm_time(double flops, double bytes, double rows, const Gemm& g, double weights,
                                double dequant_rows) const {
  double eff = g.efficiency;
  if (hw_.gemm_half_rows > 0) eff *= rows / (rows + hw_.gemm_half_rows);
  if (hw_.gemm_tile_rows > 0 && rows > 0) {
    flops *= std::ceil(rows / hw_.gemm_tile_rows) * hw_.gemm_tile_rows / rows;
  }
  double compute = flops / (g.peak * eff);
  if (g.dequantize && weights > 0 && hw_.fp32_flops > 0) {
    const double served = dequant_rows >= 0 ? dequant_rows : rows;
    compute += weights * kDequantOps * std::ceil(std::max(served, 1.0) / kDequantRows) / hw_.fp32_flops;
  }
  return std::max(compute, memory_time(bytes));
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
    tokens += item.new_tokens;
    if (item.emits) emitting += 1;
    const double efficiency = item.new_tokens > 1 ? prefill_efficiency : hw_.attention_efficiency;
    for (const auto& [kind, count] : kinds_) {
      const AttentionWork w = shapes_.work(kind, item.new_tokens, item.context_tokens);
      double time = attention_time(w.flops, w.bytes, efficiency);
      if (kind == AttentionKind::kMla && item.new_tokens == 1 && hw_.mla_decode_compute_efficiency > 0) {
        // FlashMLA: the absorbed decode's FLOPs at their own fraction of the peak.
        time = std::max(w.flops / (hw_.fp16_flops * hw_.mla_decode_compute_efficiency),
                        w.bytes / (hw_.memory_bandwidth * efficiency));
      }
      if (item.new_tokens > 1 && hw_.prefill_self_attention_efficiency > 0) {
        // The chunk's causal triangle at its own efficiency, the pairs over the cache at the other.
        time = std::max((w.flops - w.self_flops) / (hw_.fp16_flops * efficiency) +
                            w.self_flops / (hw_.fp16_flops * hw_.prefill_self_attention_efficiency),
                        w.bytes / (hw_.memory_bandwidth * efficiency));
      }
      if (w.decompress_flops > 0) {  // MLA: the cached latents expanded by kv_b_proj
        time += gemm_time(w.decompress_flops, 0, static_cast<double>(item.context_tokens), quantized_, 0);
      }
      t.attention += (time + hw_.attention_sequence_overhead) * count;
    }
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

double RooflineModel::linear(double in, double out, double tokens, const Gemm& g) const {
  const double ab = dtype_bytes(options_.activations);
  return gemm_time(2 * tokens * in * out, in * out * g.weight_bytes + tokens * (in + out) * ab, tokens, g, in * out);
}

double RooflineModel::attention_projections(AttentionKind kind, double tokens) const {
  const ModelSpec& m = model_;
  const double tp = options_.tp;
  const Gemm& g = options_.format.attention ? quantized_ : plain_;
  const double h = static_cast<double>(m.hidden_size);
  if (kind == AttentionKind::kMla) {
    // Compressions replicated on every GPU; the heads' expansions and the output split by tp. A
    // decode's absorbed form costs kv_b_proj's FLOPs per token too.
    const double heads = static_cast<double>(m.num_heads) / tp;
    const double qk = static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim);
    const double ql = static_cast<double>(m.q_lora_rank), kvl = static_cast<double>(m.kv_lora_rank);
    double time = m.q_lora_rank > 0 ? linear(h, ql, tokens, g) + linear(ql, heads * qk, tokens, g)
                                    : linear(h, heads * qk, tokens, g);
    time += linear(h, kvl + static_cast<double>(m.qk_rope_head_dim), tokens, g);
    time += linear(kvl, heads * static_cast<double>(m.qk_nope_head_dim + m.v_head_dim), tokens, g);
    return time + linear(heads * static_cast<double>(m.v_head_dim), h, tokens, g);
  }
  if (kind == AttentionKind::kLinear) {
    const double k = static_cast<double>(m.linear_key_heads * m.linear_key_head_dim) / tp;
    const double v = static_cast<double>(m.linear_value_heads * m.linear_value_head_dim) / tp;
    const double nv = static_cast<double>(m.linear_value_heads) / tp;
    return linear(h, 2 * k + 2 * v, tokens, g) + linear(h, 2 * nv, tokens, g) + linear(v, h, tokens, g);
  }
  const double hd = static_cast<double>(m.head_dim);
  const double q_dim = static_cast<double>(m.num_heads) * hd / tp;
  const double kv_dim = std::max(1.0, static_cast<double>(m.num_kv_heads) / tp) * hd;
  double time = linear(h, (m.attention_output_gate ? 2 : 1) * q_dim + 2 * kv_dim, tokens, g) +
                linear(q_dim, h, tokens, g);
  if (m.qkv_bias) {  // Qwen2: the bias vectors are read and added to every token's Q, K and V
    const double ab = dtype_bytes(options_.activations);
    time += memory_time((q_dim + 2 * kv_dim) * plain_.weight_bytes + 2 * tokens * (q_dim + 2 * kv_dim) * ab);
  }
  return time;
}

double RooflineModel::feed_forward(bool moe, double tokens) const {
  const ModelSpec& m = model_;
  const double tp = options_.tp, h = static_cast<double>(m.hidden_size);
  const double ab = dtype_bytes(options_.activations);
  if (!moe) {
    const double inter = static_cast<double>(m.intermediate_size) / tp;
    const Gemm& g = options_.format.dense_ffn ? quantized_ : plain_;
    return linear(h, 2 * inter, tokens, g) + linear(inter, h, tokens, g);
  }
  // Tokens go to experts_per_token of num_experts experts; the weights of every expert that some
  // token chose are read (the expected count, backends/moe_routing.h), and each computes its rows.
  // Over data-parallel ranks the layer serves every rank's tokens (as many as this one's); with
  // expert parallelism each GPU holds experts / (dp x tp) experts whole and serves the rows routed
  // to them, the busiest GPU setting the pace.
  const double e = static_cast<double>(m.num_experts);
  const double all = tokens * static_cast<double>(options_.dp);
  double touched = expected_experts(m.num_experts, m.experts_per_token, all, options_.routing_skew);
  double routed = all * static_cast<double>(m.experts_per_token);
  double inter = static_cast<double>(m.expert_intermediate()) / (tp * static_cast<double>(options_.dp));
  if (options_.expert_parallel) {
    const auto world = static_cast<int64_t>(options_.tp) * options_.dp;
    const double load = busiest_gpu_load(m.num_experts, m.experts_per_token, world, options_.routing_skew);
    touched = std::max(std::min(touched / static_cast<double>(world) * load, e / static_cast<double>(world)), 1e-9);
    routed = routed / static_cast<double>(world) * load;
    inter = static_cast<double>(m.expert_intermediate());
  }
  // The grouped GEMMs: one product of all the routed rows, each expert's padded to the kernel's
  // tile (vLLM's moe_align_block_size: BLOCK_SIZE_M, 16 in the small-batch configs), the padding
  // computed as rows.
  const Gemm& q = quantized_;
  const double rows = touched * std::ceil(routed / touched / kMoeTileRows) * kMoeTileRows;
  double time = gemm_time(2 * tokens * h * e, h * e * plain_.weight_bytes + tokens * h * ab, tokens);  // router
  const double per_expert = routed / touched;  // the rows each expert's dequantized weights serve
  time += gemm_time(2 * rows * h * 2 * inter, touched * h * 2 * inter * q.weight_bytes + routed * (h + 2 * inter) * ab,
                    rows, q, touched * h * 2 * inter, per_expert);
  time += gemm_time(2 * rows * inter * h, touched * inter * h * q.weight_bytes + routed * (inter + h) * ab, rows, q,
                    touched * inter * h, per_expert);
  // The routed outputs weighted and summed back into one row per token (moe_sum).
  time += memory_time((routed + tokens) * h * ab);
  if (m.shared_intermediate_size > 0) {
    const double si = static_cast<double>(m.shared_intermediate_size) / tp;
    const Gemm& g = options_.format.shared_experts ? quantized_ : plain_;
    time += linear(h, 2 * si, tokens, g) + linear(si, h, tokens, g);
  }
  return time;
}

double RooflineModel::moe_communication(double tokens) const {
  const ModelSpec& m = model_;
  if (options_.dp <= 1 && !options_.expert_parallel) return 0;
  double layers = 0;
  for (const LayerClass& c : classes_) layers += c.moe ? c.count : 0;
  const double h = static_cast<double>(m.hidden_size), ab = dtype_bytes(options_.activations);
  const auto world = static_cast<int64_t>(options_.tp) * options_.dp;
  if (options_.expert_parallel) {
    // Dispatch and combine: every token's experts_per_token copies to the GPUs of their experts.
    const double bytes = tokens * static_cast<double>(m.experts_per_token) * h * ab / options_.tp;
    return layers * 2 * collective_time(hw_, Collective::kAllToAll, bytes, world);
  }
  // Each expert split over the ranks: their tokens gathered before, the outputs scattered after.
  const double bytes = tokens * static_cast<double>(options_.dp) * h * ab;
  return layers * (collective_time(hw_, Collective::kAllGather, bytes, options_.dp) +
                   collective_time(hw_, Collective::kReduceScatter, bytes, options_.dp));
}

RooflineBreakdown RooflineModel::price_rest(RooflineBreakdown t, double tokens, double emitting) const {
  const ModelSpec& m = model_;
  const double tp = options_.tp;
  const double wb = plain_.weight_bytes;
  const double ab = dtype_bytes(options_.activations);
  const double h = static_cast<double>(m.hidden_size);
  double gemm = 0, activations = 0;
  for (const LayerClass& c : classes_) {
    gemm += c.count * (attention_projections(c.kind, tokens) + feed_forward(c.moe, tokens));
    const double inter = (c.moe ? static_cast<double>(m.experts_per_token * m.expert_intermediate() +
                                                      m.shared_intermediate_size)
                                : static_cast<double>(m.intermediate_size)) / tp;
    activations += c.count * tokens * (2 * 2 * h + 3 * inter + 2 * h) * ab;
  }
  t.gemm = gemm;
  // RMSNorms (two per layer), SiLU-and-multiply, residual adds: activation traffic.
  t.other = memory_time(activations) + (options_.embeds ? memory_time(tokens * h * (wb + ab)) : 0);  // the embedding rows read
  // The LM head for the sequences that sample a token (logits in fp32).
  if (emitting > 0 && options_.samples) {
    const double vocab = static_cast<double>(m.vocab_size) / tp;
    t.lm_head = gemm_time(2 * emitting * h * vocab, h * vocab * wb + emitting * (h * ab + vocab * 4),
                          emitting);
  }
  if (options_.tp > 1) {
    // Two all-reduces of the activations per layer, as vLLM and NCCL pay them (backends/collectives.h).
    const double bytes = tokens * h * ab;
    t.communication = 2 * static_cast<double>(m.num_layers) *
                      collective_time(hw_, Collective::kAllReduce, bytes, options_.tp);
  }
  t.communication += moe_communication(tokens);
  t.overhead = hw_.overhead;
  return t;
}

}  // namespace servesim
