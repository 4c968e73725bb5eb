#include "backends/hardware.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#ifndef SERVESIM_PROJECT_DIR
#define SERVESIM_PROJECT_DIR "."  // when built outside CMake, from the repository root
#endif

namespace servesim {
namespace {

const std::string kHardwareDir = SERVESIM_PROJECT_DIR "/data/hardware/";

HardwareSpec load_ok(const std::string& file) {
  auto hw = load_hardware(kHardwareDir + file);
  EXPECT_TRUE(hw.ok()) << hw.error().message;
  return hw.ok() ? std::move(hw).value() : HardwareSpec{};
}

// Writes `text` to hw.toml in a fresh folder of the running test; returns its path.
std::string write_temp(std::string_view text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("servesim_hw_" + std::string(info->name()) + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "hw.toml";
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// The required keys, valid; a test appends or replaces lines.
constexpr std::string_view kMinimal =
    "name = \"Test GPU\"\n"
    "memory_gib = 16\n"
    "memory_bandwidth_gbs = 1000\n"
    "fp16_tflops = 100\n"
    "fp32_tflops = 10\n"
    "interconnect_gbs = 64\n";

std::string load_error(std::string_view text, std::string* path_out = nullptr) {
  const std::string path = write_temp(text);
  if (path_out) *path_out = path;
  auto hw = load_hardware(path);
  EXPECT_FALSE(hw.ok()) << text;
  return hw.ok() ? std::string() : hw.error().message;
}

TEST(Hardware, EveryShippedGpuFileLoads) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kHardwareDir)) {
    // cpu-host.toml describes the host for the cpu engine: no tensor cores, no interconnect.
    if (entry.path().extension() == ".toml" && entry.path().filename() != "cpu-host.toml") {
      files.push_back(entry.path().filename().string());
    }
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files.size(), 19u);  // seventeen GPUs, and two of them calibrated on Vidur's profiles
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const HardwareSpec hw = load_ok(file);
    EXPECT_FALSE(hw.name.empty());
    EXPECT_EQ(hw.path, kHardwareDir + file);
    EXPECT_GT(hw.memory_bytes, 0);
    EXPECT_GT(hw.interconnect_bandwidth, 0);
    EXPECT_GT(hw.interconnect_latency, 0);  // every shipped file states one
    EXPECT_GT(hw.overhead, 0);
    // Dense FP8 is twice dense FP16 where the GPU has it, and dense INT8 the same as FP8 or below it
    // (Blackwell Ultra cut INT8): a sparse figure left unhalved shows here. The L40S datasheet prints
    // 362.05 FP16 against 733 FP8 (2.02).
    if (hw.fp8_flops > 0) {
      EXPECT_NEAR(hw.fp8_flops / hw.fp16_flops, 2.0, 0.03);
    }
    if (hw.fp4_flops > 0) {
      EXPECT_GT(hw.fp4_flops, hw.fp8_flops);
      EXPECT_LE(hw.fp4_flops, 3.0 * hw.fp8_flops);
    }
    if (hw.int8_ops > 0) {
      // (1 % over: the L4 file keeps FP8 at 242 against the datasheet's 242.5 INT8.)
      EXPECT_LE(hw.int8_ops, 1.01 * (hw.fp8_flops > 0 ? hw.fp8_flops : 2.0 * hw.fp16_flops));
    }
    for (const double e : {hw.fp8_gemm_efficiency, hw.fp4_gemm_efficiency, hw.int8_gemm_efficiency}) {
      EXPECT_TRUE(e == 0 || (e >= 1e-3 && e <= 1.0)) << e;
    }
    EXPECT_GT(hw.fp16_flops, hw.fp32_flops);
  }
  EXPECT_FALSE(load_ok("cpu-host.toml").name.empty());
}

// The calibrated files (x-vidur.toml) are their GPU's file with only the fitted efficiencies
// changed: every datasheet figure, the overhead and the price stay the base file's.
TEST(Hardware, CalibratedFilesChangeOnlyTheirEfficiencies) {
  for (const auto& [calibrated, base] : {std::pair<std::string, std::string>{"a100-80gb-vidur.toml", "a100-80gb.toml"},
                                         {"h100-sxm-vidur.toml", "h100-sxm.toml"}}) {
    SCOPED_TRACE(calibrated);
    const HardwareSpec c = load_ok(calibrated), b = load_ok(base);
    EXPECT_EQ(c.memory_bytes, b.memory_bytes);
    EXPECT_EQ(c.memory_bandwidth, b.memory_bandwidth);
    EXPECT_EQ(c.fp16_flops, b.fp16_flops);
    EXPECT_EQ(c.fp8_flops, b.fp8_flops);
    EXPECT_EQ(c.interconnect_bandwidth, b.interconnect_bandwidth);
    EXPECT_EQ(c.interconnect_latency, b.interconnect_latency);
    EXPECT_EQ(c.overhead, b.overhead);  // the profiles do not cover it
    EXPECT_EQ(c.price_per_hour_usd, b.price_per_hour_usd);
    EXPECT_NE(c.gemm_efficiency, b.gemm_efficiency);
  }
  // Vidur's A100 decodes read the KV cache at about 98 % of peak bandwidth once the fixed cost per
  // sequence is apart (docs/guide.md); the chunk's own tokens attend at about half the rate of the cache's.
  const HardwareSpec a100 = load_ok("a100-80gb-vidur.toml");
  EXPECT_NEAR(a100.attention_efficiency, 0.9839, 1e-9);
  EXPECT_NEAR(a100.attention_sequence_overhead, 1.209e-6, 1e-15);
  EXPECT_LT(a100.prefill_self_attention_efficiency, a100.prefill_attention_efficiency);
  EXPECT_EQ(a100.gemm_tile_rows, 128);
  // The H100 profiles time no attention: its attention keys are h100-sxm.toml's.
  EXPECT_EQ(load_ok("h100-sxm-vidur.toml").attention_efficiency, load_ok("h100-sxm.toml").attention_efficiency);
}

TEST(Hardware, A100RidgePointAndUnits) {
  const HardwareSpec hw = load_ok("a100-80gb.toml");
  EXPECT_EQ(hw.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(hw.memory_bytes, 80.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(hw.memory_bandwidth, 2039e9);
  EXPECT_DOUBLE_EQ(hw.fp16_flops, 312e12);
  EXPECT_DOUBLE_EQ(hw.fp8_flops, 0);
  EXPECT_DOUBLE_EQ(hw.fp32_flops, 19.5e12);
  EXPECT_DOUBLE_EQ(hw.interconnect_bandwidth, 600e9);
  EXPECT_DOUBLE_EQ(hw.interconnect_latency, 5e-6);
  EXPECT_DOUBLE_EQ(hw.overhead, 100e-6);
  EXPECT_TRUE(hw.bf16);
  EXPECT_NEAR(hw.ridge_point(), 153.0, 0.5);  // REFERENCE.md: 153 (156 with 2 TB/s)
}

TEST(Hardware, RidgePoints) {
  // REFERENCE.md, "Ridge points": dense FP16 over bandwidth.
  EXPECT_NEAR(load_ok("h100-sxm.toml").ridge_point(), 295.0, 1.0);
  EXPECT_NEAR(load_ok("t4.toml").ridge_point(), 203.0, 1.0);
  EXPECT_NEAR(load_ok("l4.toml").ridge_point(), 403.0, 1.0);
  EXPECT_NEAR(load_ok("h200.toml").ridge_point(), 206.0, 1.0);
}

TEST(Hardware, T4HasNoBf16) {
  EXPECT_FALSE(load_ok("t4.toml").bf16);
  EXPECT_TRUE(load_ok("l4.toml").bf16);
}

TEST(Hardware, DefaultsWhenOptionalKeysAbsent) {
  auto hw = load_hardware(write_temp(kMinimal));
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  const HardwareSpec defaults;
  EXPECT_DOUBLE_EQ(hw.value().fp8_flops, 0);
  EXPECT_TRUE(hw.value().bf16);
  EXPECT_DOUBLE_EQ(hw.value().interconnect_latency, 0);
  EXPECT_DOUBLE_EQ(hw.value().gemm_efficiency, defaults.gemm_efficiency);
  EXPECT_DOUBLE_EQ(hw.value().memory_efficiency, defaults.memory_efficiency);
  EXPECT_DOUBLE_EQ(hw.value().attention_efficiency, defaults.attention_efficiency);
  EXPECT_DOUBLE_EQ(hw.value().overhead, 0);
  EXPECT_DOUBLE_EQ(hw.value().memory_bytes, 16.0 * 1073741824.0);
}

TEST(Hardware, PrefillAttentionEfficiencyIsZeroUnlessGiven) {
  EXPECT_EQ(load_ok("a100-80gb.toml").prefill_attention_efficiency, 0);
  auto hw = load_hardware(write_temp(std::string(kMinimal) + "prefill_attention_efficiency = 0.25\n"));
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  EXPECT_DOUBLE_EQ(hw.value().prefill_attention_efficiency, 0.25);
  EXPECT_TRUE(load_hardware(write_temp(std::string(kMinimal) + "prefill_attention_efficiency = 0\n")).ok());
  // Between 0 ("as attention_efficiency") and 0.001 it would mean a kernel 1,000 times too slow.
  std::string path;
  std::string msg = load_error(std::string(kMinimal) + "prefill_attention_efficiency = 1e-6\n", &path);
  EXPECT_NE(msg.find("prefill_attention_efficiency: expected 0 (as attention_efficiency) or a number"),
            std::string::npos) << msg;
  msg = load_error(std::string(kMinimal) + "prefill_attention_efficiency = 1.5\n");
  EXPECT_NE(msg.find("prefill_attention_efficiency: expected"), std::string::npos) << msg;
}

TEST(Hardware, CalibrationTermsAreOffUnlessGiven) {
  for (const char* file : {"a100-80gb.toml", "h100-sxm.toml", "t4.toml"}) {
    const HardwareSpec hw = load_ok(file);
    EXPECT_EQ(hw.gemm_tile_rows, 0) << file;
    EXPECT_EQ(hw.attention_sequence_overhead, 0) << file;
    EXPECT_EQ(hw.prefill_self_attention_efficiency, 0) << file;
  }
  auto hw = load_hardware(write_temp(std::string(kMinimal) +
                                     "gemm_tile_rows = 128\nattention_sequence_us = 1.5\n"
                                     "prefill_self_attention_efficiency = 0.15\n"));
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  EXPECT_EQ(hw.value().gemm_tile_rows, 128);
  EXPECT_DOUBLE_EQ(hw.value().attention_sequence_overhead, 1.5e-6);
  EXPECT_DOUBLE_EQ(hw.value().prefill_self_attention_efficiency, 0.15);
  std::string msg = load_error(std::string(kMinimal) + "prefill_self_attention_efficiency = 1e-6\n");
  EXPECT_NE(msg.find("prefill_self_attention_efficiency: expected 0 (as prefill_attention_efficiency)"),
            std::string::npos) << msg;
  msg = load_error(std::string(kMinimal) + "attention_sequence_us = -1\n");
  EXPECT_NE(msg.find("attention_sequence_us"), std::string::npos) << msg;
  msg = load_error(std::string(kMinimal) + "gemm_tile_rows = 1e9\n");
  EXPECT_NE(msg.find("gemm_tile_rows"), std::string::npos) << msg;
}

TEST(Hardware, IntegerAndFloatValuesBothAccepted) {
  auto hw = load_hardware(write_temp(std::string(kMinimal) + "gemm_efficiency = 1\noverhead_us = 0\n"));
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  EXPECT_DOUBLE_EQ(hw.value().gemm_efficiency, 1.0);
}

TEST(Hardware, PresetPrices) {
  // data/hardware/README.md, "Prices": AWS on-demand per GPU, 2026-01-21.
  EXPECT_DOUBLE_EQ(load_ok("h100-sxm.toml").price_per_hour_usd, 6.88);  // p5.48xlarge / 8
  EXPECT_DOUBLE_EQ(load_ok("t4.toml").price_per_hour_usd, 0.526);       // g4dn.xlarge
  for (const char* file :
       {"t4.toml", "l4.toml", "a10g.toml", "a100-40gb.toml", "a100-80gb.toml", "h100-sxm.toml",
        "h100-pcie.toml", "h200.toml", "b200.toml", "mi300x.toml"}) {
    SCOPED_TRACE(file);
    EXPECT_GT(load_ok(file).price_per_hour_usd, 0);
  }
  EXPECT_DOUBLE_EQ(load_ok("cpu-host.toml").price_per_hour_usd, 0);  // no price: no cost metrics
}

TEST(Hardware, PriceAbsentIsZero) {
  auto hw = load_hardware(write_temp(kMinimal));
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  EXPECT_DOUBLE_EQ(hw.value().price_per_hour_usd, 0);
}

TEST(Hardware, PriceZeroAndIntegerAccepted) {
  auto zero = load_hardware(write_temp(std::string(kMinimal) + "price_per_hour_usd = 0\n"));
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  EXPECT_DOUBLE_EQ(zero.value().price_per_hour_usd, 0);
  auto two = load_hardware(write_temp(std::string(kMinimal) + "price_per_hour_usd = 2\n"));
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_DOUBLE_EQ(two.value().price_per_hour_usd, 2.0);
}

TEST(Hardware, NegativePriceNamesFileLineAndKey) {
  std::string path;
  const std::string msg = load_error(std::string(kMinimal) + "price_per_hour_usd = -1.5\n", &path);
  EXPECT_EQ(msg.rfind(path + ":7:", 0), 0u) << msg;
  EXPECT_NE(msg.find("price_per_hour_usd: expected"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got -1.5"), std::string::npos) << msg;
}

TEST(Hardware, PriceAboveBoundOrNotANumber) {
  EXPECT_NE(load_error(std::string(kMinimal) + "price_per_hour_usd = 2e6\n")
                .find("price_per_hour_usd: expected"),
            std::string::npos);
  std::string path;
  const std::string msg =
      load_error(std::string(kMinimal) + "price_per_hour_usd = \"$2\"\n", &path);
  EXPECT_EQ(msg.rfind(path + ":7:", 0), 0u) << msg;
  EXPECT_NE(msg.find("price_per_hour_usd: expected"), std::string::npos) << msg;
}

TEST(Hardware, MissingFile) {
  const std::string path = kHardwareDir + "no-such-gpu.toml";
  auto hw = load_hardware(path);
  ASSERT_FALSE(hw.ok());
  EXPECT_EQ(hw.error().message, path + ": cannot open file (no such file)");
}

TEST(Hardware, MalformedTomlNamesFileAndLine) {
  std::string path;
  const std::string msg = load_error("name = \"x\"\nmemory_gib = = 3\n", &path);
  EXPECT_EQ(msg.rfind(path + ":2:", 0), 0u) << msg;
  EXPECT_NE(msg.find("malformed TOML"), std::string::npos) << msg;
}

TEST(Hardware, MissingRequiredKey) {
  std::string text(kMinimal);
  text.erase(text.find("fp16_tflops"), std::string_view("fp16_tflops = 100\n").size());
  std::string path;
  const std::string msg = load_error(text, &path);
  EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
  EXPECT_NE(msg.find("missing required key 'fp16_tflops'"), std::string::npos) << msg;
}

TEST(Hardware, InterconnectIsRequired) {
  std::string text(kMinimal);
  text.erase(text.find("interconnect_gbs"));
  EXPECT_NE(load_error(text).find("'interconnect_gbs'"), std::string::npos);
}

TEST(Hardware, NegativeValue) {
  std::string path;
  const std::string msg = load_error(std::string(kMinimal) + "overhead_us = -5\n", &path);
  EXPECT_EQ(msg.rfind(path + ":7:", 0), 0u) << msg;
  EXPECT_NE(msg.find("overhead_us: expected"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got -5"), std::string::npos) << msg;
}

// The per-type peaks: B200 has FP4 above FP8 above FP16, the A100 none of FP8 or FP4 but INT8; a
// file without the keys has none, and its per-type GEMM efficiencies fall back to gemm_efficiency (0).
TEST(Hardware, PerTypePeaks) {
  const HardwareSpec b200 = load_ok("b200.toml");
  EXPECT_GT(b200.fp4_flops, b200.fp8_flops);
  EXPECT_GT(b200.fp8_flops, b200.fp16_flops);
  EXPECT_DOUBLE_EQ(b200.fp4_flops, 9000e12);
  EXPECT_DOUBLE_EQ(b200.int8_ops, 4500e12);
  const HardwareSpec a100 = load_ok("a100-80gb.toml");
  EXPECT_DOUBLE_EQ(a100.fp8_flops, 0);
  EXPECT_DOUBLE_EQ(a100.fp4_flops, 0);
  EXPECT_DOUBLE_EQ(a100.int8_ops, 624e12);
  EXPECT_DOUBLE_EQ(a100.fp8_gemm_efficiency, 0);
  const HardwareSpec h100 = load_ok("h100-sxm.toml");
  EXPECT_DOUBLE_EQ(h100.fp8_gemm_efficiency, 0.6);
  EXPECT_DOUBLE_EQ(h100.fp4_flops, 0);  // Hopper: no FP4
  EXPECT_GT(load_ok("mi355x.toml").fp4_flops, load_ok("mi355x.toml").fp8_flops);
  const HardwareSpec minimal = load_hardware(write_temp(kMinimal)).value();
  EXPECT_DOUBLE_EQ(minimal.fp4_flops, 0);
  EXPECT_DOUBLE_EQ(minimal.int8_ops, 0);
  EXPECT_DOUBLE_EQ(minimal.fp8_gemm_efficiency, 0);
  EXPECT_DOUBLE_EQ(minimal.fp4_gemm_efficiency, 0);
  EXPECT_DOUBLE_EQ(minimal.int8_gemm_efficiency, 0);
}

TEST(Hardware, PerTypeKeysParse) {
  const auto hw = load_hardware(write_temp(std::string(kMinimal) +
                                           "fp4_tflops = 400\nint8_tops = 200\nfp8_gemm_efficiency = 0.55\n"
                                           "fp4_gemm_efficiency = 0.5\nint8_gemm_efficiency = 0.65\n"));
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  EXPECT_DOUBLE_EQ(hw.value().fp4_flops, 400e12);
  EXPECT_DOUBLE_EQ(hw.value().int8_ops, 200e12);
  EXPECT_DOUBLE_EQ(hw.value().fp8_gemm_efficiency, 0.55);
  EXPECT_DOUBLE_EQ(hw.value().fp4_gemm_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(hw.value().int8_gemm_efficiency, 0.65);
  // set_hardware_number and hardware_key_bounds know them, in the file's units.
  HardwareSpec spec = hw.value();
  ASSERT_TRUE(set_hardware_number(spec, "int8_tops", 300).ok());
  EXPECT_DOUBLE_EQ(spec.int8_ops, 300e12);
  ASSERT_TRUE(set_hardware_number(spec, "fp8_gemm_efficiency", 0.4).ok());
  EXPECT_DOUBLE_EQ(spec.fp8_gemm_efficiency, 0.4);
  EXPECT_FALSE(set_hardware_number(spec, "fp4_gemm_efficiency", 1.5).ok());
  const auto bounds = hardware_key_bounds("fp4_tflops");
  ASSERT_TRUE(bounds.ok());
  EXPECT_DOUBLE_EQ(bounds.value().min, 0);
  EXPECT_DOUBLE_EQ(bounds.value().max, 1e18);
}

TEST(Hardware, PerTypeKeysRefuseBadValues) {
  // Each bad value names the file, the line (7: the first after kMinimal's six) and the key.
  for (const std::string_view key : {"fp4_tflops", "int8_tops", "fp8_gemm_efficiency", "fp4_gemm_efficiency",
                                     "int8_gemm_efficiency"}) {
    for (const std::string_view value : {"-1", "\"fast\"", "true"}) {
      SCOPED_TRACE(std::string(key) + " = " + std::string(value));
      std::string path;
      const std::string msg = load_error(std::string(kMinimal) + std::string(key) + " = " + std::string(value) + "\n", &path);
      EXPECT_EQ(msg.rfind(path + ":7:", 0), 0u) << msg;
      EXPECT_NE(msg.find(std::string(key) + ": expected"), std::string::npos) << msg;
    }
  }
  for (const std::string_view key : {"fp8_gemm_efficiency", "fp4_gemm_efficiency", "int8_gemm_efficiency"}) {
    SCOPED_TRACE(key);
    const std::string above = load_error(std::string(kMinimal) + std::string(key) + " = 1.2\n");
    EXPECT_NE(above.find(std::string(key) + ": expected"), std::string::npos) << above;
    EXPECT_NE(above.find("got 1.2"), std::string::npos) << above;
    // Between 0 (as gemm_efficiency) and the efficiencies' floor, a value means nothing.
    const std::string tiny = load_error(std::string(kMinimal) + std::string(key) + " = 0.0001\n");
    EXPECT_NE(tiny.find(std::string(key) + ": expected 0 (as gemm_efficiency)"), std::string::npos) << tiny;
  }
  EXPECT_NE(load_error(std::string(kMinimal) + "int8_tops = 2e6\n").find("int8_tops: expected"), std::string::npos);
}

TEST(Hardware, ZeroRequiredValue) {
  std::string text(kMinimal);
  text.replace(text.find("memory_gib = 16"), 15, "memory_gib = 0");
  std::string path;
  const std::string msg = load_error(text, &path);
  EXPECT_EQ(msg.rfind(path + ":2:", 0), 0u) << msg;
  EXPECT_NE(msg.find("memory_gib: expected"), std::string::npos) << msg;
}

TEST(Hardware, EfficiencyAboveOne) {
  std::string path;
  const std::string msg = load_error(std::string(kMinimal) + "memory_efficiency = 1.2\n", &path);
  EXPECT_EQ(msg.rfind(path + ":7:", 0), 0u) << msg;
  EXPECT_NE(msg.find("memory_efficiency: expected"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got 1.2"), std::string::npos) << msg;
}

TEST(Hardware, WrongType) {
  EXPECT_NE(load_error(std::string(kMinimal) + "bf16 = \"yes\"\n").find("bf16: expected true or false"),
            std::string::npos);
  EXPECT_NE(load_error(std::string(kMinimal) + "fp8_tflops = \"none\"\n").find("fp8_tflops: expected"),
            std::string::npos);
}

TEST(Hardware, UnknownKeyListsKnownOnes) {
  std::string path;
  const std::string msg = load_error(std::string(kMinimal) + "memory_gb = 80\n", &path);
  EXPECT_EQ(msg.rfind(path + ":7:", 0), 0u) << msg;
  EXPECT_NE(msg.find("memory_gb: unknown key"), std::string::npos) << msg;
  EXPECT_NE(msg.find("memory_gib"), std::string::npos) << msg;
  EXPECT_NE(msg.find("overhead_us"), std::string::npos) << msg;
}

}  // namespace
}  // namespace servesim
