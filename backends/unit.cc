#include "backends/unit.h"

#include <cassert>

namespace servesim {

IterationResult UnitBackend::run(const Batch& batch) {
  assert(!batch.empty());
  (void)batch;
  return {kNsPerSecond, -1};
}

int64_t UnitBackend::kv_blocks(int32_t /*block_size*/) const { return -1; }

}  // namespace servesim
