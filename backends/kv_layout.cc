#include "backends/kv_layout.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace servesim {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// KV bytes one token adds to one attention layer of kind k on one GPU.
double attention_bytes_per_token(const ModelSpec& m, AttentionKind k, const KvLayoutOptions& o) {
  if (k == AttentionKind::kMla) return m.kv_values_per_token(k) * dtype_bytes(o.kv);
  const int64_t heads = std::max<int64_t>(1, m.num_kv_heads / o.tp);
  return 2.0 * static_cast<double>(heads * m.head_dim) * dtype_bytes(o.kv);
}

// One linear-attention layer's state per request on one GPU: convolution and recurrent state at
// the model's dtype.
double mamba_state_bytes(const ModelSpec& m, int32_t tp) {
  return m.linear_state_values() / tp * dtype_bytes(m.dtype);
}

// Each layer's kind as the KV cache sees it: without the hybrid manager, sliding and chunked
// layers keep full attention's KV when the model has full layers.
std::vector<AttentionKind> kv_kinds(const ModelSpec& m, const KvLayoutOptions& o) {
  std::vector<AttentionKind> kinds;
  for (int64_t i = 0; i < m.num_layers; ++i) kinds.push_back(m.attention_of(i));
  const bool hybrid = o.hybrid_manager && (o.chunked_local_hybrid || !m.has(AttentionKind::kChunkedLocal));
  if (hybrid || !m.has(AttentionKind::kFull)) return kinds;
  for (AttentionKind& k : kinds)
    if (k == AttentionKind::kSlidingWindow || k == AttentionKind::kChunkedLocal) k = AttentionKind::kFull;
  return kinds;
}

// The layers of each kind, kinds in the order of their first layer.
std::vector<std::pair<AttentionKind, std::vector<int32_t>>> buckets(const std::vector<AttentionKind>& kinds) {
  std::vector<std::pair<AttentionKind, std::vector<int32_t>>> out;
  for (size_t i = 0; i < kinds.size(); ++i) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& b) { return b.first == kinds[i]; });
    if (it == out.end()) it = out.insert(out.end(), {kinds[i], {}});
    it->second.push_back(static_cast<int32_t>(i));
  }
  return out;
}

// The attention block size, grown with Mamba layers until one attention page holds a state.
int64_t block_size_for(const ModelSpec& m, const KvLayoutOptions& o, double attention_per_token) {
  int64_t b = std::max<int64_t>(o.block_size, 1);
  if (!m.has(AttentionKind::kLinear) || attention_per_token <= 0) return b;
  int64_t align = std::max<int64_t>(16, b);
  if (o.prefix_caching) align = std::lcm(align, int64_t{64});
  const double state = mamba_state_bytes(m, o.tp);
  int64_t grown = align * static_cast<int64_t>(std::ceil(state / (static_cast<double>(align) * attention_per_token)));
  grown = cdiv(grown, 16) * 16;
  return std::max(b, grown);
}

}  // namespace

KvLayout kv_layout(const ModelSpec& m, const KvLayoutOptions& o) {
  KvLayout out;
  const std::vector<AttentionKind> kinds = kv_kinds(m, o);
  const auto found = std::find_if(kinds.begin(), kinds.end(), [](AttentionKind k) { return k != AttentionKind::kLinear; });
  const double per_token = found == kinds.end() ? 0 : attention_bytes_per_token(m, *found, o);
  out.block_size = block_size_for(m, o, per_token);
  const double page = static_cast<double>(out.block_size) * per_token;
  auto all = buckets(kinds);
  size_t smallest = SIZE_MAX, largest = 0;
  for (const auto& b : all) {
    smallest = std::min(smallest, b.second.size());
    largest = std::max(largest, b.second.size());
  }
  const size_t size = all.size() == 1 ? largest
                      : static_cast<double>(largest) < 1.5 * static_cast<double>(smallest) ? largest
                                                                                          : smallest;
  for (const auto& [kind, layers] : all) {
    const size_t k = (layers.size() + size - 1) / size;
    for (size_t i = 0; i < k; ++i) {
      KvGroup g;
      g.kind = kind;
      for (size_t j = i; j < layers.size(); j += k) g.layers.push_back(layers[j]);
      g.window = kind == AttentionKind::kSlidingWindow ? m.sliding_window
                 : kind == AttentionKind::kChunkedLocal ? m.attention_chunk_size : 0;
      g.page_bytes = kind == AttentionKind::kLinear ? std::max(page, mamba_state_bytes(m, o.tp))
                                                    : static_cast<double>(out.block_size) *
                                                          attention_bytes_per_token(m, kind, o);
      out.bytes_per_block = std::max(out.bytes_per_block, g.page_bytes * static_cast<double>(g.layers.size()));
      out.hybrid = out.hybrid || (kind != AttentionKind::kFull && kind != AttentionKind::kMla);
      out.groups.push_back(std::move(g));
    }
  }
  out.hybrid = out.hybrid || out.groups.size() > 1;
  out.mamba_blocks = m.has(AttentionKind::kLinear) ? (o.prefix_caching ? 3 : 1) : 0;
  return out;
}

KvGroups scheduler_groups(const KvLayout& layout, bool prefix_caching) {
  KvGroups g;
  int32_t full = 0;
  for (const KvGroup& group : layout.groups) {
    switch (group.kind) {
      case AttentionKind::kFull:
      case AttentionKind::kMla: ++full; break;
      case AttentionKind::kSlidingWindow:
      case AttentionKind::kChunkedLocal:
        ++g.windowed;
        g.chunked = group.kind == AttentionKind::kChunkedLocal;
        g.window = group.window;
        break;
      case AttentionKind::kLinear:
        if (!prefix_caching) ++g.state;
        break;
    }
  }
  if (full == 0) return {};
  g.extra_full = full - 1;
  return g;
}

int64_t KvLayout::num_blocks(double memory) const {
  if (bytes_per_block <= 0 || memory <= 0) return 0;
  return static_cast<int64_t>(std::floor(memory / bytes_per_block));
}

int64_t KvLayout::blocks_per_request(int64_t tokens, int64_t in_flight) const {
  int64_t blocks = 0;
  for (const KvGroup& g : groups) {
    switch (g.kind) {
      case AttentionKind::kSlidingWindow:
      case AttentionKind::kChunkedLocal: {
        // The windowed group's per-request bound, as the block manager caps admission with it.
        KvGroups windowed;
        windowed.windowed = 1;
        windowed.chunked = g.kind == AttentionKind::kChunkedLocal;
        windowed.window = g.window;
        windowed.set_admission_cap(static_cast<int32_t>(block_size), in_flight, tokens);
        blocks += windowed.admission_cap;
        break;
      }
      case AttentionKind::kLinear: blocks += mamba_blocks; break;
      default: blocks += cdiv(tokens, block_size);
    }
  }
  return blocks;
}

double KvLayout::max_concurrency(int64_t blocks, int64_t tokens, int64_t in_flight) const {
  const int64_t per = blocks_per_request(tokens, in_flight);
  return per > 0 ? static_cast<double>(blocks) / static_cast<double>(per) : 0;
}

}  // namespace servesim
