// The unit backend: every iteration takes exactly one time unit (1 "second", reported as a step) and
// KV memory is unlimited unless the run sets kv.blocks. For teaching, for the seeds' examples, and
// for testing policies independently of any hardware.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace servesim {

class UnitBackend final : public Backend {
 public:
  IterationResult run(const Batch& batch) override;
  bool prices_decode_groups() const override { return true; }  // every iteration costs one step
  int64_t kv_blocks(int32_t block_size) const override;
  std::string_view name() const override { return "unit"; }
  bool counts_steps() const override { return true; }
};

}  // namespace servesim
