// A transformer model's shapes, read from a Hugging Face config.json (Llama, Mistral, Mixtral and
// Qwen2 families), and what follows from them: parameters, weight bytes, KV bytes per token.
// Missing fields take Hugging Face's defaults for the architecture; an unknown architecture is an
// error that lists the supported ones. Immutable once loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/result.h"

namespace servesim {

enum class DType { kFp32, kFp16, kBf16, kFp8, kInt4 };

// Bytes per element (0.5 for int4).
double dtype_bytes(DType d);
// "fp32" | "fp16" | "bf16" | "fp8" | "int4" (also "float16", "bfloat16", "float32" as in config.json).
Result<DType> parse_dtype(const std::string& s);
const char* dtype_name(DType d);

struct ModelSpec {
  std::string name;                 // from the file name, or _name_or_path
  std::string path;
  std::string architecture;         // e.g. "LlamaForCausalLM"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;    // per expert for mixtures of experts
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;             // hidden_size / num_heads unless given
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;            // Qwen2: biases on the Q, K and V projections
  int64_t num_experts = 1;          // num_local_experts (1 = dense)
  int64_t experts_per_token = 1;    // num_experts_per_tok
  int64_t sliding_window = 0;       // 0 = none
  DType dtype = DType::kBf16;       // torch_dtype

  // Parameters in total, and those active for one token (mixtures of experts use only some).
  double num_params() const;
  double active_params() const;
  // Bytes of all weights at `weights` precision.
  double weight_bytes(DType weights) const;
  // KV cache bytes per token: 2 x layers x KV heads x head dim x element size.
  double kv_bytes_per_token(DType kv) const;
};

// Bounds on a config.json's values, far above any model built (Llama 3.1 405B: hidden 16384, 126
// layers, 128 heads, head_dim 128, vocab 128256), so that every size derived from them fits its
// type; a value outside is an error naming the key and the bound. max_position_embeddings is at
// most kMaxTokens (sim/request.h).
inline constexpr int64_t kMaxModelHidden = 1 << 20;     // hidden_size (intermediate_size: 8x)
inline constexpr int64_t kMaxModelLayers = 4096;        // num_hidden_layers
inline constexpr int64_t kMaxModelHeads = 4096;         // num_attention_heads, num_key_value_heads
inline constexpr int64_t kMaxModelHeadDim = 1 << 14;    // head_dim
inline constexpr int64_t kMaxModelVocab = 1 << 24;      // vocab_size
inline constexpr int64_t kMaxModelExperts = 4096;       // num_local_experts, num_experts_per_tok
inline constexpr size_t kMaxModelConfigBytes = 16 << 20;  // a config.json larger than this is refused

// Ok if the model can be split over `tp` GPUs as vLLM splits it: tp divides the attention heads,
// and the KV heads divide among the GPUs or are replicated evenly (tp a multiple of them). Else an
// error that lists the degrees that work.
Status check_tensor_parallel(const ModelSpec& model, int64_t tp);

// Reads a config.json. Errors name the file and key (and line for malformed JSON).
Result<ModelSpec> load_model(const std::string& path);

}  // namespace servesim
