#include "backends/kv_memory.h"

#include "backends/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace servesim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

KvLayoutOptions layout_options(const MemoryOptions& o, int32_t tp) {
  KvLayoutOptions l;
  l.tp = tp;
  l.kv = o.kv;
  l.block_size = o.block_size;
  l.hybrid_manager = !o.single_group;
  l.prefix_caching = o.prefix_caching;
  return l;
}

// `weights`: the bytes per GPU, or -1 for the whole model's at tp.
MemoryPlan plan(const HardwareSpec& hw, const ModelSpec& m, const MemoryOptions& o, int32_t tp, double weights = -1) {
  MemoryPlan p;
  const double t = tp;
  const double ab = dtype_bytes(dtype_bytes(o.weights) < 2 ? DType::kBf16 : o.weights);
  p.budget = hw.memory_bytes * o.gpu_memory_utilization;
  p.weights = weights >= 0 ? weights
                           : m.weight_bytes_per_gpu(o.format.method.empty() ? weight_format_of(o.weights) : o.format, tp,
                                                    o.moe_world);
  // The profiling pass: max_num_batched_tokens tokens through one layer at a time (hidden state,
  // residual, QKV, gate/up and SiLU output); then the sampler's dummy run over max_num_seqs rows
  // of logits, gathered to the whole vocabulary on every GPU (vLLM's _dummy_sampler_run, top-k
  // and top-p on): fp32 logits, their sorted copy with int64 indices, and the fp32 probabilities,
  // 20 bytes per entry. The peak is the larger of the two.
  const double h = static_cast<double>(m.hidden_size);
  const double qkv = static_cast<double>(m.num_heads + 2 * m.num_kv_heads) * static_cast<double>(m.head_dim) / t;
  const double inter = static_cast<double>(m.intermediate_size) / t;
  const double forward = o.max_num_batched_tokens * (2 * h + qkv + 3 * inter) * ab;
  const double sampler = o.max_num_batched_tokens * h * ab + o.max_num_seqs * static_cast<double>(m.vocab_size) * 20;
  p.activations = std::max(forward, sampler);
  p.non_torch = kNonTorchBytes;
  p.layout = kv_layout(m, layout_options(o, tp));
  p.block_bytes = p.layout.bytes_per_block;
  const double free = p.budget - p.weights - p.activations - p.non_torch;
  // In double until it is known to fit: a huge memory over a tiny block overflowed the cast.
  const double blocks = free > 0 ? std::floor(free / p.block_bytes) - 1 : 0;
  p.num_blocks = blocks <= 0 ? 0 : blocks > static_cast<double>(kMaxKvBlocks) ? kMaxKvBlocks + 1
                                                                               : static_cast<int64_t>(blocks);
  return p;
}

std::string gib(double bytes) {
  char buf[64];
  const double g = bytes / kGiB;
  std::snprintf(buf, sizeof buf, g < 1e9 ? "%.1f GiB" : "%.3g GiB", g);
  return buf;
}

// With pp > 1: each stage planned on its own GPUs, the one with the fewest blocks bounding the
// replica. A stage's weights are its layers' (the stage as a model, less the embedding and LM head
// that model counts) plus the embedding on the first and the LM head on the last (a tied one too:
// the last stage loads its own copy, as vLLM's ParallelLMHead there has no embedding to share).
MemoryPlan plan_stages(const HardwareSpec& hw, const ModelSpec& m, const MemoryOptions& o, int32_t tp) {
  const WeightFormat format = o.format.method.empty() ? weight_format_of(o.weights) : o.format;
  const double ends = stage_model(m, 0, 0).weight_bytes_per_gpu(format, tp);  // embedding, LM head, final norm
  const double one_end = ends / (m.tie_word_embeddings ? 1 : 2);
  const std::vector<int64_t> parts = pp_partition(m.num_layers, o.pp);
  MemoryPlan best;
  double all_stages = 0;
  int64_t first = 0;
  for (size_t s = 0; s < parts.size(); ++s) {
    const ModelSpec stage = stage_model(m, first, parts[s]);
    first += parts[s];
    const double weights = stage.weight_bytes_per_gpu(format, tp) - ends + (s == 0 ? one_end : 0) +
                           (s + 1 == parts.size() ? one_end : 0);
    MemoryPlan p = plan(hw, stage, o, tp, weights);
    all_stages += p.block_bytes;
    if (s == 0 || p.num_blocks < best.num_blocks) {
      best = p;
      best.bounding_stage = static_cast<int32_t>(s);
    }
  }
  best.layout = kv_layout(m, layout_options(o, tp));  // the scheduler's groups: the whole model's
  best.pipeline_block_bytes = all_stages;
  return best;
}

MemoryPlan plan_any(const HardwareSpec& hw, const ModelSpec& m, const MemoryOptions& o, int32_t tp) {
  return o.pp > 1 ? plan_stages(hw, m, o, tp) : plan(hw, m, o, tp);
}

}  // namespace

Result<MemoryPlan> plan_memory(const HardwareSpec& hw, const ModelSpec& model, const MemoryOptions& o) {
  const MemoryPlan p = plan_any(hw, model, o, o.tp);
  if (p.layout.block_size != o.block_size) {
    return Error{model.name + " at --tp " + std::to_string(o.tp) + " needs a block size of " +
                 std::to_string(p.layout.block_size) +
                 " tokens: vLLM raises it so that one attention page holds a linear-attention "
                 "state; run with --block-size " + std::to_string(p.layout.block_size)};
  }
  if (p.num_blocks > kMaxKvBlocks) {
    return Error{"the KV cache of " + model.name + " on " + hw.name + " would hold more than " +
                 std::to_string(kMaxKvBlocks) + " blocks of " + std::to_string(o.block_size) +
                 " tokens, more than servesim tracks; raise --block-size or lower memory_gib"};
  }
  if (p.num_blocks > 0) return p;
  const double need = p.weights + p.activations + p.non_torch + 2 * p.block_bytes;
  const std::string precision = o.format.method.empty() ? dtype_name(o.weights) : o.format.method;
  const std::string stage = o.pp > 1 ? ", pp " + std::to_string(o.pp) + ", stage " + std::to_string(p.bounding_stage) : "";
  std::string msg = model.name + " (" + precision + ", tp " + std::to_string(o.tp) + stage +
                    ") does not fit on " + hw.name + ": it needs " + gib(p.weights) +
                    " of weights, " + gib(p.activations) + " of activations and " +
                    gib(p.non_torch) + " outside PyTorch per GPU, but " +
                    gib(hw.memory_bytes) + " x gpu_memory_utilization " +
                    std::to_string(o.gpu_memory_utilization).substr(0, 4) + " gives " + gib(p.budget) +
                    ": " + gib(need - p.budget) + " missing";
  for (int32_t tp = o.tp * 2; tp <= 64; tp *= 2) {
    if (check_tensor_parallel(model, tp).ok() && plan_any(hw, model, o, tp).num_blocks > 0) {
      return Error{msg + "; try --tp " + std::to_string(tp)};
    }
  }
  return Error{msg + "; no tensor-parallel degree up to 64 fits it"};
}

}  // namespace servesim
