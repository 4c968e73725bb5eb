#include "backends/probe.h"

#include <gtest/gtest.h>

#include "test_util.h"

#include "backends/hardware.h"

namespace servesim {
namespace {

TEST(Probe, WritesAHardwareFileThatLoads) {
  ProbeResult r;
  r.gemm_flops = 12.5e9;
  r.memory_bandwidth = 30e9;
  r.memory_bytes = 16.0 * (1 << 30);
  const std::string path = servesim::testing::temp_path("probe_test_host.toml");
  OutputFile file("--out", path);
  ASSERT_TRUE(write_probe(r, file).ok());
  Result<HardwareSpec> hw = load_hardware(path);
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  EXPECT_NEAR(hw.value().fp32_flops, 12.5e9, 1e6);
  EXPECT_NEAR(hw.value().memory_bandwidth, 30e9, 1e6);
  EXPECT_NEAR(hw.value().memory_bytes, 16.0 * (1 << 30), 1e6);
  EXPECT_FALSE(hw.value().bf16);
  OutputFile nowhere("--out", "/nonexistent-dir/x.toml");
  EXPECT_FALSE(write_probe(r, nowhere).ok());
}

}  // namespace
}  // namespace servesim
