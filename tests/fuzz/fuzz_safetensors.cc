// Fuzz target: the safetensors reader (header length, JSON header, offsets) and reading tensors.
#include "kernels/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servesim;
  Result<SafetensorsFile> f = SafetensorsFile::open(fuzz::scratch_file(data, size, "w.safetensors"));
  if (!f.ok()) return 0;
  int read = 0;
  for (const auto& [name, entry] : f.value().header().tensors) {
    if (++read > 8) break;
    (void)f.value().read_f32(name);
  }
  return 0;
}
