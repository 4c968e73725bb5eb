// What the cpu and cuda engines share: turning the simulator's Batch into the model runner's flat
// inputs (input_ids, positions, slot_mapping, cu_seqlens, context_lens, block_tables, sample), and
// remembering the tokens the engine generates so that later steps feed them back.
//
// Token ids: a prompt token's id is derived from its content (segment id and offset), so prompts
// that share content share tokens and prefix-cache hits reuse KV that really is the same; generated
// tokens are the engine's greedy choices.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kernels/model_runner.h"
#include "sim/batch.h"

namespace servesim {

class EngineBatch {
 public:
  EngineBatch(int64_t vocab_size, int32_t block_size);

  // Builds the input of one step from the batch; padding rows (static batching's finished rows)
  // are left out. Returns false when nothing is left to run.
  bool build(const Batch& batch);
  const CpuModelRunner::Input& input() const { return input_; }
  // Records the sampled sequences' next tokens (in batch order, as the runner returns them).
  void record(const std::vector<int32_t>& next_tokens);

 private:
  int32_t token_at(const Sequence& seq, int32_t pos) const;

  const int64_t vocab_size_;
  const int32_t block_size_;
  CpuModelRunner::Input input_;
  std::vector<int32_t> sampled_;  // request indices of the sampled sequences of the last build
  std::unordered_map<int32_t, std::vector<int32_t>> generated_;  // request index -> its tokens
};

}  // namespace servesim
