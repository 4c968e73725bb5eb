// The weights of a Llama / Qwen2-family decoder, in float32 on the host, with Hugging Face's names
// and shapes (a projection's weight is [out_features, in_features]). They come from a seeded random
// initialisation scaled so that activations stay finite through many layers, or from a safetensors
// file (fp32, fp16 or bf16 tensors). The CPU engine computes with them directly; the CUDA engine
// converts them to bf16/fp16 on the device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/model.h"
#include "sim/result.h"

namespace servesim {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major
  int64_t numel() const;
};

struct LayerWeights {
  Tensor input_layernorm;           // [hidden]            model.layers.N.input_layernorm.weight
  Tensor q_proj, k_proj, v_proj;    // [heads*hd, hidden], [kv*hd, hidden] x2   .self_attn.{q,k,v}_proj.weight
  Tensor q_bias, k_bias, v_bias;    // [heads*hd], [kv*hd] x2 (Qwen2 only; empty otherwise)   .bias
  Tensor o_proj;                    // [hidden, heads*hd]  .self_attn.o_proj.weight
  Tensor post_attention_layernorm;  // [hidden]
  Tensor gate_proj, up_proj;        // [intermediate, hidden]   .mlp.{gate,up}_proj.weight
  Tensor down_proj;                 // [hidden, intermediate]   .mlp.down_proj.weight
};

struct ModelWeights {
  Tensor embed_tokens;              // [vocab, hidden]     model.embed_tokens.weight
  std::vector<LayerWeights> layers;
  Tensor norm;                      // [hidden]            model.norm.weight
  Tensor lm_head;                   // [vocab, hidden]     lm_head.weight; empty when tied
  // The LM head's matrix: lm_head, or embed_tokens when the model ties them.
  const Tensor& output_matrix() const { return lm_head.data.empty() ? embed_tokens : lm_head; }
};

// Seeded random weights of the model's shapes: projections ~ N(0, 1/in_features) scaled down for
// depth, norms 1, biases small. The same seed gives the same weights.
ModelWeights random_weights(const ModelSpec& model, uint64_t seed);

// Reads Hugging Face-named tensors from a safetensors file (fp32, fp16 or bf16), checking every
// name and shape against the model. Errors name the file and tensor.
Result<ModelWeights> load_safetensors(const std::string& path, const ModelSpec& model);

// Writes the weights as a safetensors file with the given element type (fp32, fp16 or bf16).
Status save_safetensors(const std::string& path, const ModelWeights& weights, DType dtype);

}  // namespace servesim
