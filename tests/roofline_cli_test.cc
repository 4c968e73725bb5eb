// End-to-end runs of `sim` with the roofline backend, as a user would start them.
#include <gtest/gtest.h>

#include "tests/cli_harness.h"

namespace servesim::testing {
namespace {

using RooflineCli = Cli;

TEST_F(RooflineCli, TheDefaultRunIsLlama3OnAnA100AndPlausible) {
  const Outcome o = sim({"--policy", "chunked-prefill", "--trace", "pareto.toml", "--log", "iterations"});
  ASSERT_EQ(o.status, 0) << o.output;
  // Presets are named by name, not by their install path.
  EXPECT_NE(o.output.find("a100-80gb / llama-3-8b"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("a100-80gb.toml"), std::string::npos);
  EXPECT_NE(o.output.find("1 replica x tp 1 = 1 GPUs"), std::string::npos);
  EXPECT_NE(o.output.find("KV cache per replica:"), std::string::npos);
  EXPECT_NE(o.output.find("Cost (USD/hour):"), std::string::npos);
  EXPECT_NE(o.output.find("Mean TTFT (ms)"), std::string::npos);
  EXPECT_EQ(query("SELECT backend FROM runs"), "roofline");
  // Llama-3-8B on one A100: batch decode steps of 10-40 ms, prefills of tens of ms.
  EXPECT_GT(metric("tpot_p50"), 0.008);
  EXPECT_LT(metric("tpot_p50"), 0.040);
  EXPECT_GT(metric("ttft_p50"), 0.010);
  EXPECT_LT(metric("ttft_p50"), 1.0);
  EXPECT_GT(metric("output_throughput"), 100);
  // Every iteration carries its prediction. The first run a newcomer makes is clean: pareto.toml's
  // prompts leave room in the 8,192-token context, so nothing is rejected (regression: 4 were).
  EXPECT_EQ(query("SELECT count(*) FROM iterations WHERE predicted IS NULL OR predicted != duration"), "0");
  EXPECT_EQ(metric("completed"), 1000);
  EXPECT_EQ(metric("rejected"), 0);
  EXPECT_NE(query("SELECT count(*) FROM iterations WHERE kv_blocks_total > 20000"), "0");
}

// A prompt that fills the model's whole context (8,192 tokens for Llama-3-8B) is rejected with the
// reason; one token less is served, its response capped to the one token left.
TEST_F(RooflineCli, APromptThatFillsTheContextIsRejected) {
  const std::string w = write("ctx.toml",
                              "[[request]]\nid = 'full'\nprompt_tokens = 8192\noutput_tokens = 5\n"
                              "[[request]]\nid = 'fits'\nprompt_tokens = 8191\noutput_tokens = 5\n");
  ASSERT_EQ(sim({"--trace", w}).status, 0);
  EXPECT_EQ(query("SELECT status FROM requests WHERE id = 'full'"), "rejected");
  EXPECT_NE(query("SELECT reason FROM requests WHERE id = 'full'").find("context of 8192 tokens"),
            std::string::npos);
  EXPECT_EQ(query("SELECT status || ',' || output_tokens FROM requests WHERE id = 'fits'"), "finished,1");
}

TEST_F(RooflineCli, ASmallModelOnAT4Completes) {
  const Outcome o = sim({"--policy", "chunked-prefill", "--trace", "pareto.toml", "--hardware", "t4",
                         "--model", "qwen2.5-0.5b"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(metric("completed"), 1000);
  EXPECT_GT(metric("tpot_p50"), 0.003);  // above the 3.1 ms bandwidth floor of 0.99 GB at 320 GB/s
}

TEST_F(RooflineCli, A70bModelOnOneT4IsAClearError) {
  const Outcome o = sim({"--trace", "pareto.toml", "--hardware", "t4", "--model", "llama-3-70b"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("does not fit"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("missing"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("--tp"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "sim.db"));
}

TEST_F(RooflineCli, ListsShowRidgePointsAndModelSizes) {
  const Outcome hw = sim({"list", "hardware"});
  ASSERT_EQ(hw.status, 0);
  EXPECT_NE(hw.output.find("a100-80gb"), std::string::npos);
  EXPECT_NE(hw.output.find("153"), std::string::npos) << hw.output;  // the A100's ridge point
  const Outcome models = sim({"list", "models"});
  ASSERT_EQ(models.status, 0);
  EXPECT_NE(models.output.find("12288"), std::string::npos) << models.output;  // Qwen2.5-0.5B KV/token
}

TEST_F(RooflineCli, BadModelAndHardwareFilesAreInputErrors) {
  const Outcome arch = sim({"--trace", "pareto.toml", "--model", write("gpt.json", "{\"architectures\": [\"GPT2LMHeadModel\"]}")});
  EXPECT_EQ(arch.status, 2);
  EXPECT_NE(arch.output.find("LlamaForCausalLM"), std::string::npos) << arch.output;
  const Outcome hw = sim({"--trace", "pareto.toml", "--hardware", write("gpu.toml", "name = \"x\"\nmemory_gib = -1\n")});
  EXPECT_EQ(hw.status, 2);
  EXPECT_NE(hw.output.find("gpu.toml:2:"), std::string::npos) << hw.output;
  const Outcome dtype = sim({"--trace", "pareto.toml", "--kv-cache-dtype", "int3"});
  EXPECT_EQ(dtype.status, 2);
}

}  // namespace
}  // namespace servesim::testing
