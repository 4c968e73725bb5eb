// `sim validate --vllm-result`: the Kolmogorov-Smirnov test, the percentiles, the reader of vLLM's
// result files and its errors, the arrivals it replays, and the comparison end to end. The files
// used here are constructed (tests/data/vllm/README.md), not measured.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/calibration/ks_test.h"
#include "analysis/calibration/vllm_validate.h"
#include "sim/config/presets.h"
#include "tests/cli_harness.h"
#include "workloads/vllm_bench_result.h"

namespace servesim {
namespace {

using nlohmann::json;
using testing::Cli;

std::vector<WeightedValue> expand(const std::vector<double>& sorted) {
  std::vector<WeightedValue> out;
  for (double v : sorted) out.push_back({v, 1});
  return out;
}

TEST(KsTest, IdenticalSamplesHaveDistanceZero) {
  const auto a = expand({1, 2, 3});
  const KsResult r = ks_two_sample(a, a);
  EXPECT_EQ(r.d, 0.0);
  EXPECT_DOUBLE_EQ(r.n_effective, 1.5);
  EXPECT_EQ(r.p_value, 1.0);
}

TEST(KsTest, DisjointSamplesHaveDistanceOne) {
  EXPECT_EQ(ks_two_sample(expand({1, 2, 3, 4}), expand({5, 6})).d, 1.0);
  EXPECT_EQ(ks_two_sample(expand({5, 6}), expand({1, 2, 3, 4})).d, 1.0);
}

TEST(KsTest, DifferentSizesWorkedByHand) {
  // x = 1: 1/3 - 0; x = 2: 1/3 - 1/2; x = 3: 2/3 - 1/2; x = 4: 2/3 - 1; x = 5: 0. D = 1/3 (scipy's
  // ks_2samp([1, 3, 5], [2, 4]) too).
  const KsResult r = ks_two_sample(expand({1, 3, 5}), expand({2, 4}));
  EXPECT_DOUBLE_EQ(r.d, 1.0 / 3);
  EXPECT_DOUBLE_EQ(r.n_effective, 6.0 / 5);
}

TEST(KsTest, TiesArePassedTogetherAcrossBothSamples) {
  // a = 1 2 2 3, b = 2 2 2 4. After 1: 1/4 - 0; after every 2: 3/4 - 3/4 = 0; after 3: 1 - 3/4;
  // after 4: 0. D = 1/4. Comparing inside the run of 2s would give 2/4 - 0 = 1/2.
  EXPECT_DOUBLE_EQ(ks_two_sample(expand({1, 2, 2, 3}), expand({2, 2, 2, 4})).d, 0.25);
  // The same samples run-length encoded.
  const std::vector<WeightedValue> a = {{1, 1}, {2, 2}, {3, 1}}, b = {{2, 3}, {4, 1}};
  EXPECT_DOUBLE_EQ(ks_two_sample(a, b).d, 0.25);
  // All values tied: no distance at all.
  EXPECT_EQ(ks_two_sample(std::vector<WeightedValue>{{7, 5}}, std::vector<WeightedValue>{{7, 2}}).d, 0.0);
}

TEST(KsTest, KolmogorovSurvivalFunctionMatchesScipy) {
  // scipy.stats.kstwobign.sf
  EXPECT_NEAR(kolmogorov_sf(0.5), 0.9639452436648751, 1e-12);
  EXPECT_NEAR(kolmogorov_sf(1.0), 0.26999967167735456, 1e-12);
  EXPECT_NEAR(kolmogorov_sf(1.5), 0.022217962616525127, 1e-12);
  EXPECT_NEAR(kolmogorov_sf(2.0), 0.0006709252557796953, 1e-14);
  EXPECT_EQ(kolmogorov_sf(0), 1.0);
  EXPECT_NEAR(kolmogorov_sf(0.05), 1.0, 1e-12);
  // Continuous where the two series meet, and decreasing.
  EXPECT_NEAR(kolmogorov_sf(1.18 - 1e-9), kolmogorov_sf(1.18 + 1e-9), 1e-7);
  for (double x = 0.1; x < 3; x += 0.1) EXPECT_GT(kolmogorov_sf(x), kolmogorov_sf(x + 0.1));
}

TEST(KsTest, PValueIsSmallForDifferentSamplesAndLargeForSimilarOnes) {
  std::vector<double> a, b, c;
  for (int i = 0; i < 200; ++i) {
    a.push_back(i);
    b.push_back(i + 0.5);  // interleaved with a: the same distribution
    c.push_back(i + 100);  // shifted by half the range
  }
  const KsResult same = ks_two_sample(expand(a), expand(b)), shifted = ks_two_sample(expand(a), expand(c));
  EXPECT_NEAR(same.d, 1.0 / 200, 1e-15);
  EXPECT_GT(same.p_value, 0.99);
  EXPECT_DOUBLE_EQ(shifted.d, 0.5);
  EXPECT_LT(shifted.p_value, 1e-18);
  EXPECT_NEAR(shifted.p_value, kolmogorov_sf(std::sqrt(100.0) * 0.5), 1e-30);
}

TEST(VllmValidate, PercentilesAreNumpysLinearOnes) {
  // numpy.percentile([1, 2, 3, 4, 10], [25, 50, 75, 90, 95, 99]) and of the tied sample below.
  const LatencyComparison c = compare_latency("ttft", expand({1, 2, 3, 4, 10}),
                                              std::vector<WeightedValue>{{0.5, 3}, {2, 1}, {7, 2}});
  const double numpy_a[] = {2.0, 3.0, 4.0, 7.6, 8.8, 9.76}, numpy_b[] = {0.5, 1.25, 5.75, 7.0, 7.0, 7.0};
  ASSERT_EQ(c.percentiles.size(), 6u);
  double mape = 0;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(c.percentiles[i].measured, numpy_a[i], 1e-12);
    EXPECT_NEAR(c.percentiles[i].simulated, numpy_b[i], 1e-12);
    EXPECT_NEAR(*c.percentiles[i].error, (numpy_b[i] - numpy_a[i]) / numpy_a[i], 1e-12);
    mape += std::abs((numpy_b[i] - numpy_a[i]) / numpy_a[i]) / 6;
  }
  EXPECT_NEAR(*c.mape, mape, 1e-12);
  EXPECT_DOUBLE_EQ(c.measured_mean, 4.0);
  EXPECT_EQ(c.simulated_n, 6);
}

TEST(VllmValidate, MeasuredLatenciesAreVllmsDefinitions) {
  VllmBenchRequest a{.input_len = 10, .output_len = 3, .ttft = 0.1, .itls = {0.02, 0.04}, .latency = 0.16};
  VllmBenchRequest one{.input_len = 10, .output_len = 1, .ttft = 0.3, .itls = {}, .latency = 0.3};
  VllmBenchRequest failed{.input_len = 10, .output_len = 0, .error = "timeout"};
  const LatencySamples s = latency_samples({a, one, failed});
  ASSERT_EQ(s.ttft.size(), 2u);
  ASSERT_EQ(s.tpot.size(), 1u);  // only requests with more than one output token
  EXPECT_NEAR(s.tpot[0].value, (0.16 - 0.1) / 2, 1e-15);
  ASSERT_EQ(s.itl.size(), 2u);
  EXPECT_EQ(s.e2el.back().value, 0.3);
}

TEST(VllmModelPresets, HuggingFaceIdsMapToShippedPresets) {
  EXPECT_EQ(model_preset_for_repository("meta-llama/Llama-2-7b-hf"), "llama-2-7b");
  EXPECT_EQ(model_preset_for_repository("openai/gpt-oss-120b"), "gpt-oss-120b");
  EXPECT_EQ(model_preset_for_repository("deepseek-ai/DeepSeek-R1"), "deepseek-v3");
  EXPECT_EQ(model_preset_for_repository("Qwen/Qwen3-30B-A3B-FP8"), "qwen3-30b-a3b-fp8");
  EXPECT_EQ(model_preset_for_repository("META-LLAMA/llama-2-7b-chat-hf"), "llama-2-7b");
  EXPECT_EQ(model_preset_for_repository("/models/Meta-Llama-3-8B-Instruct/"), "llama-3-8b");
  EXPECT_EQ(model_preset_for_repository("Qwen/Qwen2.5-7B"), "qwen2.5-7b");
  EXPECT_EQ(model_preset_for_repository("meta-llama/Llama-3.1-8B-Instruct"), "llama-3.1-8b");
  EXPECT_FALSE(model_preset_for_repository("meta-llama/Llama-3.2-1B-Instruct"));
  EXPECT_FALSE(model_preset_for_repository(""));
}

// A detailed result of n requests (lengths 50 / 20, start_times 1 s apart), as JSON to edit.
json small_result(int n) {
  json j = {{"model_id", "meta-llama/Llama-2-7b-hf"}, {"request_rate", 1.0}, {"burstiness", 1.0},
            {"max_concurrency", nullptr}};
  for (int i = 0; i < n; ++i) {
    j["input_lens"].push_back(50);
    j["output_lens"].push_back(20);
    j["ttfts"].push_back(0.05);
    j["itls"].push_back(std::vector<double>(19, 0.01));
    j["latencies"].push_back(0.05 + 19 * 0.01);
    j["start_times"].push_back(1000.0 + i);
    j["generated_texts"].push_back("");
    j["errors"].push_back("");
  }
  return j;
}

VllmBenchResult result_of(const json& j) {
  // A file of this process and call: ctest runs the tests of this file side by side.
  static int calls = 0;
  const std::string path = std::string(::testing::TempDir()) + "/vllm_result_of_" + std::to_string(::getpid()) +
                           "_" + std::to_string(++calls) + ".json";
  std::ofstream(path) << j.dump();
  Result<VllmBenchResult> r = read_vllm_bench_result(path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : VllmBenchResult{};
}

TEST(VllmBenchWorkload, StartTimesAreHonoured) {
  json j = small_result(3);
  j["start_times"] = {1000.0, 1002.5, 1001.0};  // sent out of file order
  const Result<Workload> w = vllm_bench_workload(result_of(j), 0);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w.value().requests.size(), 3u);
  EXPECT_EQ(w.value().requests[0].id, "r0");
  EXPECT_EQ(w.value().requests[0].arrival, 0);
  EXPECT_EQ(w.value().requests[1].id, "r2");
  EXPECT_EQ(w.value().requests[1].arrival, from_seconds(1.0));
  EXPECT_EQ(w.value().requests[2].arrival, from_seconds(2.5));
  EXPECT_EQ(w.value().requests[2].prompt_tokens, 50);
  EXPECT_EQ(w.value().requests[2].output_tokens, 20);
  // Under max_concurrency a request arrives when the client meant to send it: before its wait.
  j["max_concurrency"] = 1;
  j["queue_times"] = {0.0, 2.0, 0.5};
  const Result<Workload> held = vllm_bench_workload(result_of(j), 0);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held.value().requests[1].arrival, from_seconds(0.5));
  EXPECT_EQ(held.value().requests[2].arrival, from_seconds(0.5));
}

TEST(VllmBenchWorkload, FailedRequestsAreLeftOut) {
  json j = small_result(4);
  j["errors"][1] = "Never received a valid chunk to calculate TTFT.";
  j["ttfts"][1] = 0.0;
  j["itls"][1] = json::array();
  j["output_lens"][1] = 0;
  const VllmBenchResult r = result_of(j);
  EXPECT_EQ(r.failed_count(), 1);
  const Result<Workload> w = vllm_bench_workload(r, 0);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w.value().requests.size(), 3u);
  for (const RequestSpec& q : w.value().requests) EXPECT_NE(q.id, "r1");
}

TEST(VllmBenchWorkload, DrawnArrivalsAreDeterministicPerSeedAndTimedAsVllmBench) {
  json j = small_result(50);
  j.erase("start_times");
  j["request_rate"] = 4.0;
  j["burstiness"] = 0.5;
  const VllmBenchResult r = result_of(j);
  ASSERT_FALSE(r.has_start_times);
  const Result<Workload> a = vllm_bench_workload(r, 3), b = vllm_bench_workload(r, 3), c = vllm_bench_workload(r, 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool differs = false;
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_EQ(a.value().requests[i].arrival, b.value().requests[i].arrival);
    differs |= a.value().requests[i].arrival != c.value().requests[i].arrival;
  }
  EXPECT_TRUE(differs);
  // vLLM bench's normalization: the last of n requests is sent at n / rate.
  EXPECT_NEAR(to_seconds(a.value().requests.back().arrival), 50 / 4.0, 1e-6);
  EXPECT_GT(a.value().requests.front().arrival, 0);
  j["request_rate"] = "inf";
  const Result<Workload> all = vllm_bench_workload(result_of(j), 3);
  ASSERT_TRUE(all.ok());
  for (const RequestSpec& q : all.value().requests) EXPECT_EQ(q.arrival, 0);
  j.erase("request_rate");
  const Result<Workload> none = vllm_bench_workload(result_of(j), 3);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("request_rate"), std::string::npos);
}

class VllmValidateCli : public Cli {
 protected:
  // Writes `j` and runs `sim validate --vllm-result` on it with `more` arguments.
  testing::Outcome validate(const json& j, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"validate", "--vllm-result", write("result.json", j.dump())};
    args.insert(args.end(), more.begin(), more.end());
    return sim(args);
  }
  void expect_bad(const json& j, const std::string& key, const std::string& what) {
    const testing::Outcome o = validate(j);
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_NE(o.output.find("result.json"), std::string::npos) << o.output;
    EXPECT_NE(o.output.find(key), std::string::npos) << o.output;
    EXPECT_NE(o.output.find(what), std::string::npos) << o.output;
  }
  static json parsed(const testing::Outcome& o) { return json::parse(o.output.substr(o.output.find('{'))); }
};

TEST_F(VllmValidateCli, BadFilesAreRefusedNamingFileAndKey) {
  {
    const testing::Outcome o = sim({"validate", "--vllm-result", write("result.json", "{\"ttfts\": [1,")});
    EXPECT_EQ(o.status, 2);
    EXPECT_NE(o.output.find("result.json:1:"), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("not JSON"), std::string::npos) << o.output;
  }
  json j = small_result(3);
  j.erase("itls");
  expect_bad(j, "itls", "--save-detailed");
  j = small_result(3);
  j["ttfts"].push_back(0.1);
  expect_bad(j, "ttfts", "has 4 entries, but input_lens has 3");
  j = small_result(3);
  j["ttfts"][2] = -0.5;
  expect_bad(j, "ttfts[2]", ">= 0, got -0.5");
  j = small_result(3);
  j["input_lens"][1] = "many";
  expect_bad(j, "input_lens[1]", "whole number");
  j = small_result(3);
  j["output_lens"][0] = 2.5;
  expect_bad(j, "output_lens[0]", "whole number");
  j = small_result(3);
  j["itls"][1][4] = "x";
  expect_bad(j, "itls[1][4]", "number of seconds");
  j = small_result(3);
  j["start_times"] = 7;
  expect_bad(j, "start_times", "expected a list");
  j = small_result(3);
  j["model_id"] = "my-org/custom-13b";
  expect_bad(j, "model_id", "--model");
  j = small_result(3);
  j["max_concurrency"] = 0;
  expect_bad(j, "max_concurrency", ">= 1");
  j = small_result(3);
  j["start_times"][2] = 1e300;
  expect_bad(j, "start_times", "span more than 1e9 s");
  // Options that would replace what the file says.
  const testing::Outcome o = validate(small_result(3), {"--request-rate", "5"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("--request-rate does not apply"), std::string::npos) << o.output;
}

TEST_F(VllmValidateCli, FailedRequestsAreCountedAndLeftOut) {
  json j = small_result(10);
  for (int i : {3, 7}) {
    j["errors"][i] = "Never received a valid chunk to calculate TTFT.";
    j["ttfts"][i] = 0.0;
    j["itls"][i] = json::array();
    j["output_lens"][i] = 0;
    j["latencies"][i] = 0.0;
  }
  const testing::Outcome o = validate(j, {"--format", "json"});
  ASSERT_EQ(o.status, 0) << o.output;
  const json r = parsed(o);
  EXPECT_EQ(r["requests"]["in_file"], 10);
  EXPECT_EQ(r["requests"]["failed"], 2);
  EXPECT_EQ(r["requests"]["replayed"], 8);
  EXPECT_EQ(r["requests"]["simulated_completed"], 8);
  EXPECT_EQ(r["latencies"]["ttft"]["n"]["measured"], 8);
  EXPECT_EQ(r["latencies"]["ttft"]["n"]["simulated"], 8);
  EXPECT_EQ(r["latencies"]["itl"]["n"]["measured"], 8 * 19);
  const testing::Outcome text = validate(j);
  EXPECT_NE(text.output.find("10 requests, 2 failed (left out of both sides)"), std::string::npos) << text.output;
}

// The replay of the constructed base file, written by sim itself in vLLM's layout.
TEST_F(VllmValidateCli, SimulatorsOwnResultGivesNoErrorAndScaledTtftsGiveTheirError) {
  const std::string base = std::string(SERVESIM_PROJECT_DIR) + "/tests/data/vllm/base.json";
  const std::string self = (dir_ / "self.json").string();
  const testing::Outcome made = sim({"validate", "--vllm-result", base, "--write-simulated", self});
  ASSERT_EQ(made.status, 0) << made.output;
  const testing::Outcome o = sim({"validate", "--vllm-result", self, "--format", "json"});
  ASSERT_EQ(o.status, 0) << o.output;
  const json r = parsed(o);
  for (const char* l : {"ttft", "tpot", "itl", "e2el"}) {
    const json& e = r["latencies"][l];
    EXPECT_EQ(e["n"]["measured"], e["n"]["simulated"]) << l;
    EXPECT_LT(e["mape"].get<double>(), 1e-6) << l;
    EXPECT_LT(e["ks"]["d"].get<double>(), 1e-9) << l;
    EXPECT_GT(e["ks"]["p_value"].get<double>(), 0.999) << l;
  }
  EXPECT_EQ(r["requests"]["simulated_completed"], 120);

  // The same file with every TTFT 25 % longer (and so every latency): each TTFT percentile of the
  // simulator is then 1 / 1.25 - 1 = -20 % off, TPOT and ITL are untouched.
  json slow = json::parse(std::ifstream(self));
  for (size_t i = 0; i < slow["ttfts"].size(); ++i) {
    const double t = slow["ttfts"][i].get<double>();
    slow["ttfts"][i] = t * 1.25;
    slow["latencies"][i] = slow["latencies"][i].get<double>() + 0.25 * t;
  }
  const json s = parsed(validate(slow, {"--format", "json"}));
  for (const json& p : s["latencies"]["ttft"]["percentiles"]) EXPECT_NEAR(p["error"].get<double>(), -0.2, 1e-9);
  EXPECT_NEAR(s["latencies"]["ttft"]["mape"].get<double>(), 0.2, 1e-9);
  EXPECT_GT(s["latencies"]["ttft"]["ks"]["d"].get<double>(), 0.05);
  EXPECT_LT(s["latencies"]["tpot"]["mape"].get<double>(), 1e-6);
  EXPECT_LT(s["latencies"]["itl"]["ks"]["d"].get<double>(), 1e-9);
  for (const json& p : s["latencies"]["e2el"]["percentiles"]) EXPECT_LT(p["error"].get<double>(), 0) << p;
}

TEST_F(VllmValidateCli, StartTimesAreReplayedAndWrittenBack) {
  json j = small_result(2);
  j["start_times"] = {50.0, 53.0};
  const std::string out = (dir_ / "sim.json").string();
  const testing::Outcome o = validate(j, {"--write-simulated", out});
  ASSERT_EQ(o.status, 0) << o.output;
  const json s = json::parse(std::ifstream(out));
  EXPECT_DOUBLE_EQ(s["start_times"][0].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["start_times"][1].get<double>(), 3.0);
  EXPECT_EQ(s["itls"][1].size(), 19u);
  EXPECT_EQ(s["output_lens"][1], 20);
}

TEST_F(VllmValidateCli, MaxConcurrencyIsAppliedAsTheBenchmarkRanIt) {
  // One slot: the four requests were all meant to go at once and waited for each other.
  json j = small_result(4);
  j["max_concurrency"] = 1;
  j["start_times"] = {10.0, 10.3, 10.6, 10.9};
  j["queue_times"] = {0.0, 0.3, 0.6, 0.9};
  const std::string out = (dir_ / "sim.json").string();
  const testing::Outcome o = validate(j, {"--write-simulated", out});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("max_concurrency 1"), std::string::npos) << o.output;
  const json s = json::parse(std::ifstream(out));
  for (size_t i = 1; i < 4; ++i) {
    // Each is sent when the one before finished, and waited that long for its slot.
    EXPECT_NEAR(s["start_times"][i].get<double>(),
                s["start_times"][i - 1].get<double>() + s["latencies"][i - 1].get<double>(), 1e-9);
    EXPECT_NEAR(s["queue_times"][i].get<double>(), s["start_times"][i].get<double>(), 1e-9);
    EXPECT_NEAR(s["ttfts"][i].get<double>(), s["ttfts"][0].get<double>(), 1e-6);  // from the send
  }
}

TEST_F(VllmValidateCli, DrawnArrivalsDependOnlyOnTheSeed) {
  json j = small_result(40);
  j.erase("start_times");
  j["request_rate"] = 20.0;
  const auto run = [&](const char* seed) { return validate(j, {"--format", "json", "--seed", seed}).output; };
  const std::string a = run("5");
  EXPECT_NE(a.find("drawn: gamma gaps of shape 1 at 20 req/s, seed 5"), std::string::npos) << a;
  EXPECT_EQ(a, run("5"));
  EXPECT_NE(a, run("6"));
}

// Regression: a file whose per-request gaps could not belong to its output lengths (more gaps
// than tokens, or a last chunk after the response ended) was accepted.
TEST(VllmBenchWorkload, GapsThatDoNotFitTheOutputAreRefused) {
  const auto read = [](const json& j) {
    static int calls = 0;
    const std::string path = std::string(::testing::TempDir()) + "/vllm_gaps_" + std::to_string(::getpid()) + "_" +
                             std::to_string(++calls) + ".json";
    std::ofstream(path) << j.dump();
    return read_vllm_bench_result(path);
  };
  json more = small_result(2);
  more["itls"][1] = std::vector<double>(20, 0.01);  // 20 gaps for 20 tokens
  auto r = read(more);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("itls[1]: 20 gaps between chunks for 20 output tokens"), std::string::npos)
      << r.error().message;
  json late = small_result(2);
  late["latencies"][0] = 0.1;  // the 19 gaps of 10 ms end at 0.24 s
  r = read(late);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("itls[0]: ttft + the gaps"), std::string::npos) << r.error().message;
  json chunked = small_result(2);
  chunked["itls"][0] = std::vector<double>(9, 0.02);  // 10 chunks of two tokens: as vLLM streams them
  EXPECT_TRUE(read(chunked).ok());
}

}  // namespace
}  // namespace servesim
