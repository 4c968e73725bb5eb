// A transformer model's shapes, read from a Hugging Face config.json, and what follows from them:
// parameters, weight bytes, KV bytes per token. Each layer has an attention kind (full, sliding
// window, chunked local, DeepSeek's multi-head latent attention, or linear attention with a constant
// state) and a feed-forward kind (dense, or a mixture of experts with shared experts); the weights
// have a precision per part (quantization_config). Missing fields take Hugging Face's defaults for
// the architecture; an unknown architecture is an error that lists the supported ones. Immutable
// once loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/result.h"

namespace servesim {

// kFp4: E2M1 (MXFP4, NVFP4); kInt8, kInt4: integer weights (with scales, see WeightFormat).
enum class DType { kFp32, kFp16, kBf16, kFp8, kInt4, kInt8, kFp4 };

// Bytes per element (0.5 for int4 and fp4), scales not counted.
double dtype_bytes(DType d);
// "fp32" | "fp16" | "bf16" | "fp8" | "int8" | "int4" | "fp4" (also "float16", "bfloat16",
// "float32" as in config.json).
Result<DType> parse_dtype(const std::string& s);
const char* dtype_name(DType d);

// How one layer attends, and so what KV it keeps (vLLM's KV cache specs).
enum class AttentionKind : uint8_t {
  kFull,           // every earlier token; K and V per KV head
  kSlidingWindow,  // the last sliding_window tokens (gpt-oss, Gemma-3, Mistral)
  kChunkedLocal,   // the tokens of its own attention_chunk_size chunk (Llama-4)
  kMla,            // multi-head latent attention: one latent vector per token (DeepSeek-V3)
  kLinear,         // linear attention (Gated DeltaNet): a constant state per request (Qwen3-Next)
};
const char* attention_kind_name(AttentionKind k);

// Weights of a quantized checkpoint (quantization_config) or of --dtype: the element type of the
// quantized linear layers, the scale bytes per weight, and which layers it covers.
struct WeightFormat {
  std::string method;             // "" (none), "fp8", "mxfp4", "nvfp4", "awq", "gptq", "int8", ...
  DType dtype = DType::kBf16;     // the quantized layers' elements
  double scale_bytes = 0;         // scale (and zero-point) bytes per weight element
  bool weight_only = false;       // activations stay 16-bit: the kernel dequantizes
  bool block_scaled = false;      // fp8 with per-block scales (DeepSeek-V3: 128 x 128)
  // Which linear layers it covers beside the routed experts (modules_to_not_convert, ignore):
  // gpt-oss's MXFP4 leaves attention in bf16.
  bool attention = true, dense_ffn = true, shared_experts = true;
};



struct ModelSpec {
  std::string name;                 // from the file name, or _name_or_path
  std::string path;
  std::string architecture;         // e.g. "LlamaForCausalLM"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;    // the dense feed-forward layers' (Mixtral: per expert)
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
  int64_t num_experts = 1;          // routed experts (num_local_experts, n_routed_experts); 1 = dense
  int64_t experts_per_token = 1;    // num_experts_per_tok
  int64_t moe_intermediate_size = 0;     // one routed expert's (0: no mixture)
  int64_t num_shared_experts = 0;        // experts every token goes through (DeepSeek, Llama-4)
  int64_t shared_intermediate_size = 0;  // all shared experts together
  bool shared_expert_gate = false;       // a sigmoid gate on the shared expert (Qwen-MoE)
  bool expert_bias = false;              // biases on the experts' projections (gpt-oss)
  int64_t sliding_window = 0;       // tokens a sliding-window layer sees; 0 = none
  int64_t attention_chunk_size = 0; // chunked-local layers' chunk (Llama-4); 0 = none
  bool attention_sinks = false;     // a learned sink logit per head (gpt-oss)
  bool attention_output_gate = false;  // Q projection doubled for an output gate (Qwen3-Next)
  bool o_bias = false;              // a bias on the output projection too (gpt-oss)
  // Multi-head latent attention (DeepSeek-V2/V3): ranks of the query and KV compressions (q 0: no
  // compression) and the heads' dimensions.
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_rope_head_dim = 0, qk_nope_head_dim = 0,
          v_head_dim = 0;
  // Linear attention (Gated DeltaNet): heads and head dims of keys and values, the conv kernel.
  int64_t linear_key_heads = 0, linear_value_heads = 0, linear_key_head_dim = 0,
          linear_value_head_dim = 0, linear_conv_kernel = 0;
  std::vector<AttentionKind> layer_attention;  // per layer
  std::vector<uint8_t> layer_moe;              // per layer: 1 = mixture of experts
  DType dtype = DType::kBf16;       // torch_dtype: embeddings and unquantized layers
  WeightFormat quantization;        // quantization_config; method "" = none (all at dtype)

  // Layer i's attention kind and whether it is a mixture (layers past the vectors, as a test that
  // sets num_layers by hand leaves them: full attention, a mixture when num_experts > 1).
  AttentionKind attention_of(int64_t i) const {
    return i < static_cast<int64_t>(layer_attention.size()) ? layer_attention[static_cast<size_t>(i)]
                                                            : AttentionKind::kFull;
  }
  bool moe_at(int64_t i) const {
    return i < static_cast<int64_t>(layer_moe.size()) ? layer_moe[static_cast<size_t>(i)] != 0 : num_experts > 1;
  }
  // One routed expert's intermediate size (intermediate_size when not given).
  int64_t expert_intermediate() const { return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size; }
  int64_t num_moe_layers() const;
  int64_t num_layers_of(AttentionKind k) const;
  bool has(AttentionKind k) const { return num_layers_of(k) > 0; }
  bool is_moe() const { return num_moe_layers() > 0; }
  // The KV values one token adds to one layer of kind k, all GPUs together (K and V: 2 x KV heads
  // x head dim; MLA: kv_lora_rank + qk_rope_head_dim; linear: 0, its state is per request).
  double kv_values_per_token(AttentionKind k) const;
  // One linear-attention layer's state per request, in elements (convolution and recurrent state).
  double linear_state_values() const;

  // Parameters in total, and those active for one token (mixtures of experts use only some).
  double num_params() const;
  double active_params() const;
  // Bytes of all weights: the quantized layers in `format`, the rest at dtype.
  double weight_bytes(const WeightFormat& format) const;
  // The same with every linear layer (not the embeddings) at `weights` (fp8/int8/int4: scaled as
  // vLLM's online quantization scales them).
  double weight_bytes(DType weights) const;
  // The weights' bytes per GPU at tensor parallelism tp: what the TP split shards, plus what every
  // GPU holds whole (MLA's compressions, routers, norms).
  // The experts split over moe_world GPUs (data-parallel ranks x tp; 0: tp), the rest over tp.
  double weight_bytes_per_gpu(const WeightFormat& format, int64_t tp, int64_t moe_world = 0) const;
  // KV cache bytes per token summed over the layers that grow with context (all but linear), as if
  // none forgot old tokens.
  double kv_bytes_per_token(DType kv) const;
};

// The layers in short: "full 32", "swa 12+full 12 moe 24", "mla 61 moe 58".
std::string attention_summary(const ModelSpec& m);

// The weight format of --dtype `d`: 16- or 32-bit as is;
// fp8, int8, int4 and fp4 as vLLM quantizes them online (scales per channel or per group).
WeightFormat weight_format_of(DType d);

// The element type the quantized layers compute in on a GPU with the given peaks (0 = none):
// weight-only formats, and fp8 or fp4 where the GPU has no such tensor cores, dequantize to
// 16-bit (Marlin-style kernels); the rest compute in their own type.
DType compute_dtype(const WeightFormat& f, DType activations, double fp8_flops, double fp4_flops);

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
// and the KV heads divide among the GPUs or are replicated evenly (tp a multiple of them); linear
// attention's heads too. Else an error that lists the degrees that work.
Status check_tensor_parallel(const ModelSpec& model, int64_t tp);

// Reads a config.json. Errors name the file and key (and line for malformed JSON).
Result<ModelSpec> load_model(const std::string& path);

}  // namespace servesim
