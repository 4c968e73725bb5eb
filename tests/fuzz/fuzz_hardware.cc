// Fuzz target: the hardware TOML reader; an accepted file has every value within its bounds.
#include <cmath>

#include "backends/hardware.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servesim;
  Result<HardwareSpec> hw = load_hardware(fuzz::scratch_file(data, size, "hw.toml"));
  if (!hw.ok()) return 0;
  const HardwareSpec& h = hw.value();
  for (double v : {h.memory_bytes, h.memory_bandwidth, h.fp16_flops, h.fp32_flops,
                   h.interconnect_bandwidth, h.gemm_efficiency, h.memory_efficiency,
                   h.attention_efficiency}) {
    fuzz::require(std::isfinite(v) && v > 0);
  }
  fuzz::require(std::isfinite(h.overhead) && h.overhead >= 0);
  return 0;
}
