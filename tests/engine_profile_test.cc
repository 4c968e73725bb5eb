// Engine profiles (backends/engine_profile.h): vLLM's CUDA-graph capture sizes, the padding and
// launch mode of a batch, the host time of an iteration, reading engine files, and what the
// roofline backend and a run make of them.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>

#include "backends/engine_profile.h"
#include "backends/roofline_backend.h"
#include "tests/cli_harness.h"

namespace servesim::testing {
namespace {

// vLLM 0.33, config/vllm.py _set_cudagraph_sizes with the defaults (512 on Hopper): max_num_seqs
// 256 and 8192 tokens give [1, 2, 4, 8, 16, ..., 248, 256, 272, ..., 512].
TEST(CudagraphSizes, VllmDefaults) {
  const std::vector<int32_t> s = cudagraph_capture_sizes(512, 256, 8192);
  ASSERT_EQ(s.size(), 3u + 31u + 17u);
  EXPECT_EQ(s[0], 1);
  EXPECT_EQ(s[2], 4);
  EXPECT_EQ(s[3], 8);
  EXPECT_EQ(s[33], 248);
  EXPECT_EQ(s[34], 256);
  EXPECT_EQ(s[35], 272);
  EXPECT_EQ(s.back(), 512);
}

// The largest size is min(platform cap, 2 x max_num_seqs, max_num_batched_tokens), and the widest
// uniform decode (max_num_seqs) and max_num_batched_tokens are captured when within it.
TEST(CudagraphSizes, CappedBySeqsAndTokens) {
  const std::vector<int32_t> a = cudagraph_capture_sizes(512, 100, 8192);  // largest 200
  EXPECT_EQ(a.back(), 200);
  EXPECT_NE(std::find(a.begin(), a.end(), 100), a.end());  // the widest decode, not a multiple of 8
  EXPECT_NE(std::find(a.begin(), a.end(), 104), a.end());
  const std::vector<int32_t> b = cudagraph_capture_sizes(512, 256, 60);  // largest 60
  EXPECT_EQ(b, (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 60}));
  EXPECT_TRUE(cudagraph_capture_sizes(0, 256, 8192).empty());
}

TEST(LaunchShape, PadsToTheNextGraphOrRunsEager) {
  const std::vector<int32_t> s = cudagraph_capture_sizes(512, 256, 8192);
  EXPECT_EQ(launch_shape(s, 3, true).padded_tokens, 4);
  EXPECT_EQ(launch_shape(s, 3, true).mode, GraphMode::kFull);
  EXPECT_EQ(launch_shape(s, 257, false).padded_tokens, 272);
  EXPECT_EQ(launch_shape(s, 257, false).mode, GraphMode::kPiecewise);
  EXPECT_EQ(launch_shape(s, 513, true).mode, GraphMode::kEager);
  EXPECT_EQ(launch_shape(s, 513, true).padded_tokens, 513);
  EXPECT_EQ(launch_shape({}, 7, true).mode, GraphMode::kEager);  // --enforce-eager
}

TEST(HostTime, ByLaunchModeAndAsyncScheduling) {
  EngineProfile e;
  e.step = 100e-6;
  e.step_per_seq = 2e-6;
  e.sync_step = 400e-6;
  e.sync_step_per_seq = 10e-6;
  e.graph_launch = 20e-6;
  e.piecewise_layer = 5e-6;
  e.eager_layer = 30e-6;
  EXPECT_NEAR(host_time(e, GraphMode::kFull, 32, 10), 100e-6 + 20e-6 + 20e-6, 1e-12);
  EXPECT_NEAR(host_time(e, GraphMode::kPiecewise, 32, 10), 100e-6 + 20e-6 + 160e-6, 1e-12);
  EXPECT_NEAR(host_time(e, GraphMode::kEager, 32, 10), 100e-6 + 20e-6 + 960e-6, 1e-12);
  e.async_scheduling = false;
  EXPECT_NEAR(host_time(e, GraphMode::kFull, 32, 10), 140e-6 + 400e-6 + 100e-6, 1e-12);
  EXPECT_EQ(host_time(EngineProfile::none(), GraphMode::kEager, 80, 100), 0);
}

class EngineFile : public Cli {};

TEST_F(EngineFile, ThePresetLoads) {
  Result<EngineProfile> e = load_engine_profile(SERVESIM_PROJECT_DIR "/data/engines/vllm-0.33.toml");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e.value().engine, "vllm");
  EXPECT_TRUE(e.value().async_scheduling);
  EXPECT_EQ(e.value().max_cudagraph_capture_size, 512);
  EXPECT_GT(e.value().step, 0);
}

TEST_F(EngineFile, BadKeysNameFileLineAndKey) {
  const std::string head = "name = 'x'\nengine = 'vllm'\nversion = '1'\n";
  const std::string negative = write("neg.toml", head + "step_us = -3\n");
  Result<EngineProfile> a = load_engine_profile(negative);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("neg.toml:4"), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("step_us"), std::string::npos) << a.error().message;
  Result<EngineProfile> b = load_engine_profile(write("unknown.toml", head + "step_ms = 3\n"));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("step_ms"), std::string::npos) << b.error().message;
  Result<EngineProfile> c = load_engine_profile(write("noname.toml", "engine = 'vllm'\nversion = '1'\n"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("name"), std::string::npos) << c.error().message;
  // On the command line: exit status 2, the key named.
  const Outcome o = sim({"--trace", "seed-toy.toml", "--engine", negative});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("step_us"), std::string::npos) << o.output;
  const Outcome missing = sim({"--trace", "seed-toy.toml", "--engine", "no-such-engine"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("--engine"), std::string::npos) << missing.output;
}

// A decode batch computes its graph's padded rows and pays the engine's host time; with no
// engine, the kernels alone, as the roofline model prices them.
TEST_F(EngineFile, TheBackendAddsHostTimeAndPadding) {
  const std::string engine = write("e.toml",
                                   "name = 'x'\nengine = 'vllm'\nversion = '1'\nstep_us = 300\n"
                                   "step_per_seq_us = 10\ngraph_launch_us = 20\nrequest_us = 5000\n");
  BackendSetup with;
  with.engine = engine;
  BackendSetup without;
  without.engine = "none";
  auto a = make_roofline_backend(with);
  auto b = make_roofline_backend(without);
  ASSERT_TRUE(a.ok() && b.ok());
  auto& engined = static_cast<RooflineBackend&>(*a.value());
  auto& bare = static_cast<RooflineBackend&>(*b.value());
  const RooflineModel& m = bare.roofline();
  // Three decodes at 100 cached tokens each: padded to the graph of 4.
  const RooflineModel::Item three[] = {{1, 100, true}, {1, 100, true}, {1, 100, true}};
  const RooflineBreakdown kernels = m.price(three, 3);
  const double padded = m.price_rest(RooflineBreakdown{}, 4, 3).total() + kernels.attention;
  EXPECT_GT(padded, kernels.total());
  Batch batch;
  std::vector<Request> reqs(3);
  for (Request& r : reqs) {
    r.prompt_tokens = 100;
    r.num_computed = 100;
    r.num_output = 1;
    batch.items.push_back(BatchItem{&r, 1, 100});
  }
  const Time bare_t = bare.run(batch).duration;
  const Time engined_t = engined.run(batch).duration;
  EXPECT_NEAR(to_seconds(bare_t), kernels.total(), 2e-9);
  EXPECT_NEAR(to_seconds(engined_t), padded + 300e-6 + 30e-6 + 20e-6, 2e-9);
  EXPECT_EQ(engined.request_overhead(1000), seconds_to_time(5e-3));
  EXPECT_EQ(bare.request_overhead(1000), 0);
}

// The API server's time is in the client's TTFT and E2E latency, never in the engine's schedule.
TEST_F(EngineFile, RequestTimeIsAddedToTtftAndLatencyOnly) {
  const std::string w = write("one.toml", "[[request]]\nid = 'a'\nprompt_tokens = 100\noutput_tokens = 20\n");
  const std::string slow = write("slow.toml", "name = 'x'\nengine = 'vllm'\nversion = '1'\nrequest_us = 7000\n");
  const std::string fast = write("fast.toml", "name = 'x'\nengine = 'vllm'\nversion = '1'\n");
  ASSERT_EQ(sim({"--trace", w, "--engine", fast, "--policy", "chunked-prefill"}).status, 0);
  const double ttft = metric("ttft_mean"), tpot = metric("tpot_mean"), e2e = metric("e2el_mean");
  ASSERT_EQ(sim({"--trace", w, "--engine", slow, "--policy", "chunked-prefill"}).status, 0);
  EXPECT_NEAR(metric("ttft_mean"), ttft + 7e-3, 1e-9);
  EXPECT_NEAR(metric("e2el_mean"), e2e + 7e-3, 1e-9);
  EXPECT_NEAR(metric("tpot_mean"), tpot, 1e-12);
}

// A closed loop sends the next request when the client has the last response.
TEST_F(EngineFile, AClosedLoopWaitsForTheResponse) {
  const std::string w = write("two.toml",
                              "[[request]]\nid = 'a'\nprompt_tokens = 100\noutput_tokens = 5\n"
                              "[[request]]\nid = 'b'\nprompt_tokens = 100\noutput_tokens = 5\n");
  const std::string slow = write("slow.toml", "name = 'x'\nengine = 'vllm'\nversion = '1'\nrequest_us = 7000\n");
  ASSERT_EQ(sim({"--trace", w, "--engine", slow, "--max-concurrency", "1", "--policy", "chunked-prefill"}).status, 0);
  const double finished_a = std::stod(query("SELECT finished FROM requests WHERE id = 'a'"));
  const double sent_b = std::stod(query("SELECT arrival FROM requests WHERE id = 'b'"));
  EXPECT_NEAR(sent_b, finished_a, 1e-9);
}

}  // namespace
}  // namespace servesim::testing

namespace servesim::testing {
namespace {

// `sim calibrate --vllm-result`: a file made by replaying the test requests under a known engine
// (step_us 700, request_us 9000) is fitted back from the default preset's values, and the
// held-out requests' means come within a few percent.
TEST_F(EngineFile, CalibrateRecoversTheHostTermsOfAKnownEngine) {
  const std::string base = SERVESIM_PROJECT_DIR "/tests/data/vllm/base.json";
  std::string truth;
  std::ifstream preset(SERVESIM_PROJECT_DIR "/data/engines/vllm-0.33.toml");
  for (std::string line; std::getline(preset, line);) {
    const std::string key = line.substr(0, line.find(' '));
    truth += key == "step_us" ? "step_us = 700\n" : key == "request_us" ? "request_us = 9000\n" : line + "\n";
  }
  const std::string engine = write("truth.toml", truth);
  const Outcome made = sim({"validate", "--vllm-result", base, "--engine", engine, "--write-simulated", "m.json"});
  ASSERT_EQ(made.status, 0) << made.output;
  const Outcome fit = sim({"calibrate", "--vllm-result", "m.json", "--out", "fit.toml", "--bootstrap", "3"});
  ASSERT_EQ(fit.status, 0) << fit.output;
  EXPECT_NE(fit.output.find("Held-out requests"), std::string::npos) << fit.output;
  Result<EngineProfile> e = load_engine_profile((dir_ / "fit.toml").string());
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_NEAR(e.value().step * 1e6, 700, 35) << fit.output;
  EXPECT_NEAR(e.value().request * 1e6, 9000, 900) << fit.output;
  // Bad input: no --out, a missing file.
  EXPECT_EQ(sim({"calibrate", "--vllm-result", "m.json"}).status, 2);
  const Outcome missing = sim({"calibrate", "--vllm-result", "nope.json", "--out", "x.toml"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("nope.json"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace servesim::testing
