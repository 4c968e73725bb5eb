#include "backends/probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu_ops.h"

namespace servesim {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double host_meminfo_bytes(const char* field) {
  std::ifstream in("/proc/meminfo");
  const std::string wanted = std::string(field) + ":";
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == wanted) {
      in >> kib;
      break;
    }
    in.ignore(1 << 10, '\n');
  }
  return kib * 1024;
}

ProbeResult probe_host() {
  ProbeResult r;
  // The engine's own product: y[M, N] = x[M, K] W[N, K]^T, best of three.
  const int64_t m = 512, k = 1024, n = 1024;
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), w(static_cast<size_t>(n * k), 0.25f),
      y(static_cast<size_t>(m * n));
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    cpu::linear(x, w, {}, k, n, y);
    best = std::min(best, seconds_since(start));
  }
  r.gemm_flops = 2.0 * static_cast<double>(m * k * n) / best;
  // A large copy: 256 MiB read and 256 MiB written, best of three.
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, seconds_since(start));
    a[static_cast<size_t>(rep)] = b[static_cast<size_t>(rep) + 1];  // keep the copies observable
  }
  r.memory_bandwidth = 2.0 * static_cast<double>(bytes) / best;
  r.memory_bytes = host_meminfo_bytes("MemTotal");
  return r;
}

Status write_probe(const ProbeResult& r, OutputFile& file) {
  std::ostringstream out;
  const double tflops = r.gemm_flops / 1e12;
  out << "# This host, measured by `sim probe`: the cpu engine's float32 matrix product and a 256 MiB\n"
         "# memory copy. The rates are achieved, not peak, so the efficiencies start at 1; fit them\n"
         "# to a measured run with `sim calibrate`.\n"
      << "name = \"host (sim probe)\"\n"
      << "memory_gib = " << r.memory_bytes / (1 << 30) << "              # MemTotal of /proc/meminfo\n"
      << "memory_bandwidth_gbs = " << r.memory_bandwidth / 1e9 << "   # measured: memcpy of 256 MiB (read + write)\n"
      << "fp16_tflops = " << tflops << "      # measured: the engine's float32 linear(), 512 x 1024 x 1024\n"
      << "fp8_tflops = 0\n"
      << "fp32_tflops = " << tflops << "      # the same measurement\n"
      << "bf16 = false                     # the cpu engine computes in float32\n"
      << "interconnect_gbs = 10            # unused: tp 1\n"
      << "interconnect_latency_us = 0\n"
      << "gemm_efficiency = 1.0            # the measured rate is already an achieved one\n"
      << "memory_efficiency = 1.0\n"
      << "attention_efficiency = 0.5       # attention loops are slower than the product; calibrate\n"
      << "overhead_us = 20                 # per-iteration bookkeeping; calibrate\n"
      << "gemm_half_rows = 0\n";
  return file.write(out.str());
}

}  // namespace servesim
