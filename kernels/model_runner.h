// The CPU engine's model runner: one forward pass of a Llama / Qwen2-family decoder over a batch
// of sequences, in float32, with a paged KV cache, built from the reference operators in
// kernels/cpu_ops.h. It is the reference the CUDA runner is checked against.
//
// Ownership: the runner owns the KV cache (for each layer, num_blocks x block_size slots of K and
// of V, laid out [num_blocks, block_size, num_kv_heads, head_dim]). The caller owns block
// allocation, as vLLM's scheduler and block manager do: it says where each new token's K and V go
// (slot_mapping) and which blocks hold each sequence's context (block_tables). The runner keeps a
// reference to the weights, which must outlive it.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/model.h"
#include "kernels/weights.h"

namespace servesim {

class CpuModelRunner {
 public:
  // REQUIRES: the weights have the model's shapes; num_blocks > 0; block_size > 0.
  CpuModelRunner(const ModelSpec& model, const ModelWeights& weights, int32_t num_blocks,
                 int32_t block_size);

  // One step's batch: each sequence's new tokens (a prefill chunk, a whole prompt, or one decode
  // token), concatenated in sequence order.
  struct Input {
    std::vector<int32_t> input_ids;     // [num_tokens]
    std::vector<int32_t> positions;     // [num_tokens]: each token's position in its sequence
    // [num_tokens]: the cache slot for each token's K and V,
    // block_table[pos / block_size] * block_size + pos % block_size; negative = padding.
    std::vector<int32_t> slot_mapping;
    std::vector<int32_t> cu_seqlens;    // [num_seqs + 1]: sequence s owns tokens [cu[s], cu[s+1])
    // [num_seqs]: tokens in the cache for each sequence after this step (this step's included);
    // its new tokens are the last ones, so positions run context_len - q_len .. context_len - 1.
    std::vector<int32_t> context_lens;
    std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq]: block ids, row-major
    int32_t max_blocks_per_seq = 0;
    std::vector<uint8_t> sample;        // [num_seqs]: nonzero = compute logits for its last token
  };

  struct Output {
    std::vector<int32_t> next_tokens;   // [sampled sequences]: greedy (argmax, lowest on ties)
    std::vector<float> logits;          // [sampled sequences, vocab]
  };

  // Runs the decoder over the batch: writes the new tokens' K and V into the cache, and returns,
  // for each sequence with sample[s] set (in sequence order), its last token's logits and greedy
  // next token. The cache positions 0 .. context_len - q_len - 1 of each sequence must hold what
  // earlier steps wrote there. Inconsistent input aborts with a message naming the check.
  Output forward(const Input& input);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }

 private:
  const ModelSpec model_;
  const ModelWeights& weights_;
  const int32_t num_blocks_;
  const int32_t block_size_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer: [num_slots, kv_heads, head_dim]
};

// Checks a step's input against itself, a cache of num_blocks x block_size slots and the
// vocabulary, for every runner (CPU and CUDA): one entry per token in positions and slot_mapping,
// cu_seqlens from 0 to num_tokens, context_lens counting this step's tokens, positions ending at
// the context, slots agreeing with the block tables, blocks and token ids in range, a token for
// every sampled sequence. Aborts with a message naming the broken rule. Returns the longest context.
int32_t check_runner_input(const CpuModelRunner::Input& in, int32_t num_blocks, int32_t block_size,
                           int64_t vocab);

}  // namespace servesim
