#include "kernels/weights.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "kernels/safetensors.h"

namespace servesim {

// The product of the dimensions; 0 for an empty tensor (no shape), such as a tied lm_head.
int64_t Tensor::numel() const {
  if (shape.empty()) return 0;
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

namespace {

// splitmix64: tiny, and the same sequence on every platform (no std:: distributions).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (-a, a): an odd multiple of 2^-24 in (-1, 1), exact in double, times a (one rounding).
  float uniform(double a) {
    const auto k = static_cast<int64_t>(next() >> 40);  // [0, 2^24)
    const double x = static_cast<double>(2 * k + 1 - (int64_t{1} << 24)) / static_cast<double>(int64_t{1} << 24);
    return static_cast<float>(a * x);
  }

 private:
  uint64_t state_;
};

// Each tensor draws from its own stream, keyed by its name, so one tensor's values do not depend on
// the shapes of those before it.
uint64_t stream_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return SplitMix64(seed ^ h).next();
}

Tensor uniform(std::vector<int64_t> shape, double a, uint64_t seed, const std::string& name) {
  Tensor t;
  t.shape = std::move(shape);
  t.data.resize(static_cast<size_t>(t.numel()));
  SplitMix64 rng(stream_seed(seed, name));
  for (float& v : t.data) v = rng.uniform(a);
  return t;
}

// A weight [out, in] with variance scale^2 / in (uniform in +-sqrt(3 / in) * scale).
Tensor projection(int64_t out, int64_t in, double scale, uint64_t seed, const std::string& name) {
  return uniform({out, in}, std::sqrt(3.0 / static_cast<double>(in)) * scale, seed, name);
}

Tensor ones(int64_t n) { return Tensor{{n}, std::vector<float>(static_cast<size_t>(n), 1.0f)}; }

// Calls f(name, tensor) for each Hugging Face-named tensor of `w` (const or not) that has a shape:
// biases only where present, lm_head only when not tied.
template <class W, class F>
void for_each_tensor(W& w, F&& f) {
  auto visit = [&](const std::string& name, auto& t) {
    if (!t.shape.empty()) f(name, t);
  };
  visit("model.embed_tokens.weight", w.embed_tokens);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    auto& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    visit(p + "input_layernorm.weight", l.input_layernorm);
    visit(p + "self_attn.q_proj.weight", l.q_proj);
    visit(p + "self_attn.k_proj.weight", l.k_proj);
    visit(p + "self_attn.v_proj.weight", l.v_proj);
    visit(p + "self_attn.q_proj.bias", l.q_bias);
    visit(p + "self_attn.k_proj.bias", l.k_bias);
    visit(p + "self_attn.v_proj.bias", l.v_bias);
    visit(p + "self_attn.o_proj.weight", l.o_proj);
    visit(p + "post_attention_layernorm.weight", l.post_attention_layernorm);
    visit(p + "mlp.gate_proj.weight", l.gate_proj);
    visit(p + "mlp.up_proj.weight", l.up_proj);
    visit(p + "mlp.down_proj.weight", l.down_proj);
  }
  visit("model.norm.weight", w.norm);
  visit("lm_head.weight", w.lm_head);
}

// Weights with every tensor the model needs at its shape, data empty: the template a file fills.
ModelWeights shapes_of(const ModelSpec& m) {
  const int64_t h = m.hidden_size, q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  const int64_t inter = m.intermediate_size;
  ModelWeights w;
  w.embed_tokens.shape = {m.vocab_size, h};
  w.layers.resize(static_cast<size_t>(m.num_layers));
  for (LayerWeights& l : w.layers) {
    l.input_layernorm.shape = {h};
    l.q_proj.shape = {q, h};
    l.k_proj.shape = {kv, h};
    l.v_proj.shape = {kv, h};
    if (m.qkv_bias) {
      l.q_bias.shape = {q};
      l.k_bias.shape = {kv};
      l.v_bias.shape = {kv};
    }
    l.o_proj.shape = {h, q};
    l.post_attention_layernorm.shape = {h};
    l.gate_proj.shape = {inter, h};
    l.up_proj.shape = {inter, h};
    l.down_proj.shape = {h, inter};
  }
  w.norm.shape = {h};
  if (!m.tie_word_embeddings) w.lm_head.shape = {m.vocab_size, h};
  return w;
}

}  // namespace

ModelWeights random_weights(const ModelSpec& m, uint64_t seed) {
  const int64_t h = m.hidden_size, q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  const int64_t inter = m.intermediate_size;
  // Each layer adds two residual branches; scaling their output projections by 1/sqrt(2 L) keeps
  // the residual stream's variance bounded (about doubled) however deep the model.
  const double depth = 1.0 / std::sqrt(2.0 * static_cast<double>(std::max<int64_t>(m.num_layers, 1)));
  constexpr double kBias = 0.02;
  ModelWeights w;
  // Rows of variance 1/hidden: after the final norm (entries O(1)) every logit is O(1), with a
  // spread of about 1, so different inputs pick different tokens.
  w.embed_tokens = projection(m.vocab_size, h, 1.0, seed, "model.embed_tokens.weight");
  w.layers.resize(static_cast<size_t>(m.num_layers));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    l.input_layernorm = ones(h);
    l.q_proj = projection(q, h, 1.0, seed, p + "self_attn.q_proj.weight");
    l.k_proj = projection(kv, h, 1.0, seed, p + "self_attn.k_proj.weight");
    l.v_proj = projection(kv, h, 1.0, seed, p + "self_attn.v_proj.weight");
    if (m.qkv_bias) {
      l.q_bias = uniform({q}, kBias, seed, p + "self_attn.q_proj.bias");
      l.k_bias = uniform({kv}, kBias, seed, p + "self_attn.k_proj.bias");
      l.v_bias = uniform({kv}, kBias, seed, p + "self_attn.v_proj.bias");
    }
    l.o_proj = projection(h, q, depth, seed, p + "self_attn.o_proj.weight");
    l.post_attention_layernorm = ones(h);
    l.gate_proj = projection(inter, h, 1.0, seed, p + "mlp.gate_proj.weight");
    l.up_proj = projection(inter, h, 1.0, seed, p + "mlp.up_proj.weight");
    l.down_proj = projection(h, inter, depth, seed, p + "mlp.down_proj.weight");
  }
  w.norm = ones(h);
  if (!m.tie_word_embeddings) w.lm_head = projection(m.vocab_size, h, 1.0, seed, "lm_head.weight");
  return w;
}

Result<ModelWeights> load_safetensors(const std::string& path, const ModelSpec& model) {
  auto file = SafetensorsFile::open(path);
  if (!file) return file.error();
  SafetensorsFile& f = file.value();
  ModelWeights w = shapes_of(model);  // a tied model's lm_head is not listed, so a stray one is ignored
  std::optional<Error> error;
  for_each_tensor(w, [&](const std::string& name, Tensor& t) {
    if (error) return;
    const std::string at = path + ": tensor '" + name + "'";
    const auto it = f.header().tensors.find(name);
    if (it == f.header().tensors.end()) {
      error = Error{at + " is missing"};
    } else if (it->second.shape != t.shape) {
      error = Error{at + ": expected shape " + shape_string(t.shape) + ", got " + shape_string(it->second.shape)};
    } else if (auto data = f.read_f32(name); !data) {
      error = data.error();
    } else {
      t.data = std::move(data).value();
    }
  });
  if (error) return *error;
  return w;
}

Status save_safetensors(const std::string& path, const ModelWeights& weights, DType dtype) {
  std::vector<NamedTensor> tensors;
  for_each_tensor(weights, [&](const std::string& name, const Tensor& t) { tensors.push_back({name, &t}); });
  return write_safetensors(path, tensors, dtype, {{"format", "pt"}});
}

}  // namespace servesim
