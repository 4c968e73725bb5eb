// A backend prices one iteration: given the batch a policy formed, how long does the forward pass
// take? Cost models (unit, roofline) compute it; real engines (cpu, cuda) execute the batch and
// measure it, with a cost model's prediction beside the measurement. A backend never sees the queue.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/batch.h"
#include "sim/time.h"

namespace servesim {

struct IterationResult {
  Time duration = 0;    // what advances the simulated clock; > 0
  Time predicted = -1;  // a cost model's prediction beside a measured duration, or -1
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Prices (or runs) one iteration. REQUIRES: !batch.empty().
  virtual IterationResult run(const Batch& batch) = 0;

  // KV blocks of `block_size` tokens this backend's device holds, or -1 for unlimited.
  virtual int64_t kv_blocks(int32_t block_size) const = 0;

  virtual std::string_view name() const = 0;
  // Simulated time unit for reports: true when one iteration is one unit ("steps"), not seconds.
  virtual bool counts_steps() const { return false; }
};

}  // namespace servesim
