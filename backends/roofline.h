// The analytic roofline cost model. For each operator of one iteration (embedding, RMSNorms, QKV
// with biases, attention per sequence over its new and cached tokens with grouped-query heads, the
// output projection, gate/up/down or the active experts of a mixture, the LM head for the sequences
// that emit a token) it counts FLOPs and the bytes that must cross device memory (weights once per
// iteration, KV read per sequence, activations), and prices it at
//     max(FLOPs / (peak x efficiency), bytes / (bandwidth x memory efficiency));
// the operators' times are summed, with two all-reduces per layer when tp > 1, plus the hardware's
// fixed per-iteration overhead. Pricing costs time proportional to the batch's sequences, never to
// its tokens.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/hardware.h"
#include "backends/model.h"
#include "sim/result.h"

namespace servesim {

struct RooflineOptions {
  int32_t tp = 1;                   // tensor-parallel degree: compute and weights split tp ways
  DType weights = DType::kBf16;     // weight precision (the model's torch_dtype by default)
  DType kv = DType::kBf16;          // KV cache precision
  DType activations = DType::kBf16; // activation precision
};

// The time parts of one iteration, for tests and reports (seconds).
struct RooflineBreakdown {
  double gemm = 0, attention = 0, lm_head = 0, other = 0, communication = 0, overhead = 0;
  double total() const { return gemm + attention + lm_head + other + communication + overhead; }
};

class RooflineModel {
 public:
  RooflineModel(HardwareSpec hw, ModelSpec model, RooflineOptions options);

  // Prices one iteration. REQUIRES: !batch.empty().
  RooflineBreakdown price(const Batch& batch) const;
  // The same for a batch described by its parts: items of (new tokens, cached tokens, emits).
  struct Item {
    int64_t new_tokens, context_tokens;
    bool emits;
  };
  RooflineBreakdown price(const Item* items, size_t n) const;

  const HardwareSpec& hardware() const { return hw_; }
  const ModelSpec& model() const { return model_; }
  const RooflineOptions& options() const { return options_; }

 private:
  // max(compute, memory) with the GEMM efficiency for `rows` rows.
  double gemm_time(double flops, double bytes, double rows) const;
  double attention_time(double flops, double bytes) const;
  double memory_time(double bytes) const;

  HardwareSpec hw_;
  ModelSpec model_;
  RooflineOptions options_;
};

}  // namespace servesim
