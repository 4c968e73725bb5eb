#include "backends/cpu_backend.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <utility>

#include "backends/kv_memory.h"
#include "sim/presets.h"

namespace servesim {

CpuBackend::CpuBackend(RooflineModel predictor, std::unique_ptr<ModelWeights> weights,
                       int32_t num_blocks, int32_t block_size)
    : predictor_(std::move(predictor)),
      weights_(std::move(weights)),
      runner_(predictor_.model(), *weights_, num_blocks, block_size) {}

int64_t CpuBackend::kv_blocks(int32_t /*block_size*/) const { return runner_.num_blocks(); }

int32_t CpuBackend::token_at(const Sequence& seq, int32_t pos) const {
  const auto vocab = static_cast<uint64_t>(predictor_.model().vocab_size);
  if (pos >= seq.prompt_tokens) {
    return generated_.at(seq.index)[static_cast<size_t>(pos - seq.prompt_tokens)];
  }
  int32_t start = 0;
  for (int32_t s = 0; s < seq.num_prompt_segments; ++s) {
    const Segment& seg = seq.prompt_segments[s];
    if (pos < start + seg.tokens) {
      return static_cast<int32_t>(content_id(seg.id, static_cast<uint64_t>(pos - start)) % vocab);
    }
    start += seg.tokens;
  }
  assert(false && "prompt segments shorter than the prompt");
  return 0;
}

IterationResult CpuBackend::run(const Batch& batch) {
  CpuModelRunner::Input& in = input_;
  in.input_ids.clear();
  in.positions.clear();
  in.slot_mapping.clear();
  in.cu_seqlens.assign(1, 0);
  in.context_lens.clear();
  in.block_tables.clear();
  in.sample.clear();
  int32_t max_blocks = 1;
  for (const BatchItem& item : batch.items) {
    if (!item.padding) max_blocks = std::max(max_blocks, static_cast<int32_t>(item.seq->block_table.size()));
  }
  in.max_blocks_per_seq = max_blocks;
  const int32_t bs = runner_.block_size();
  std::vector<const Sequence*> sampled;
  for (const BatchItem& item : batch.items) {
    if (item.padding) continue;  // a padded row of static batching computes nothing real here
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
                                    ? seq.block_table[static_cast<size_t>(b)] : 0);
    }
    const bool emits = item.context_tokens + item.new_tokens >= seq.num_tokens();
    in.sample.push_back(emits ? 1 : 0);
    if (emits) sampled.push_back(&seq);
  }
  const Time predicted = std::max<Time>(from_seconds(predictor_.price(batch).total()), 1);
  if (in.input_ids.empty()) return {predicted, predicted};  // only padding rows

  const auto start = std::chrono::steady_clock::now();
  const CpuModelRunner::Output out = runner_.forward(in);
  const auto end = std::chrono::steady_clock::now();
  for (size_t i = 0; i < sampled.size(); ++i) {
    generated_[sampled[i]->index].push_back(out.next_tokens[i]);
  }
  const Time measured = std::max<Time>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(), 1);
  return {measured, predicted};
}

Result<std::unique_ptr<Backend>> make_cpu_backend(const BackendSetup& setup) {
  Result<std::string> hw_path = resolve_preset(
      setup.hardware.empty() ? kDefaultCpuHardware : setup.hardware, PresetKind::kHardware, "--hardware");
  if (!hw_path.ok()) return hw_path.error();
  Result<HardwareSpec> hw = load_hardware(hw_path.value());
  if (!hw.ok()) return hw.error();
  Result<std::string> model_path = resolve_preset(
      setup.model.empty() ? kDefaultCpuModel : setup.model, PresetKind::kModel, "--model");
  if (!model_path.ok()) return model_path.error();
  Result<ModelSpec> model = load_model(model_path.value());
  if (!model.ok()) return model.error();
  if (setup.tp != 1) return Error{"--tp: the cpu backend runs on one host (tp 1)"};

  auto weights = std::make_unique<ModelWeights>();
  if (!setup.weights.empty()) {
    Result<ModelWeights> w = load_safetensors(setup.weights, model.value());
    if (!w.ok()) return w.error();
    *weights = std::move(w.value());
  } else {
    *weights = random_weights(model.value(), setup.seed);
  }
  MemoryOptions mo;
  mo.weights = mo.kv = DType::kFp32;
  mo.gpu_memory_utilization = setup.gpu_memory_utilization;
  mo.block_size = setup.block_size;
  mo.max_num_seqs = setup.max_num_seqs;
  mo.max_num_batched_tokens = setup.max_num_batched_tokens;
  Result<MemoryPlan> memory = plan_memory(hw.value(), model.value(), mo);
  if (!memory.ok()) return memory.error();
  // The engine allocates its cache for real: at most 256 MiB, plenty for a tiny model.
  const auto cap = static_cast<int64_t>((1 << 28) / memory.value().block_bytes);
  const auto blocks = static_cast<int32_t>(std::min(memory.value().num_blocks, cap));
  if (setup.kv_blocks > 0 && setup.kv_blocks > blocks) {
    return Error{"kv.blocks " + std::to_string(setup.kv_blocks) + " is more than the cpu engine's cache of " +
                 std::to_string(blocks) + " blocks"};
  }
  RooflineOptions ro;
  ro.weights = ro.kv = ro.activations = DType::kFp32;
  const int32_t num_blocks = setup.kv_blocks > 0 ? static_cast<int32_t>(setup.kv_blocks) : blocks;
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(
      RooflineModel(std::move(hw.value()), std::move(model.value()), ro), std::move(weights),
      num_blocks, setup.block_size));
}

}  // namespace servesim
