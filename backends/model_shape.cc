// What follows from a model's shapes: element sizes, parameters by part, weight bytes in a weight
// format and per GPU, KV values per token by attention kind. The reading of config.json is in
// model.cc.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "backends/model.h"

namespace servesim {

double dtype_bytes(DType d) {
  switch (d) {
    case DType::kFp32: return 4;
    case DType::kFp16: return 2;
    case DType::kBf16: return 2;
    case DType::kFp8: return 1;
    case DType::kInt8: return 1;
    case DType::kInt4: return 0.5;
    case DType::kFp4: return 0.5;
  }
  return 2;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
    case DType::kFp4: return "fp4";
  }
  return "?";
}

Result<DType> parse_dtype(const std::string& s) {
  if (s == "fp32" || s == "float32" || s == "float") return DType::kFp32;
  if (s == "fp16" || s == "float16" || s == "half") return DType::kFp16;
  if (s == "bf16" || s == "bfloat16") return DType::kBf16;
  if (s == "fp8" || s == "float8" || s == "float8_e4m3fn" || s == "float8_e5m2" || s == "fp8_e4m3" ||
      s == "fp8_e5m2")
    return DType::kFp8;
  if (s == "int8") return DType::kInt8;
  if (s == "int4") return DType::kInt4;
  if (s == "fp4" || s == "nvfp4" || s == "mxfp4") return DType::kFp4;
  return Error{"unknown dtype \"" + s +
               "\": expected fp32, fp16, bf16, fp8, int8, int4 or fp4 (or float32, float16, "
               "bfloat16)"};
}

const char* attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::kFull: return "full_attention";
    case AttentionKind::kSlidingWindow: return "sliding_window";
    case AttentionKind::kChunkedLocal: return "chunked_local";
    case AttentionKind::kMla: return "mla";
    case AttentionKind::kLinear: return "mamba";
  }
  return "?";
}

WeightFormat weight_format_of(DType d) {
  WeightFormat f;
  f.dtype = d;
  switch (d) {
    case DType::kFp32: case DType::kFp16: case DType::kBf16: break;
    case DType::kFp8: f.method = "fp8"; break;      // per-tensor scales (vLLM --quantization fp8)
    case DType::kInt8: f.method = "int8"; break;    // per-channel scales, W8A8
    case DType::kInt4:                              // AWQ/GPTQ-style groups of 128: fp16 scale
      f.method = "int4";                            // and a 4-bit zero point per group
      f.scale_bytes = 2.5 / 128;
      f.weight_only = true;
      break;
    case DType::kFp4:                               // NVFP4: an fp8 scale per 16 elements
      f.method = "nvfp4";
      f.scale_bytes = 1.0 / 16;
      break;
  }
  return f;
}

DType compute_dtype(const WeightFormat& f, DType activations, double fp8_flops, double fp4_flops) {
  if (f.method.empty() || f.weight_only) return activations;
  if (f.dtype == DType::kFp8 && fp8_flops > 0) return DType::kFp8;
  if (f.dtype == DType::kFp4 && fp4_flops > 0) return DType::kFp4;
  if (f.dtype == DType::kInt8) return DType::kInt8;
  return activations;
}

std::string attention_summary(const ModelSpec& m) {
  static constexpr std::pair<AttentionKind, const char*> kShort[] = {
      {AttentionKind::kSlidingWindow, "swa"}, {AttentionKind::kChunkedLocal, "chunk"},
      {AttentionKind::kLinear, "linear"},     {AttentionKind::kMla, "mla"},
      {AttentionKind::kFull, "full"}};
  std::string s;
  for (const auto& [kind, name] : kShort) {
    const int64_t n = m.num_layers_of(kind);
    if (n > 0) s += (s.empty() ? "" : "+") + std::string(name) + " " + std::to_string(n);
  }
  if (m.num_moe_layers() > 0) s += " moe " + std::to_string(m.num_moe_layers());
  return s;
}

int64_t ModelSpec::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_layers; ++i) n += moe_at(i) ? 1 : 0;
  return n;
}

int64_t ModelSpec::num_layers_of(AttentionKind k) const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_layers; ++i) n += attention_of(i) == k ? 1 : 0;
  return n;
}

double ModelSpec::kv_values_per_token(AttentionKind k) const {
  switch (k) {
    case AttentionKind::kMla: return static_cast<double>(kv_lora_rank + qk_rope_head_dim);
    case AttentionKind::kLinear: return 0;
    default: return 2.0 * static_cast<double>(num_kv_heads * head_dim);
  }
}

double ModelSpec::linear_state_values() const {
  const double conv_dim = static_cast<double>(2 * linear_key_heads * linear_key_head_dim +
                                              linear_value_heads * linear_value_head_dim);
  return conv_dim * static_cast<double>(std::max<int64_t>(linear_conv_kernel - 1, 0)) +
         static_cast<double>(linear_value_heads * linear_key_head_dim * linear_value_head_dim);
}

namespace {

// Parameters of one model by part, each split into what tensor parallelism shards and what every
// GPU holds whole.
struct Part {
  double sharded = 0, whole = 0;
  double total() const { return sharded + whole; }
  double per_gpu(double tp) const { return sharded / tp + whole; }
};
struct Parts {
  Part embedding, lm_head, attention, dense_ffn, experts, shared, router, small;
};

// One attention layer's projections (its norms are counted in `small`).
void add_attention(const ModelSpec& m, AttentionKind kind, Parts& p) {
  const double h = static_cast<double>(m.hidden_size);
  if (kind == AttentionKind::kMla) {
    const double heads = static_cast<double>(m.num_heads);
    const double qk = static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim);
    const double ql = static_cast<double>(m.q_lora_rank), kvl = static_cast<double>(m.kv_lora_rank);
    if (m.q_lora_rank > 0) {
      p.attention.whole += h * ql;            // q_a_proj, replicated as vLLM keeps it
      p.small.whole += ql;                    // q_a_layernorm
      p.attention.sharded += ql * heads * qk;  // q_b_proj
    } else {
      p.attention.sharded += h * heads * qk;
    }
    p.attention.whole += h * (kvl + static_cast<double>(m.qk_rope_head_dim));  // kv_a_proj_with_mqa
    p.small.whole += kvl;                                                      // kv_a_layernorm
    p.attention.sharded += kvl * heads * static_cast<double>(m.qk_nope_head_dim + m.v_head_dim);
    p.attention.sharded += heads * static_cast<double>(m.v_head_dim) * h;     // o_proj
    return;
  }
  if (kind == AttentionKind::kLinear) {
    const double k = static_cast<double>(m.linear_key_heads * m.linear_key_head_dim);
    const double v = static_cast<double>(m.linear_value_heads * m.linear_value_head_dim);
    const double nv = static_cast<double>(m.linear_value_heads);
    p.attention.sharded += h * (2 * k + 2 * v) + h * 2 * nv + v * h;  // in_proj_qkvz, in_proj_ba, out
    p.small.sharded += (2 * k + v) * static_cast<double>(m.linear_conv_kernel) + 2 * nv;  // conv, A, dt
    p.small.whole += static_cast<double>(m.linear_value_head_dim);                       // norm
    return;
  }
  const double q = static_cast<double>(m.num_heads * m.head_dim);
  const double kv = static_cast<double>(m.num_kv_heads * m.head_dim);
  p.attention.sharded += h * (m.attention_output_gate ? 2 * q : q) + 2 * h * kv + q * h;
  if (m.qkv_bias) p.small.sharded += q + 2 * kv;
  if (m.o_bias) p.small.whole += h;
  if (m.attention_sinks) p.small.sharded += static_cast<double>(m.num_heads);
}

void add_ffn(const ModelSpec& m, bool moe, Parts& p) {
  const double h = static_cast<double>(m.hidden_size);
  if (!moe) {
    p.dense_ffn.sharded += 3 * h * static_cast<double>(m.intermediate_size);
    return;
  }
  const double e = static_cast<double>(m.num_experts), mi = static_cast<double>(m.expert_intermediate());
  p.experts.sharded += e * 3 * h * mi;
  if (m.expert_bias) p.experts.sharded += e * (2 * mi + h);
  p.router.whole += h * e + (m.expert_bias ? e : 0);
  if (m.shared_intermediate_size > 0) {
    p.shared.sharded += 3 * h * static_cast<double>(m.shared_intermediate_size);
    if (m.shared_expert_gate) p.router.whole += h;
  }
}

Parts parts_of(const ModelSpec& m) {
  Parts p;
  const double h = static_cast<double>(m.hidden_size);
  const double embedding = static_cast<double>(m.vocab_size) * h;
  p.embedding.sharded = embedding;
  if (!m.tie_word_embeddings) p.lm_head.sharded = embedding;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    add_attention(m, m.attention_of(i), p);
    add_ffn(m, m.moe_at(i), p);
    p.small.whole += 2 * h;  // input and post-attention norms
  }
  p.small.whole += h;        // the final norm
  return p;
}

// Bytes of the parts in `format` (per GPU at tp; tp 0: all GPUs together).
double bytes_of(const ModelSpec& m, const WeightFormat& format, double tp, double moe_world = 0) {
  const Parts p = parts_of(m);
  const auto count = [&](const Part& part) { return tp > 0 ? part.per_gpu(tp) : part.total(); };
  const auto experts = [&](const Part& part) { return moe_world > 0 ? part.per_gpu(moe_world) : count(part); };
  const double base = dtype_bytes(m.dtype);
  const bool quantized = !format.method.empty();
  const double q = dtype_bytes(format.dtype) + format.scale_bytes;
  const double plain = quantized ? base : dtype_bytes(format.dtype);
  const auto in = [&](bool covered) { return quantized && covered ? q : plain; };
  return (count(p.embedding) + count(p.lm_head) + count(p.router) + count(p.small)) * plain +
         count(p.attention) * in(format.attention) + count(p.dense_ffn) * in(format.dense_ffn) +
         count(p.shared) * in(format.shared_experts) + experts(p.experts) * in(true);
}

}  // namespace

double ModelSpec::num_params() const {
  const Parts p = parts_of(*this);
  return p.embedding.total() + p.lm_head.total() + p.attention.total() + p.dense_ffn.total() +
         p.experts.total() + p.shared.total() + p.router.total() + p.small.total();
}

double ModelSpec::active_params() const {
  if (num_experts <= 1) return num_params();
  const double idle = static_cast<double>(num_experts - experts_per_token) /
                      static_cast<double>(num_experts);
  return num_params() - idle * parts_of(*this).experts.total();
}

double ModelSpec::weight_bytes(const WeightFormat& format) const { return bytes_of(*this, format, 0); }

double ModelSpec::weight_bytes(DType weights) const {
  return bytes_of(*this, weight_format_of(weights), 0);
}

double ModelSpec::weight_bytes_per_gpu(const WeightFormat& format, int64_t tp, int64_t moe_world) const {
  return bytes_of(*this, format, static_cast<double>(std::max<int64_t>(tp, 1)),
                  moe_world > tp ? static_cast<double>(moe_world) : 0);
}

double ModelSpec::kv_bytes_per_token(DType kv) const {
  double values = 0;
  for (int64_t i = 0; i < num_layers; ++i) values += kv_values_per_token(attention_of(i));
  return values * dtype_bytes(kv);
}

}  // namespace servesim
