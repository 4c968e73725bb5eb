// The analytic roofline cost model. For each operator of one iteration (embedding, RMSNorms, the
// attention projections of each layer's kind (grouped-query QKV and output; MLA's compressions;
// linear attention's projections), attention per sequence over its new and cached tokens by kind
// (backends/attention_cost.h), the dense feed-forward, or a mixture's router, shared experts and
// the routed experts its tokens touch, the LM head for the sequences that emit a token) it counts
// FLOPs and the bytes that must cross device memory (weights once per iteration, KV read per
// sequence, activations), and prices it at
//     max(FLOPs / (peak x efficiency), bytes / (bandwidth x memory efficiency))
// (attention: of decodes at attention_efficiency, of prompt chunks at prefill_attention_efficiency;
// GEMMs of quantized layers at their compute type's peak and efficiency, weight-only formats
// dequantizing on the CUDA cores); the operators' times are summed, with two all-reduces per layer
// when tp > 1, plus the hardware's fixed per-iteration overhead. Pricing costs time proportional to
// the batch's sequences, never to its tokens.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "backends/attention_cost.h"
#include "backends/backend.h"
#include "backends/hardware.h"
#include "backends/model.h"
#include "sim/decode_durations.h"
#include "sim/result.h"

namespace servesim {

struct RooflineOptions {
  int32_t tp = 1;                   // tensor-parallel degree: compute and weights split tp ways
  DType weights = DType::kBf16;     // unquantized weights' precision (the model's torch_dtype)
  WeightFormat format;              // the quantized layers' (method "": none, all at `weights`)
  // How unevenly a mixture routes: 0 = uniformly; s > 0 = expert i's popularity ~ (i + 1)^-s.
  double routing_skew = 0;
  // A mixture's MoE layers over dp x tp GPUs: the data-parallel ranks (each pricing its own batch,
  // the others' as many tokens), experts whole among the GPUs when expert_parallel (tokens sent
  // all-to-all), else each expert split over them (tokens all-gathered and reduce-scattered).
  int32_t dp = 1;
  bool expert_parallel = false;
  DType kv = DType::kBf16;          // KV cache precision
  DType activations = DType::kBf16; // activation precision
  // Pipeline parallelism (backends/pipeline.h): whether this model's layers are the first stage,
  // which reads the embedding rows, and the last, which runs the LM head. A whole model: both.
  bool embeds = true, samples = true;
};

// The time parts of one iteration, for tests and reports (seconds).
struct RooflineBreakdown {
  double gemm = 0, attention = 0, lm_head = 0, other = 0, communication = 0, overhead = 0;
  double total() const { return gemm + attention + lm_head + other + communication + overhead; }
};

class RooflineModel {
 public:
  RooflineModel(HardwareSpec hw, ModelSpec model, RooflineOptions options);

  // Prices one iteration. REQUIRES: !batch.empty(); no decode group unless prices_decode_groups().
  RooflineBreakdown price(const Batch& batch) const;
  // Whether price() takes a batch's decode group from its count and context sum: when decode
  // attention is memory-bound at every context on this hardware (true of every GPU shipped).
  bool prices_decode_groups() const { return decodes_memory_bound_; }
  // The same for a batch described by its parts: items of (new tokens, cached tokens, emits).
  struct Item {
    int64_t new_tokens, context_tokens;
    bool emits;
  };
  RooflineBreakdown price(const Item* items, size_t n) const;
  // price(batch) in two parts, for a caller that keeps the second: the attention (the breakdown's
  // other parts 0) with the batch's new tokens and the sequences that sample one, and everything
  // but the attention, which depends on those two counts alone. price_rest(price_attention(b).time,
  // tokens, emitting) is price(b), exactly.
  struct AttentionPart {
    RooflineBreakdown time;
    int64_t tokens = 0, emitting = 0;
  };
  AttentionPart price_attention(const Batch& batch) const;
  RooflineBreakdown price_rest(RooflineBreakdown t, double tokens, double emitting) const;
  RooflineBreakdown price_rest(const AttentionPart& a) const {
    return price_rest(a.time, static_cast<double>(a.tokens), static_cast<double>(a.emitting));
  }

  // A batch of one-token decodes (every item computes one token) is priced in exact integer
  // arithmetic, so that a run of them, each the same decodes one token further, has its durations
  // in closed form: the rest (everything but the attention, the same at every step) rounded to the
  // nanosecond, plus the attention (affine in the contexts' sum) in fixed point of 2^-31 ns, rounded
  // to the nanosecond. Each part is within half a nanosecond of price()'s. Fills `out` with the run
  // that starts at `batch` (out.at(0): batch itself) and returns true; false (and the iteration is
  // priced by price()) when an item computes more than one token, !prices_decode_groups(), or the
  // price is out of the fixed point's range (past the simulation horizon).
  bool decode_durations(const Batch& batch, DecodeDurations& out) const;
  // The same in parts, for a caller that keeps the rest's prices: a batch's decodes (false unless
  // every item computes one token and prices_decode_groups()), the rest's price for them (kNever
  // past the horizon), and the run from both (false past the fixed point's range).
  struct DecodeShape {
    int64_t count = 0, context_sum = 0, emitting = 0;
  };
  bool decode_shape(const Batch& batch, DecodeShape& out) const;
  Time decode_rest(const DecodeShape& shape) const;
  bool decode_durations(const DecodeShape& shape, Time rest, DecodeDurations& out) const;

  const HardwareSpec& hardware() const { return hw_; }
  const ModelSpec& model() const { return model_; }
  const RooflineOptions& options() const { return options_; }

 private:
  // How one kind of linear layer computes: its peak and efficiency, bytes per weight, and whether
  // its weights are dequantized to 16-bit on the fly.
  struct Gemm {
    double peak = 0, efficiency = 0, weight_bytes = 2;
    bool dequantize = false;
  };
  // max(compute, memory) with the GEMM efficiency for `rows` rows.
  double gemm_time(double flops, double bytes, double rows) const { return gemm_time(flops, bytes, rows, plain_, 0); }
  // Weight-only formats dequantize `weights` once per 64 of `dequant_rows` rows (-1: rows).
  double gemm_time(double flops, double bytes, double rows, const Gemm& g, double weights,
                   double dequant_rows = -1) const;
  // One layer's projections and feed-forward for `tokens` tokens (per GPU).
  double attention_projections(AttentionKind kind, double tokens) const;
  double feed_forward(bool moe, double tokens) const;
  // The MoE layers' traffic among data-parallel ranks and expert-parallel GPUs, per iteration (s).
  double moe_communication(double tokens) const;
  double linear(double in, double out, double tokens, const Gemm& g) const;
  // max(compute, memory) at `efficiency` of both peaks.
  double attention_time(double flops, double bytes, double efficiency) const;
  double memory_time(double bytes) const;
  // price_attention() over items item_at(0 .. n - 1) and `group` decodes over `group_context` cached
  // tokens.
  template <typename ItemAt>
  AttentionPart price_items(size_t n, ItemAt item_at, int64_t group = 0, int64_t group_context = 0) const;
  // Attention of `count` one-token items over `context_sum` cached tokens in all (memory-bound).
  double decode_attention(int64_t count, int64_t context_sum) const;

  HardwareSpec hw_;
  ModelSpec model_;
  RooflineOptions options_;
  AttentionShapes shapes_;
  Gemm plain_, quantized_;             // unquantized and quantized linear layers
  // The layers by (attention kind, mixture or not), with their counts.
  struct LayerClass {
    AttentionKind kind;
    bool moe;
    double count;
  };
  std::vector<LayerClass> classes_;
  std::vector<std::pair<AttentionKind, double>> kinds_;  // attention kinds and their layer counts
  bool decodes_memory_bound_ = false;  // see the constructor
  double decode_bytes_per_context_ = 0, decode_bytes_per_item_ = 0;
  // decode_attention() in fixed point (DecodeDurations): per context token, per item; -1 when
  // they do not fit it.
  int64_t decode_per_context_ = -1, decode_per_item_ = -1;
};

// Inline: a leap prices millions of steps.
inline double RooflineModel::decode_attention(int64_t count, int64_t context_sum) const {
  const double bytes = static_cast<double>(context_sum) * decode_bytes_per_context_ +
                       static_cast<double>(count) * decode_bytes_per_item_;
  return (bytes / (hw_.memory_bandwidth * hw_.attention_efficiency) +
          static_cast<double>(count) * hw_.attention_sequence_overhead) *
         static_cast<double>(model_.num_layers);
}

}  // namespace servesim
