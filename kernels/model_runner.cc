#include "kernels/model_runner.h"

#include <algorithm>
#include <span>

#include "kernels/cpu_ops.h"

namespace servesim {
namespace {

using cpu::require;

size_t to_size(int64_t n) { return static_cast<size_t>(n); }

void require_shape(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
  require(t.data.size() == to_size(rows * cols), what);
}

}  // namespace

int32_t check_runner_input(const CpuModelRunner::Input& in, int32_t num_blocks, int32_t block_size,
                           int64_t vocab) {
  const size_t num_tokens = in.input_ids.size();
  require(in.positions.size() == num_tokens, "positions has one entry per token");
  require(in.slot_mapping.size() == num_tokens, "slot_mapping has one entry per token");
  require(!in.cu_seqlens.empty() && in.cu_seqlens.front() == 0, "cu_seqlens starts at 0");
  require(to_size(in.cu_seqlens.back()) == num_tokens, "cu_seqlens ends at num_tokens");
  const size_t num_seqs = in.cu_seqlens.size() - 1;
  require(in.context_lens.size() == num_seqs, "context_lens has one entry per sequence");
  require(in.sample.size() == num_seqs, "sample has one entry per sequence");
  require(in.max_blocks_per_seq >= 0 &&
              in.block_tables.size() == num_seqs * to_size(in.max_blocks_per_seq),
          "block_tables is [num_seqs, max_blocks_per_seq]");
  for (int32_t id : in.input_ids) require(id >= 0 && id < vocab, "token id in [0, vocab)");
  int32_t longest = 0;
  for (size_t s = 0; s < num_seqs; ++s) {
    const int32_t first = in.cu_seqlens[s], last = in.cu_seqlens[s + 1];
    const int32_t ctx = in.context_lens[s];
    require(first <= last && last - first <= ctx, "context_lens[s] counts this step's tokens too");
    require(last > first || !in.sample[s], "a sampled sequence has a token this step");
    const int32_t* table = in.block_tables.data() + s * to_size(in.max_blocks_per_seq);
    if (last > first) {  // attention reads blocks 0 .. (ctx - 1) / block_size
      require((ctx - 1) / block_size < in.max_blocks_per_seq, "the block table covers the context");
      for (int32_t b = 0; b <= (ctx - 1) / block_size; ++b)
        require(table[b] >= 0 && table[b] < num_blocks, "block table entries are cache blocks");
    }
    longest = std::max(longest, ctx);
    for (int32_t t = first; t < last; ++t) {
      const int32_t pos = ctx - (last - t);
      require(in.positions[to_size(t)] == pos, "positions run up to context_lens[s] - 1");
      const int32_t slot = in.slot_mapping[to_size(t)];
      if (slot < 0) continue;  // padding
      require(slot == table[pos / block_size] * block_size + pos % block_size,
              "slot_mapping agrees with block_tables");
    }
  }
  return longest;
}

CpuModelRunner::CpuModelRunner(const ModelSpec& model, const ModelWeights& weights,
                               int32_t num_blocks, int32_t block_size)
    : model_(model), weights_(weights), num_blocks_(num_blocks), block_size_(block_size) {
  require(num_blocks > 0 && block_size > 0, "num_blocks and block_size are positive");
  const int64_t h = model.hidden_size, q = model.num_heads * model.head_dim;
  const int64_t kv = model.num_kv_heads * model.head_dim, inter = model.intermediate_size;
  require_shape(weights.embed_tokens, model.vocab_size, h, "embed_tokens is [vocab, hidden]");
  require_shape(weights.output_matrix(), model.vocab_size, h, "lm_head is [vocab, hidden]");
  require_shape(weights.norm, 1, h, "norm is [hidden]");
  require(weights.layers.size() == to_size(model.num_layers), "one LayerWeights per layer");
  for (const LayerWeights& l : weights.layers) {
    require_shape(l.input_layernorm, 1, h, "input_layernorm is [hidden]");
    require_shape(l.q_proj, q, h, "q_proj is [heads * head_dim, hidden]");
    require_shape(l.k_proj, kv, h, "k_proj is [kv_heads * head_dim, hidden]");
    require_shape(l.v_proj, kv, h, "v_proj is [kv_heads * head_dim, hidden]");
    require(l.q_bias.data.empty() || l.q_bias.data.size() == to_size(q), "q_bias is [q] or empty");
    require(l.k_bias.data.empty() || l.k_bias.data.size() == to_size(kv), "k_bias is [kv]");
    require(l.v_bias.data.empty() || l.v_bias.data.size() == to_size(kv), "v_bias is [kv]");
    require_shape(l.o_proj, h, q, "o_proj is [hidden, heads * head_dim]");
    require_shape(l.post_attention_layernorm, 1, h, "post_attention_layernorm is [hidden]");
    require_shape(l.gate_proj, inter, h, "gate_proj is [intermediate, hidden]");
    require_shape(l.up_proj, inter, h, "up_proj is [intermediate, hidden]");
    require_shape(l.down_proj, h, inter, "down_proj is [hidden, intermediate]");
  }
  const size_t cache_floats = to_size(int64_t{num_blocks} * block_size * kv);
  k_cache_.assign(to_size(model.num_layers), std::vector<float>(cache_floats, 0.0f));
  v_cache_.assign(to_size(model.num_layers), std::vector<float>(cache_floats, 0.0f));
}

CpuModelRunner::Output CpuModelRunner::forward(const Input& in) {
  check_runner_input(in, num_blocks_, block_size_, model_.vocab_size);
  const size_t num_seqs = in.cu_seqlens.size() - 1;
  const size_t T = in.input_ids.size();
  const int64_t H = model_.hidden_size, I = model_.intermediate_size;
  const int64_t Q = model_.num_heads * model_.head_dim;
  const int64_t KV = model_.num_kv_heads * model_.head_dim;
  const double eps = model_.rms_norm_eps;
  const cpu::AttentionShape shape{model_.num_heads, model_.num_kv_heads, model_.head_dim,
                                  block_size_};

  std::vector<float> x(T * to_size(H)), residual(T * to_size(H)), h(T * to_size(H));
  std::vector<float> q(T * to_size(Q)), k(T * to_size(KV)), v(T * to_size(KV));
  std::vector<float> attn(T * to_size(Q));
  std::vector<float> gate(T * to_size(I)), up(T * to_size(I)), gate_up(2 * T * to_size(I));
  std::vector<float> act(T * to_size(I));

  cpu::embedding(in.input_ids, weights_.embed_tokens.data, H, x);
  for (size_t layer = 0; layer < weights_.layers.size(); ++layer) {
    const LayerWeights& w = weights_.layers[layer];
    // Attention block: h = norm(x + residual), residual = x + residual (the first layer starts
    // the residual stream at the embeddings).
    if (layer == 0) {
      residual = x;
      cpu::rms_norm(x, w.input_layernorm.data, eps, h);
    } else {
      cpu::fused_add_rms_norm(x, residual, w.input_layernorm.data, eps, h);
    }
    cpu::linear(h, w.q_proj.data, w.q_bias.data, H, Q, q);
    cpu::linear(h, w.k_proj.data, w.k_bias.data, H, KV, k);
    cpu::linear(h, w.v_proj.data, w.v_bias.data, H, KV, v);
    cpu::rotary_embedding(in.positions, q, k, model_.num_heads, model_.num_kv_heads,
                          model_.head_dim, model_.rope_theta);
    cpu::reshape_and_cache(k, v, in.slot_mapping, k_cache_[layer], v_cache_[layer],
                           model_.num_kv_heads, model_.head_dim);
    cpu::paged_attention(q, k_cache_[layer], v_cache_[layer], in.cu_seqlens, in.context_lens,
                         in.block_tables, in.max_blocks_per_seq, shape, attn);
    cpu::linear(attn, w.o_proj.data, {}, Q, H, x);

    // MLP block: down(silu(gate(h)) * up(h)).
    cpu::fused_add_rms_norm(x, residual, w.post_attention_layernorm.data, eps, h);
    cpu::linear(h, w.gate_proj.data, {}, H, I, gate);
    cpu::linear(h, w.up_proj.data, {}, H, I, up);
    for (size_t t = 0; t < T; ++t) {  // rows of [gate | up], as silu_and_mul takes them
      std::copy_n(gate.begin() + static_cast<std::ptrdiff_t>(t * to_size(I)), I,
                  gate_up.begin() + static_cast<std::ptrdiff_t>(2 * t * to_size(I)));
      std::copy_n(up.begin() + static_cast<std::ptrdiff_t>(t * to_size(I)), I,
                  gate_up.begin() + static_cast<std::ptrdiff_t>((2 * t + 1) * to_size(I)));
    }
    cpu::silu_and_mul(gate_up, I, act);
    cpu::linear(act, w.down_proj.data, {}, I, H, x);
  }

  // Final norm and LM head, only on the last token of each sampled sequence.
  std::vector<float> last_x, last_residual;
  for (size_t s = 0; s < num_seqs; ++s) {
    if (!in.sample[s]) continue;
    require(in.cu_seqlens[s + 1] > in.cu_seqlens[s], "a sampled sequence has a token this step");
    const auto row = static_cast<std::ptrdiff_t>(to_size(in.cu_seqlens[s + 1] - 1) * to_size(H));
    last_x.insert(last_x.end(), x.begin() + row, x.begin() + row + H);
    last_residual.insert(last_residual.end(), residual.begin() + row, residual.begin() + row + H);
  }
  const size_t sampled = last_x.size() / to_size(H);
  std::vector<float> last_h(last_x.size());
  cpu::fused_add_rms_norm(last_x, last_residual, weights_.norm.data, eps, last_h);

  Output out;
  const int64_t V = model_.vocab_size;
  out.logits.resize(sampled * to_size(V));
  cpu::linear(last_h, weights_.output_matrix().data, {}, H, V, out.logits);
  for (size_t r = 0; r < sampled; ++r)
    out.next_tokens.push_back(cpu::argmax(
        std::span<const float>(out.logits).subspan(r * to_size(V), to_size(V))));
  return out;
}

}  // namespace servesim
