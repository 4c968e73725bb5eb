// Data-parallel ranks and expert parallelism (--data-parallel-size, --enable-expert-parallel): a
// mixture's ranks step together, each as long as the slowest; the MoE layers span dp x tp GPUs;
// a dense model's ranks are independent replicas.
#include <gtest/gtest.h>

#include <string>

#include "backends/model.h"
#include "backends/moe_routing.h"
#include "backends/roofline.h"
#include "tests/cli_harness.h"

namespace servesim::testing {
namespace {

using DataParallelCli = Cli;

// Two requests, one per rank (round robin): a long prompt and a short one. The ranks of a mixture
// start every iteration together and end it together; the short request's rank then waits for the
// long one's (a dummy batch), so both requests see the same first iteration.
const char* kTwo =
    "[[request]]\nid = 'long'\nprompt_tokens = 4000\noutput_tokens = 4\n"
    "[[request]]\nid = 'short'\nprompt_tokens = 16\noutput_tokens = 4\n";

TEST_F(DataParallelCli, AMixturesRanksStepTogether) {
  write("two.toml", kTwo);
  const Outcome o = sim({"--trace", "two.toml", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm",
                         "--policy", "chunked-prefill", "--data-parallel-size", "2", "--enable-expert-parallel",
                         "--log", "iterations"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("2 replicas x tp 1 = 2 GPUs"), std::string::npos) << o.output;
  EXPECT_EQ(query("SELECT count(DISTINCT replica) FROM iterations"), "2");
  // Every step: both ranks' iterations start together and last as long.
  EXPECT_EQ(query("SELECT count(*) FROM iterations a JOIN iterations b ON a.step = b.step AND a.replica = 0 "
                  "AND b.replica = 1 WHERE a.start != b.start OR a.duration != b.duration"),
            "0");
  EXPECT_EQ(req("long", "first_token"), req("short", "first_token"));
}

TEST_F(DataParallelCli, ADenseModelsRanksAreIndependent) {
  write("two.toml", kTwo);
  const Outcome o = sim({"--trace", "two.toml", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                         "--policy", "chunked-prefill", "--data-parallel-size", "2", "--log", "iterations"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_LT(req("short", "first_token"), req("long", "first_token"));
}

// Expert parallelism splits the experts over the ranks' GPUs: each holds fewer weights, so more KV.
TEST_F(DataParallelCli, ExpertsSplitOverTheRanksLeaveMoreKv) {
  write("two.toml", kTwo);
  ASSERT_EQ(sim({"--trace", "two.toml", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm"}).status, 0);
  const double one = metric("kv_blocks_per_replica");
  ASSERT_EQ(sim({"--trace", "two.toml", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm",
                 "--data-parallel-size", "2", "--enable-expert-parallel"}).status, 0);
  EXPECT_GT(metric("kv_blocks_per_replica"), one * 1.3);
}

TEST_F(DataParallelCli, BadInputNamesTheKey) {
  write("two.toml", kTwo);
  const Outcome dense = sim({"--trace", "two.toml", "--model", "llama-3.1-8b", "--enable-expert-parallel"});
  EXPECT_EQ(dense.status, 2);
  EXPECT_NE(dense.output.find("enable_expert_parallel"), std::string::npos) << dense.output;
  const Outcome zero = sim({"--trace", "two.toml", "--data-parallel-size", "0"});
  EXPECT_EQ(zero.status, 2);
  EXPECT_NE(zero.output.find("dp"), std::string::npos) << zero.output;
  const Outcome pipelined = sim({"--trace", "two.toml", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm",
                                 "--data-parallel-size", "2", "--pipeline-parallel-size", "2"});
  EXPECT_EQ(pipelined.status, 2);
  EXPECT_NE(pipelined.output.find("dp:"), std::string::npos) << pipelined.output;
  const Outcome unit = sim({"--trace", "two.toml", "--backend", "unit", "--data-parallel-size", "2"});
  EXPECT_EQ(unit.status, 2);
}

// The MoE layers' dispatch and combine: all-to-all among the dp x tp GPUs with expert parallelism;
// the busiest GPU's share grows with the routing's skew.
TEST(ExpertParallel, AllToAllAndTheBusiestGpu) {
  const ModelSpec m = load_model(kData + "/models/qwen3-30b-a3b.json").value();
  const HardwareSpec hw = load_hardware(kData + "/hardware/h100-sxm.toml").value();
  RooflineOptions o;
  const RooflineModel alone(hw, m, o);
  o.dp = 4;
  o.expert_parallel = true;
  const RooflineModel ep(hw, m, o);
  const RooflineModel::Item decodes[] = {{1, 500, true}, {1, 500, true}, {1, 500, true}, {1, 500, true}};
  EXPECT_EQ(alone.price(decodes, 4).communication, 0);
  EXPECT_GT(ep.price(decodes, 4).communication, 0);
  EXPECT_DOUBLE_EQ(busiest_gpu_load(128, 8, 4, 0), 1);
  EXPECT_GT(busiest_gpu_load(128, 8, 4, 1.0), 1.5);
  EXPECT_LT(busiest_gpu_load(128, 8, 4, 1.0), 4);
}

}  // namespace
}  // namespace servesim::testing
