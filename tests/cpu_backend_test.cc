// The cpu backend end to end: every policy drives the real (float32, tiny) engine.
#include <sstream>

#include <gtest/gtest.h>

#include "policies/registry.h"
#include "tests/cli_harness.h"

namespace servesim::testing {
namespace {

using CpuBackendCli = Cli;

// Regression: the engine allocated the weights before checking that they fit (a 32 GB allocation
// for --model llama-3-8b). Now a model larger than the host's free memory is refused first, with
// the bytes needed and available; here 280 GB of fp32 weights on a hardware file that claims 1 PiB.
TEST_F(CpuBackendCli, AModelLargerThanTheHostIsRefusedBeforeAnyAllocation) {
  const std::string hw = write("huge.toml",
                               "name = 'huge host'\nmemory_gib = 1000000\nmemory_bandwidth_gbs = 20\n"
                               "fp16_tflops = 1\nfp32_tflops = 1\ninterconnect_gbs = 10\n");
  const Outcome o = sim({"--backend", "cpu", "--hardware", hw, "--model", "llama-3-70b", "--trace",
                         "seed-toy.toml"});
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("fp32 weights and KV cache, and this host has"), std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("bytes available"), std::string::npos) << o.output;
  // --tp other than 1 and a model that does not fit the hardware file fail before it too.
  EXPECT_EQ(sim({"--backend", "cpu", "--model", "llama-3-8b", "--trace", "seed-toy.toml"}).status, 2);
}

TEST_F(CpuBackendCli, EveryPolicyRunsTheTinyModelEndToEnd) {
  const std::string w = write("w.toml",
                              "[generate]\nrequests = 12\nseed = 3\n[generate.arrival]\nprocess = "
                              "\"poisson\"\nrate = 2000.0\n[generate.prompt_tokens]\ndist = \"uniform\"\n"
                              "min = 4\nmax = 40\n[generate.output_tokens]\ndist = \"uniform\"\nmin = 1\n"
                              "max = 12\n[generate.prefixes]\nshare = 0.5\ncount = 2\ntokens = 32\n");
  for (const PolicyInfo& p : policy_registry()) {
    const Outcome o = sim({"--backend", "cpu", "--model", kData + "/models/tiny.json", "--policy",
                           std::string(p.name), "--trace", w, "--max-num-seqs", "4",
                           "--max-num-batched-tokens", "128", "--set", "kv.blocks=40", "--block-size", "4",
                           "--set", "max_tokens=16"});
    ASSERT_EQ(o.status, 0) << p.name << ": " << o.output;
    EXPECT_EQ(metric("completed"), 12) << p.name;
    // Measured durations with the roofline's prediction beside each.
    EXPECT_EQ(query("SELECT count(*) FROM iterations WHERE predicted IS NULL AND run_id = (SELECT max(id) FROM runs)"), "0");
    EXPECT_EQ(query("SELECT backend FROM runs WHERE id = (SELECT max(id) FROM runs)"), "cpu");
  }
  EXPECT_NE(query("SELECT max(preemptions) FROM requests"), "0");  // 40 blocks of 4 tokens are tight
}

}  // namespace
}  // namespace servesim::testing

namespace servesim::testing {
namespace {

TEST_F(CpuBackendCli, ValidateReportsThePredictionErrorOfAMeasuredRun) {
  ASSERT_EQ(sim({"--backend", "cpu", "--policy", "chunked-prefill", "--trace", "seed-toy.toml"}).status, 0);
  const Outcome v = sim({"validate"});
  ASSERT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("decode-only"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("batch 1"), std::string::npos) << v.output;
  EXPECT_NE(query("SELECT value FROM metrics WHERE name = 'validate_mape'"), "");
  // A run without measurements has nothing to validate.
  ASSERT_EQ(sim({"--backend", "unit", "--trace", "seed-toy.toml"}).status, 0);
  const Outcome none = sim({"validate"});
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.output.find("measuring backend"), std::string::npos) << none.output;
  EXPECT_EQ(sim({"validate", "--run", "7"}).status, 2);
}

}  // namespace
}  // namespace servesim::testing

namespace servesim::testing {
namespace {

double mape_in(const std::string& text) {
  // The "all" row of `sim validate`: "all   <count>   <MAPE>% ..."
  const size_t at = text.find("\nall ");
  EXPECT_NE(at, std::string::npos) << text;
  std::istringstream row(text.substr(at + 5));
  double count = 0, mape = 0;
  row >> count >> mape;
  return mape;
}

TEST_F(CpuBackendCli, CalibrationLowersThePredictionError) {
  ASSERT_EQ(sim({"--backend", "cpu", "--policy", "chunked-prefill", "--trace", "multiturn.toml",
                 "--set", "max_tokens=8", "--name", "measured"}).status, 0);
  const Outcome before = sim({"validate", "--hardware", kData + "/hardware/cpu-host.toml"});
  ASSERT_EQ(before.status, 0) << before.output;
  const Outcome cal = sim({"calibrate", "--out", (dir_ / "fitted.toml").string()});
  ASSERT_EQ(cal.status, 0) << cal.output;
  const Outcome after = sim({"validate", "--hardware", (dir_ / "fitted.toml").string()});
  ASSERT_EQ(after.status, 0) << after.output;
  EXPECT_LT(mape_in(after.output), mape_in(before.output));
  EXPECT_NE(query("SELECT count(*) FROM batch_items"), "0");
  EXPECT_EQ(sim({"calibrate"}).status, 2);  // --out is required
}

}  // namespace
}  // namespace servesim::testing
