#include "backends/cpu_backend.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <string>
#include <utility>

#include "backends/kv_memory.h"
#include "backends/probe.h"
#include "backends/specs.h"

namespace servesim {

CpuBackend::CpuBackend(RooflineModel predictor, std::unique_ptr<ModelWeights> weights,
                       int32_t num_blocks, int32_t block_size)
    : predictor_(std::move(predictor)),
      weights_(std::move(weights)),
      runner_(predictor_.model(), *weights_, num_blocks, block_size),
      batch_(predictor_.model().vocab_size, block_size) {}

int64_t CpuBackend::kv_blocks(int32_t /*block_size*/) const { return runner_.num_blocks(); }

IterationResult CpuBackend::run(const Batch& batch) {
  const Time predicted = priced_duration(predictor_.price(batch).total());
  if (!batch_.build(batch)) return {predicted, predicted};  // only padding rows
  const auto start = std::chrono::steady_clock::now();
  const CpuModelRunner::Output out = runner_.forward(batch_.input());
  const auto end = std::chrono::steady_clock::now();
  batch_.record(out.next_tokens);
  const Time measured = std::max<Time>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(), 1);
  return {measured, predicted};
}

Result<std::unique_ptr<Backend>> make_cpu_backend(const BackendSetup& setup) {
  if (setup.tp != 1) return Error{"--tp: the cpu backend runs on one host (tp 1)"};
  Result<Specs> specs = load_specs(setup, kDefaultCpuHardware, kDefaultCpuModel);
  if (!specs.ok()) return specs.error();
  if (Status s = check_engine_model(specs.value().model, "cpu"); !s.ok()) return s.error();
  // Everything is sized before anything is allocated: the plan, then this host's free memory.
  Result<MemoryPlan> memory = plan_memory(specs.value().hardware, specs.value().model,
                                          memory_options(setup, DType::kFp32, DType::kFp32));
  if (!memory.ok()) return memory.error();
  // The engine allocates its cache for real: at most 256 MiB, plenty for a tiny model.
  const auto cap = static_cast<int64_t>((1 << 28) / memory.value().block_bytes);
  const auto blocks = static_cast<int32_t>(std::min(memory.value().num_blocks, cap));
  const double need = specs.value().model.weight_bytes(DType::kFp32) +
                      static_cast<double>(blocks) * memory.value().block_bytes;
  const double available = host_meminfo_bytes("MemAvailable");
  if (available > 0 && need > available) {
    return Error{"the cpu engine needs " + std::to_string(static_cast<long long>(need)) +
                 " bytes for " + specs.value().model.name +
                 "'s fp32 weights and KV cache, and this host has " +
                 std::to_string(static_cast<long long>(available)) +
                 " bytes available; use a smaller --model (the cpu engine is for tiny models, "
                 "e.g. --model tiny)"};
  }
  Result<ModelWeights> weights = load_weights(setup, specs.value().model);
  if (!weights.ok()) return weights.error();
  if (setup.kv_blocks > 0 && setup.kv_blocks > blocks) {
    return Error{"kv.blocks " + std::to_string(setup.kv_blocks) +
                 " is more than the cpu engine's cache of " + std::to_string(blocks) + " blocks"};
  }
  RooflineOptions ro;
  ro.weights = ro.kv = ro.activations = DType::kFp32;
  const int32_t num_blocks = setup.kv_blocks > 0 ? static_cast<int32_t>(setup.kv_blocks) : blocks;
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(
      RooflineModel(std::move(specs.value().hardware), std::move(specs.value().model), ro),
      std::make_unique<ModelWeights>(std::move(weights.value())), num_blocks, setup.block_size));
}

}  // namespace servesim
