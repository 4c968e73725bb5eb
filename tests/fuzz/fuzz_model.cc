// Fuzz target: the config.json reader, then everything derived from a model: tensor-parallel
// checks, the KV memory plan and a roofline price, none of which may overflow or trap.
#include <cmath>

#include "backends/hardware.h"
#include "backends/kv_memory.h"
#include "backends/model.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servesim;
  Result<ModelSpec> m = load_model(fuzz::scratch_file(data, size, "config.json"));
  if (!m.ok()) return 0;
  const ModelSpec& model = m.value();
  fuzz::require(model.max_position_embeddings >= 1 && model.max_position_embeddings <= kMaxTokens);
  fuzz::require(std::isfinite(model.num_params()) && std::isfinite(model.kv_bytes_per_token(DType::kBf16)));
  for (int64_t tp : {1, 2, 3, 8}) (void)check_tensor_parallel(model, tp);
  HardwareSpec hw;
  hw.name = "fuzz";
  hw.memory_bytes = 80.0 * (1 << 30);
  hw.memory_bandwidth = 2e12;
  hw.fp16_flops = 3e14;
  hw.fp32_flops = 2e13;
  hw.interconnect_bandwidth = 3e11;
  Result<MemoryPlan> plan = plan_memory(hw, model, MemoryOptions{});
  if (plan.ok()) fuzz::require(plan.value().num_blocks >= 1 && plan.value().num_blocks <= kMaxKvBlocks);
  return 0;
}
