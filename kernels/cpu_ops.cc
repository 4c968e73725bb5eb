#include "kernels/cpu_ops.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace servesim::cpu {
namespace {

size_t to_size(int64_t n) { return static_cast<size_t>(n); }

// The number of rows of a [rows, width] array holding `total` elements. REQUIRES: width divides it.
size_t rows_of(size_t total, int64_t width, const char* what, CallSite where = here()) {
  require(width > 0 && total % to_size(width) == 0, what, where);
  return total / to_size(width);
}

// Sum of a[i] * b[i] for i < n, in index order.
float dot(const float* a, const float* b, size_t n) {
  float s = 0;
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void normalize_row(const float* x, const float* weight, size_t hidden, double eps, float* out) {
  double sum_sq = 0;
  for (size_t i = 0; i < hidden; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv_rms =
      static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(hidden) + eps));
  for (size_t i = 0; i < hidden; ++i) out[i] = x[i] * inv_rms * weight[i];
}

// Rotates each head of one token's row [heads, head_dim] by the angles of its position.
void rotate_heads(float* row, size_t heads, size_t head_dim, const std::vector<float>& cos_a,
                  const std::vector<float>& sin_a) {
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < heads; ++h) {
    float* x = row + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * cos_a[i] - x2 * sin_a[i];
      x[i + half] = x2 * cos_a[i] + x1 * sin_a[i];
    }
  }
}

}  // namespace

void require(bool ok, const char* what, CallSite where) {
  if (ok) return;
  std::fprintf(stderr, "%s:%u: %s: check failed: %s\n", where.file, where.line, where.function, what);
  std::abort();
}

void embedding(std::span<const int32_t> ids, std::span<const float> table, int64_t hidden,
               std::span<float> out) {
  const size_t vocab = rows_of(table.size(), hidden, "table is [vocab, hidden]");
  require(out.size() == ids.size() * to_size(hidden), "out is [ids.size(), hidden]");
  const size_t h = to_size(hidden);
  for (size_t t = 0; t < ids.size(); ++t) {
    require(ids[t] >= 0 && to_size(ids[t]) < vocab, "token id in [0, vocab)");
    const float* row = table.data() + to_size(ids[t]) * h;
    for (size_t i = 0; i < h; ++i) out[t * h + i] = row[i];
  }
}

void rms_norm(std::span<const float> x, std::span<const float> weight, double eps,
              std::span<float> out) {
  const size_t hidden = weight.size();
  const size_t rows = rows_of(x.size(), static_cast<int64_t>(hidden), "x is [T, hidden]");
  require(out.size() == x.size(), "out is the shape of x");
  for (size_t t = 0; t < rows; ++t)
    normalize_row(x.data() + t * hidden, weight.data(), hidden, eps, out.data() + t * hidden);
}

void fused_add_rms_norm(std::span<const float> x, std::span<float> residual,
                        std::span<const float> weight, double eps, std::span<float> out) {
  const size_t hidden = weight.size();
  const size_t rows = rows_of(x.size(), static_cast<int64_t>(hidden), "x is [T, hidden]");
  require(residual.size() == x.size() && out.size() == x.size(),
          "residual and out are the shape of x");
  for (size_t i = 0; i < x.size(); ++i) residual[i] += x[i];  // before out, which may alias x
  for (size_t t = 0; t < rows; ++t)
    normalize_row(residual.data() + t * hidden, weight.data(), hidden, eps,
                  out.data() + t * hidden);
}

void linear(std::span<const float> x, std::span<const float> weight, std::span<const float> bias,
            int64_t in_features, int64_t out_features, std::span<float> y) {
  const size_t in = to_size(in_features), out = to_size(out_features);
  require(weight.size() == in * out, "weight is [out_features, in_features]");
  require(bias.empty() || bias.size() == out, "bias is [out_features] or empty");
  const size_t rows = rows_of(x.size(), in_features, "x is [T, in_features]");
  require(y.size() == rows * out, "y is [T, out_features]");
  for (size_t t = 0; t < rows; ++t) {
    const float* xr = x.data() + t * in;
    for (size_t o = 0; o < out; ++o) {
      const float b = bias.empty() ? 0.0f : bias[o];
      y[t * out + o] = dot(xr, weight.data() + o * in, in) + b;
    }
  }
}

void rotary_embedding(std::span<const int32_t> positions, std::span<float> q, std::span<float> k,
                      int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, double theta) {
  require(head_dim > 0 && head_dim % 2 == 0, "head_dim is even");
  const size_t hd = to_size(head_dim), half = hd / 2;
  const size_t q_row = to_size(num_heads) * hd, k_row = to_size(num_kv_heads) * hd;
  require(q.size() == positions.size() * q_row, "q is [T, num_heads, head_dim]");
  require(k.size() == positions.size() * k_row, "k is [T, num_kv_heads, head_dim]");
  // inv_freq[i] = theta^(-2i/d), as Hugging Face computes it in float32.
  std::vector<float> inv_freq(half);
  for (size_t i = 0; i < half; ++i)
    inv_freq[i] = static_cast<float>(
        1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(hd)));
  std::vector<float> cos_a(half), sin_a(half);
  for (size_t t = 0; t < positions.size(); ++t) {
    require(positions[t] >= 0, "positions are non-negative");
    for (size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      cos_a[i] = std::cos(angle);
      sin_a[i] = std::sin(angle);
    }
    rotate_heads(q.data() + t * q_row, to_size(num_heads), hd, cos_a, sin_a);
    rotate_heads(k.data() + t * k_row, to_size(num_kv_heads), hd, cos_a, sin_a);
  }
}

void reshape_and_cache(std::span<const float> k, std::span<const float> v,
                       std::span<const int32_t> slot_mapping, std::span<float> k_cache,
                       std::span<float> v_cache, int64_t num_kv_heads, int64_t head_dim) {
  const size_t row = to_size(num_kv_heads * head_dim);
  require(k.size() == slot_mapping.size() * row && v.size() == k.size(),
          "k and v are [T, num_kv_heads, head_dim]");
  require(v_cache.size() == k_cache.size(), "k_cache and v_cache have the same shape");
  const size_t num_slots = rows_of(k_cache.size(), num_kv_heads * head_dim,
                                   "caches are [num_slots, num_kv_heads, head_dim]");
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    if (slot_mapping[t] < 0) continue;  // padding token: nothing to cache
    const size_t slot = to_size(slot_mapping[t]);
    require(slot < num_slots, "slot_mapping[t] < num_blocks * block_size");
    for (size_t i = 0; i < row; ++i) {
      k_cache[slot * row + i] = k[t * row + i];
      v_cache[slot * row + i] = v[t * row + i];
    }
  }
}

void paged_attention(std::span<const float> q, std::span<const float> k_cache,
                     std::span<const float> v_cache, std::span<const int32_t> cu_seqlens_q,
                     std::span<const int32_t> context_lens, std::span<const int32_t> block_tables,
                     int64_t max_blocks_per_seq, const AttentionShape& shape, std::span<float> out) {
  require(shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0,
          "num_kv_heads divides num_heads");
  require(shape.block_size > 0 && shape.head_dim > 0, "block_size and head_dim are positive");
  require(!cu_seqlens_q.empty() && cu_seqlens_q[0] == 0, "cu_seqlens_q starts at 0");
  const size_t num_seqs = cu_seqlens_q.size() - 1;
  require(context_lens.size() == num_seqs, "context_lens has one entry per sequence");
  require(block_tables.size() == num_seqs * to_size(max_blocks_per_seq),
          "block_tables is [num_seqs, max_blocks_per_seq]");
  const size_t hd = to_size(shape.head_dim), heads = to_size(shape.num_heads);
  const size_t kv_row = to_size(shape.num_kv_heads) * hd, q_row = heads * hd;
  const size_t group = heads / to_size(shape.num_kv_heads);  // query heads per KV head
  const size_t bs = to_size(shape.block_size);
  const size_t num_slots = rows_of(k_cache.size(), static_cast<int64_t>(kv_row),
                                   "caches are [num_slots, num_kv_heads, head_dim]");
  require(v_cache.size() == k_cache.size(), "k_cache and v_cache have the same shape");
  const size_t num_tokens = to_size(cu_seqlens_q.back());
  require(q.size() == num_tokens * q_row && out.size() == q.size(),
          "q and out are [cu_seqlens_q.back(), num_heads, head_dim]");
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));

  std::vector<size_t> slots;    // cache slot of each context position of the sequence
  std::vector<double> weights;  // softmax numerators of one query row and head
  for (size_t s = 0; s < num_seqs; ++s) {
    require(cu_seqlens_q[s + 1] >= cu_seqlens_q[s], "cu_seqlens_q is non-decreasing");
    const size_t first = to_size(cu_seqlens_q[s]), q_len = to_size(cu_seqlens_q[s + 1]) - first;
    require(context_lens[s] >= 0 && to_size(context_lens[s]) >= q_len,
            "context_lens[s] counts this step's tokens too");
    const size_t ctx = to_size(context_lens[s]);
    require(ctx <= to_size(max_blocks_per_seq) * bs, "context fits the block table");
    slots.resize(ctx);
    for (size_t c = 0; c < ctx; ++c) {
      const int32_t block = block_tables[s * to_size(max_blocks_per_seq) + c / bs];
      require(block >= 0, "block table entry is a block");
      slots[c] = to_size(block) * bs + c % bs;
      require(slots[c] < num_slots, "block table entry < num_blocks");
    }
    for (size_t j = 0; j < q_len; ++j) {
      const size_t pos = ctx - q_len + j;  // attends to cache positions 0..pos
      const size_t t = first + j;
      weights.resize(pos + 1);
      for (size_t h = 0; h < heads; ++h) {
        const float* qv = q.data() + t * q_row + h * hd;
        const size_t kv_off = (h / group) * hd;
        double max_score = -INFINITY;
        for (size_t c = 0; c <= pos; ++c) {
          const float* kv = k_cache.data() + slots[c] * kv_row + kv_off;
          weights[c] = dot(qv, kv, hd) * scale;
          if (weights[c] > max_score) max_score = weights[c];
        }
        double denom = 0;
        for (size_t c = 0; c <= pos; ++c) {
          weights[c] = std::exp(weights[c] - max_score);
          denom += weights[c];
        }
        float* o = out.data() + t * q_row + h * hd;
        for (size_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (size_t c = 0; c <= pos; ++c)
            acc += weights[c] * v_cache[slots[c] * kv_row + kv_off + d];
          o[d] = static_cast<float>(acc / denom);
        }
      }
    }
  }
}

void silu_and_mul(std::span<const float> x, int64_t d, std::span<float> out) {
  const size_t w = to_size(d);
  const size_t rows = rows_of(out.size(), d, "out is [T, d]");
  require(x.size() == 2 * out.size(), "x is [T, 2d]");
  for (size_t t = 0; t < rows; ++t) {
    const float* gate = x.data() + t * 2 * w;
    const float* up = gate + w;
    for (size_t i = 0; i < w; ++i) out[t * w + i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }
}

int32_t argmax(std::span<const float> x) {
  require(!x.empty(), "argmax of a non-empty array");
  size_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[best]) best = i;  // strictly greater: the lowest index wins ties
  return static_cast<int32_t>(best);
}

}  // namespace servesim::cpu
