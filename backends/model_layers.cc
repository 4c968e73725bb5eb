// Each family's layer patterns, as vLLM's model code builds them: which layers are mixtures of
// experts, and each layer's attention kind (layer_types, else the family's own pattern).
#include "backends/model_reading.h"

namespace servesim::model_reading {
namespace {

// layer_types' names, as transformers writes them.
std::optional<AttentionKind> layer_type(const std::string& name) {
  if (name == "full_attention") return AttentionKind::kFull;
  if (name == "sliding_attention") return AttentionKind::kSlidingWindow;
  if (name == "chunked_attention") return AttentionKind::kChunkedLocal;
  if (name == "linear_attention") return AttentionKind::kLinear;
  return std::nullopt;
}

// The layers' kinds from layer_types; nullopt when absent.
Result<std::optional<std::vector<AttentionKind>>> read_layer_types(Fields& f, int64_t n) {
  const json* v = f.find("layer_types");
  if (v == nullptr) return std::optional<std::vector<AttentionKind>>{};
  if (!v->is_array() || static_cast<int64_t>(v->size()) != n)
    return f.error_at("layer_types", "expected a list of " + std::to_string(n) +
                                         " layer types (num_hidden_layers), got " + json_excerpt(*v));
  std::vector<AttentionKind> kinds;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    const auto kind = e.is_string() ? layer_type(e.get<std::string>()) : std::nullopt;
    if (!kind)
      return f.error_at("layer_types[" + std::to_string(i) + "]",
                        "expected full_attention, sliding_attention, chunked_attention or "
                        "linear_attention, got " + json_excerpt(e));
    kinds.push_back(*kind);
  }
  return std::optional<std::vector<AttentionKind>>(std::move(kinds));
}

// Each layer's attention kind when layer_types does not say: the family's pattern.
std::vector<AttentionKind> default_layer_kinds(Fields& f, const ArchDefaults& arch, const ModelSpec& m) {
  const int64_t n = m.num_layers;
  std::vector<AttentionKind> kinds(static_cast<size_t>(n), AttentionKind::kFull);
  for (int64_t i = 0; i < n; ++i) {
    auto& k = kinds[static_cast<size_t>(i)];
    switch (arch.family) {
      case Family::kDeepseekV3: k = AttentionKind::kMla; break;
      case Family::kGptOss:  // sliding, full, sliding, ...
        k = (i + 1) % 2 != 0 ? AttentionKind::kSlidingWindow : AttentionKind::kFull;
        break;
      case Family::kGemma3: {  // one global layer after every pattern - 1 local ones
        const int64_t pattern = f.integer("sliding_window_pattern", 6, 1, n);
        k = (i + 1) % pattern != 0 ? AttentionKind::kSlidingWindow : AttentionKind::kFull;
        break;
      }
      case Family::kQwen3Next: {
        const int64_t interval = f.integer("full_attention_interval", 4, 1, n);
        k = (i + 1) % interval == 0 ? AttentionKind::kFull : AttentionKind::kLinear;
        break;
      }
      case Family::kMistral:  // a sliding_window without layer_types: every layer slides (vLLM)
        if (m.sliding_window > 0) k = AttentionKind::kSlidingWindow;
        break;
      case Family::kQwen2:
      case Family::kQwen3:  // use_sliding_window: the layers from max_window_layers on slide
        if (m.sliding_window > 0 && f.boolean("use_sliding_window", false) &&
            i >= f.integer("max_window_layers", n, 0, kMaxModelLayers))
          k = AttentionKind::kSlidingWindow;
        break;
      default: break;  // Llama, Mixtral: only where layer_types says
    }
  }
  return kinds;
}

// Llama-4: layers with RoPE attend within their chunk; the NoPE layers (no_rope_layers 0, by
// default every fourth) attend to everything.
void read_llama4_chunks(Fields& f, ModelSpec& m) {
  const int64_t n = m.num_layers;
  m.attention_chunk_size = f.integer("attention_chunk_size", 8192, 0, kMaxTokens);
  std::vector<int64_t> rope(static_cast<size_t>(n));
  const int64_t interval = f.integer("no_rope_layer_interval", 4, 1, n);
  for (int64_t i = 0; i < n; ++i) rope[i] = (i + 1) % interval != 0;
  if (auto listed = f.integers("no_rope_layers", 0, 1); listed && !listed->empty()) {
    if (static_cast<int64_t>(listed->size()) == n) rope = *listed;
  }
  if (m.attention_chunk_size == 0) return;
  for (int64_t i = 0; i < n; ++i)
    if (rope[i] != 0 && m.layer_attention[i] == AttentionKind::kFull)
      m.layer_attention[i] = AttentionKind::kChunkedLocal;
}


}  // namespace

// Which layers are mixtures of experts, as each family's vLLM model builds them.
void read_moe_layers(Fields& f, const ArchDefaults& arch, ModelSpec& m) {
  m.layer_moe.assign(static_cast<size_t>(m.num_layers), m.num_experts > 1 ? 1 : 0);
  if (m.num_experts <= 1) return;
  const int64_t n = m.num_layers;
  if (arch.family == Family::kDeepseekV3) {
    const int64_t first = f.integer("first_k_dense_replace", 3, 0, n);
    const int64_t freq = f.integer("moe_layer_freq", 1, 1, n);
    for (int64_t i = 0; i < n; ++i) m.layer_moe[i] = i >= first && i % freq == 0;
  } else if (arch.family == Family::kLlama4) {
    const int64_t step = f.integer("interleave_moe_layer_step", 1, 0, n);
    for (int64_t i = 0; i < n; ++i) m.layer_moe[i] = step > 0 && (i + 1) % step == 0;
    if (auto listed = f.integers("moe_layers", 0, n - 1)) {
      m.layer_moe.assign(static_cast<size_t>(n), 0);
      for (int64_t i : *listed) m.layer_moe[i] = 1;
    }
  } else if (arch.family == Family::kQwen3Moe || arch.family == Family::kQwen3Next) {
    const int64_t step = f.integer("decoder_sparse_step", 1, 1, n);
    const auto dense = f.integers("mlp_only_layers", 0, n - 1).value_or(std::vector<int64_t>{});
    for (int64_t i = 0; i < n; ++i) m.layer_moe[i] = (i + 1) % step == 0;
    for (int64_t i : dense) m.layer_moe[i] = 0;
  }
}


// The layers' attention kinds, and the windows they need.
Status read_layout(Fields& f, const ArchDefaults& arch, ModelSpec& m) {
  Result<std::optional<std::vector<AttentionKind>>> listed = read_layer_types(f, m.num_layers);
  if (!listed.ok()) return listed.error();
  m.layer_attention = listed.value() ? *listed.value() : default_layer_kinds(f, arch, m);
  if (arch.family == Family::kDeepseekV3)
    for (auto& k : m.layer_attention)
      if (k == AttentionKind::kFull) k = AttentionKind::kMla;
  if (arch.family == Family::kLlama4) read_llama4_chunks(f, m);
  if (f.error) return *f.error;
  if (m.has(AttentionKind::kSlidingWindow) && m.sliding_window <= 0)
    return f.error_at("sliding_window", "must be > 0: layers " + std::string("slide (layer_types)") +
                                            ", got " + std::to_string(m.sliding_window));
  if (m.has(AttentionKind::kChunkedLocal) && m.attention_chunk_size <= 0)
    return f.error_at("attention_chunk_size", "must be > 0");
  return Ok{};
}

}  // namespace servesim::model_reading
