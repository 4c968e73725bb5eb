// `sim probe`: measures this machine for the cpu engine's cost model — the FLOP/s that the engine's
// own float32 matrix product achieves, and the memory bandwidth of a large copy — and writes a
// hardware file in the format of data/hardware/*.toml, so that the validate-and-calibrate loop runs
// without a GPU. Measurement takes a few seconds.
#pragma once

#include <ostream>
#include <string>

#include "sim/io/output_file.h"
#include "sim/result.h"

namespace servesim {

struct ProbeResult {
  double gemm_flops = 0;        // FLOP/s of the engine's linear() on a 512 x 1024 x 1024 product
  double memory_bandwidth = 0;  // bytes/s moved (read + written) copying 256 MiB
  double memory_bytes = 0;      // total host memory (MemTotal)
};

ProbeResult probe_host();

// A field of this host's /proc/meminfo in bytes ("MemTotal", "MemAvailable"), or 0 when it cannot
// be read.
double host_meminfo_bytes(const char* field);

// Writes the result as a hardware TOML to `file` (sim/io/output_file.h: checked, whole or not at all);
// its errors.
Status write_probe(const ProbeResult& result, OutputFile& file);

}  // namespace servesim
