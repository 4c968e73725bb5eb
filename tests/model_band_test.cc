// The model-uncertainty band: a hardware file's [calibration] table (backends/hardware.h), the runs
// over its samples and their band (analysis/reports/model_band.h, `sim --model-uncertainty`).
#include "analysis/reports/model_band.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>

#include "backends/hardware.h"
#include "cli_harness.h"

namespace servesim {
namespace {

const std::string kA100 = SERVESIM_PROJECT_DIR "/data/hardware/a100-80gb.toml";

std::string a100_with(const std::string& table) {
  std::ifstream in(kA100);
  return std::string(std::istreambuf_iterator<char>(in), {}) + "\n" + table;
}

using servesim::testing::Cli;
using ModelBandCli = Cli;

TEST_F(ModelBandCli, TheCalibrationTableLoadsAndEachSampleSetsItsKeys) {
  const std::string path = write("hw.toml", a100_with("[calibration]\nkeys = [\"gemm_efficiency\", \"attention_sequence_us\"]\n"
                                                      "samples = [[0.5, 1.5], [0.6, 0]]\n"));
  const Result<HardwareSpec> hw = load_hardware(path);
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  ASSERT_EQ(hw.value().calibration_samples.size(), 2u);
  EXPECT_EQ(hw.value().gemm_efficiency, 0.7);  // the file's own value until a sample is chosen
  const Result<HardwareSpec> s0 = with_calibration_sample(hw.value(), 0);
  ASSERT_TRUE(s0.ok());
  EXPECT_EQ(s0.value().gemm_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(s0.value().attention_sequence_overhead, 1.5e-6);  // the file's unit, microseconds
  EXPECT_EQ(with_calibration_sample(hw.value(), 1).value().gemm_efficiency, 0.6);
  const Result<HardwareSpec> none = with_calibration_sample(hw.value(), 2);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no calibration sample 2 (the file has 2"), std::string::npos) << none.error().message;
}

TEST_F(ModelBandCli, BadCalibrationTablesNameTheKey) {
  const std::pair<std::string, std::string> bad[] = {
      {"[calibration]\nsamples = [[0.5]]\n", "calibration: missing required key 'keys'"},
      {"[calibration]\nkeys = [\"gemm_efficiency\"]\n", "calibration: missing required key 'samples'"},
      {"[calibration]\nkeys = [\"memory_gib\"]\nsamples = [[1]]\n", "expected names of optional number keys"},
      {"[calibration]\nkeys = [\"warp_speed\"]\nsamples = [[1]]\n", "'warp_speed'"},
      {"[calibration]\nkeys = [\"gemm_efficiency\"]\nsamples = [[0.5, 0.6]]\n", "samples[0]: expected a row of 1 numbers"},
      {"[calibration]\nkeys = [\"gemm_efficiency\"]\nsamples = [[0.5], [1.5]]\n", "samples[1][0]: expected a value of gemm_efficiency"},
      {"[calibration]\nkeys = [\"gemm_efficiency\"]\nsamples = [[0.5]]\nextra = 1\n", "unknown key"},
      {"calibration = 3\n", "calibration: expected a table"},
  };
  for (const auto& [table, message] : bad) {
    const Result<HardwareSpec> hw = load_hardware(write("bad.toml", a100_with(table)));
    ASSERT_FALSE(hw.ok()) << table;
    EXPECT_NE(hw.error().message.find(message), std::string::npos) << table << "\n" << hw.error().message;
    EXPECT_NE(hw.error().message.find("bad.toml:"), std::string::npos) << hw.error().message;
  }
}

// Samples equal to the file's values move nothing: a zero-width band at the file's value. Samples
// of a slower GPU move every latency up: the band spans both.
TEST_F(ModelBandCli, TheBandIsTheSpreadOfTheMetricsOverTheSamples) {
  write("same.toml", a100_with("[calibration]\nkeys = [\"memory_efficiency\"]\nsamples = [[0.75], [0.75], [0.75]]\n"));
  const auto same = sim({"--trace", "pareto.toml", "--num-prompts", "100", "--hardware", "same.toml",
                         "--model-uncertainty", "--db", "same.db"});
  ASSERT_EQ(same.status, 0) << same.output;
  EXPECT_NE(same.output.find("Model uncertainty of same.toml"), std::string::npos) << same.output;
  EXPECT_NE(same.output.find("(3 samples)"), std::string::npos) << same.output;
  const auto j = nlohmann::json::parse(sim({"report", "--sweep", "1", "--db", "same.db", "--format", "json"}).output);
  ASSERT_FALSE(j.at("band").empty());
  for (const auto& b : j.at("band")) {
    EXPECT_EQ(b.at("low"), b.at("value")) << b;
    EXPECT_EQ(b.at("high"), b.at("value")) << b;
  }
  EXPECT_EQ(query("SELECT kind FROM sweeps", "same.db"), "model-uncertainty");
  const auto html = sim({"report", "--sweep", "1", "--db", "same.db", "--html", "band.html"});
  ASSERT_EQ(html.status, 0) << html.output;
  std::ifstream page(dir_ / "band.html");
  const std::string text((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Model uncertainty: the band over the hardware file"), std::string::npos);
  EXPECT_EQ(query("SELECT group_concat(hardware_sample) FROM (SELECT hardware_sample FROM sweep_points ORDER BY point)",
                  "same.db"),
            "-1,0,1,2");

  write("slow.toml", a100_with("[calibration]\nkeys = [\"memory_efficiency\"]\nsamples = [[0.75], [0.375]]\n"));
  const auto slow = sim({"--trace", "pareto.toml", "--num-prompts", "100", "--hardware", "slow.toml",
                         "--model-uncertainty", "2", "--db", "slow.db"});
  ASSERT_EQ(slow.status, 0) << slow.output;
  const auto k = nlohmann::json::parse(sim({"report", "--sweep", "1", "--db", "slow.db", "--format", "json"}).output);
  bool seen = false;
  for (const auto& b : k.at("band")) {
    if (b.at("metric") != "tpot_mean") continue;
    seen = true;
    // Half the bandwidth: decode steps (weights-bound) take about twice as long.
    EXPECT_EQ(b.at("samples"), 2);
    EXPECT_NEAR(b.at("low").get<double>(), b.at("value").get<double>(), 0.03 * b.at("value").get<double>());
    EXPECT_GT(b.at("high").get<double>(), 1.8 * b.at("value").get<double>());
  }
  EXPECT_TRUE(seen) << k.dump();
}

TEST_F(ModelBandCli, RunsWithoutSamplesAreRefused) {
  const auto plain = sim({"--trace", "pareto.toml", "--hardware", "a100-80gb", "--model-uncertainty"});
  EXPECT_EQ(plain.status, 2);
  EXPECT_NE(plain.output.find("has 0 calibration samples"), std::string::npos) << plain.output;
  const auto no_hw = sim({"--trace", "pareto.toml", "--model-uncertainty"});
  EXPECT_EQ(no_hw.status, 2);
  EXPECT_NE(no_hw.output.find("needs --hardware FILE with a [calibration] table"), std::string::npos) << no_hw.output;
  const auto many = sim({"--trace", "pareto.toml", "--hardware", "a100-80gb-vidur", "--model-uncertainty", "101"});
  EXPECT_EQ(many.status, 2);
  EXPECT_NE(many.output.find("expected 2 to 100"), std::string::npos) << many.output;
  const auto unit = sim({"--trace", "pareto.toml", "--hardware", "a100-80gb-vidur", "--backend", "unit",
                         "--model-uncertainty"});
  EXPECT_EQ(unit.status, 2);
  const auto both = sim({"--trace", "pareto.toml", "--hardware", "a100-80gb-vidur", "--seeds", "3", "--model-uncertainty"});
  EXPECT_EQ(both.status, 2);
  const auto sample = sim({"--trace", "pareto.toml", "--hardware", "a100-80gb-vidur", "--set", "hardware_sample=100"});
  EXPECT_EQ(sample.status, 2);
  EXPECT_NE(sample.output.find("no calibration sample 100"), std::string::npos) << sample.output;
  EXPECT_EQ(sim({"--trace", "pareto.toml", "--set", "hardware_sample=-2"}).status, 2);
}

// sim calibrate writes the table: the searched and solved keys (not the grid's, which do not vary,
// nor the unfitted), one row per bootstrap resample, loadable.
TEST_F(ModelBandCli, CalibrateWritesTheSamples) {
  const auto o = sim({"calibrate", "--measured", SERVESIM_PROJECT_DIR "/tests/data/measured/vidur/compute/a100/meta-llama/Llama-2-7b-hf",
                      "--out", "fit.toml", "--bootstrap", "7", "--fit",
                      // as many keys as the excerpt's 6 batches can pin
                      "gemm_efficiency,memory_efficiency,attention_efficiency,gemm_tile_rows,overhead_us"});
  ASSERT_EQ(o.status, 0) << o.output;
  const Result<HardwareSpec> hw = load_hardware((dir_ / "fit.toml").string());
  ASSERT_TRUE(hw.ok()) << hw.error().message;
  EXPECT_EQ(hw.value().calibration_samples.size(), 7u);
  const auto& keys = hw.value().calibration_keys;
  EXPECT_NE(std::find(keys.begin(), keys.end(), "gemm_efficiency"), keys.end());
  EXPECT_EQ(std::find(keys.begin(), keys.end(), "gemm_tile_rows"), keys.end());
  EXPECT_EQ(std::find(keys.begin(), keys.end(), "overhead_us"), keys.end());  // Vidur's layers do not cover it
  const auto band = sim({"--trace", "pareto.toml", "--num-prompts", "50", "--hardware", "fit.toml", "--model",
                         "llama-2-7b", "--model-uncertainty"});
  EXPECT_EQ(band.status, 0) << band.output;
  EXPECT_NE(band.output.find("(7 samples)"), std::string::npos) << band.output;
}

}  // namespace
}  // namespace servesim
