#include "backends/engine_batch.h"

#include <algorithm>
#include <cassert>

namespace servesim {

EngineBatch::EngineBatch(int64_t vocab_size, int32_t block_size)
    : vocab_size_(vocab_size), block_size_(block_size) {}

int32_t EngineBatch::token_at(const Sequence& seq, int32_t pos) const {
  if (pos >= seq.prompt_tokens) {
    return generated_.at(seq.index)[static_cast<size_t>(pos - seq.prompt_tokens)];
  }
  int32_t start = 0;
  for (int32_t s = 0; s < seq.num_prompt_segments; ++s) {
    const Segment& seg = seq.prompt_segments[s];
    if (pos < start + seg.tokens) {
      const uint64_t id = content_id(seg.id, static_cast<uint64_t>(pos - start));
      return static_cast<int32_t>(id % static_cast<uint64_t>(vocab_size_));
    }
    start += seg.tokens;
  }
  assert(false && "prompt segments shorter than the prompt");
  return 0;
}

bool EngineBatch::build(const Batch& batch) {
  CpuModelRunner::Input& in = input_;
  in.input_ids.clear();
  in.positions.clear();
  in.slot_mapping.clear();
  in.cu_seqlens.assign(1, 0);
  in.context_lens.clear();
  in.block_tables.clear();
  in.sample.clear();
  sampled_.clear();
  int32_t max_blocks = 1;
  for (const BatchItem& item : batch.items) {
    if (!item.padding) {
      max_blocks = std::max(max_blocks, static_cast<int32_t>(item.seq->block_table.size()));
    }
  }
  in.max_blocks_per_seq = max_blocks;
  const int32_t bs = block_size_;
  for (const BatchItem& item : batch.items) {
    if (item.padding) continue;
    const Sequence& seq = *item.seq;
    for (int32_t p = item.context_tokens; p < item.context_tokens + item.new_tokens; ++p) {
      in.input_ids.push_back(token_at(seq, p));
      in.positions.push_back(p);
      in.slot_mapping.push_back(seq.block_table[static_cast<size_t>(p / bs)] * bs + p % bs);
    }
    in.cu_seqlens.push_back(static_cast<int32_t>(in.input_ids.size()));
    in.context_lens.push_back(item.context_tokens + item.new_tokens);
    for (int32_t b = 0; b < max_blocks; ++b) {
      in.block_tables.push_back(b < static_cast<int32_t>(seq.block_table.size())
                                    ? seq.block_table[static_cast<size_t>(b)]
                                    : 0);
    }
    const bool emits = item.context_tokens + item.new_tokens >= seq.num_tokens();
    in.sample.push_back(emits ? 1 : 0);
    if (emits) sampled_.push_back(seq.index);
  }
  return !in.input_ids.empty();
}

void EngineBatch::record(const std::vector<int32_t>& next_tokens) {
  assert(next_tokens.size() == sampled_.size());
  for (size_t i = 0; i < sampled_.size(); ++i) generated_[sampled_[i]].push_back(next_tokens[i]);
}

}  // namespace servesim
