// The bootstrap over a run's requests (analysis/reports/bootstrap.h): hand-checked statistics, the interval
// against a brute-force bootstrap of the same resamples, determinism, and `sim --bootstrap` /
// `sim report --bootstrap` end to end.
#include "analysis/reports/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/metrics/metrics.h"
#include "cli_harness.h"
#include "workloads/rng.h"

namespace servesim {
namespace {

RequestRow finished(double arrival, double first_token, double done, int64_t output_tokens, double scheduled = -1) {
  RequestRow r;
  r.arrival = arrival;
  r.scheduled = scheduled >= 0 ? scheduled : arrival;
  r.first_token = first_token;
  r.finished = done;
  r.prompt_tokens = 10;
  r.output_tokens = output_tokens;
  r.finished_ok = true;
  return r;
}

// A varied sample: lognormal-ish latencies, some one-token responses, one rejected request.
std::vector<RequestRow> varied_sample(int n, uint64_t seed) {
  Rng rng(seed);
  std::vector<RequestRow> rows;
  for (int i = 0; i < n; ++i) {
    const double arrival = 0.5 * i;
    const double ttft = sample_lognormal(rng, -2.0, 0.8);
    const auto tokens = static_cast<int64_t>(1 + rng.below(40));
    const double decode = static_cast<double>(tokens - 1) * sample_lognormal(rng, -4.0, 0.3);
    RequestRow r = finished(arrival, arrival + ttft, arrival + ttft + decode, tokens, arrival + ttft / 3);
    r.prompt_tokens = static_cast<int64_t>(1 + rng.below(500));
    r.preemptions = rng.below(10) == 0 ? 1 : 0;
    rows.push_back(r);
  }
  RequestRow rejected;
  rejected.arrival = 3.0;
  rejected.rejected = true;
  rows.push_back(rejected);
  return rows;
}

const BootstrapEstimate* find(const BootstrapResult& r, std::string_view name) {
  for (const BootstrapEstimate& e : r.estimates) {
    if (e.metric.name == name) return &e;
  }
  return nullptr;
}

TEST(Bootstrap, HandCheckedStatisticsOfFourRequests) {
  // TTFTs 0.1, 0.2, 0.3, 0.4 s; each decodes 4 more tokens 0.01 s apart.
  std::vector<RequestRow> rows;
  for (int i = 0; i < 4; ++i) rows.push_back(finished(i, i + 0.1 * (i + 1), i + 0.1 * (i + 1) + 0.04, 5));
  const double duration = run_duration(rows);
  EXPECT_DOUBLE_EQ(duration, 3.44);  // 3 + 0.4 + 0.04 - 0
  const std::vector<double> s = request_set_statistics(rows, duration);
  std::map<std::string_view, double> by_name;
  for (size_t i = 0; i < s.size(); ++i) by_name[bootstrap_metrics()[i].name] = s[i];
  EXPECT_EQ(by_name["completed"], 4);
  EXPECT_EQ(by_name["rejected"], 0);
  EXPECT_NEAR(by_name["ttft_mean"], 0.25, 1e-9);
  EXPECT_NEAR(by_name["ttft_p50"], 0.25, 1e-12);   // numpy: halfway between 0.2 and 0.3
  EXPECT_NEAR(by_name["ttft_p90"], 0.37, 1e-12);   // rank 2.7: 0.3 + 0.7 * 0.1
  EXPECT_NEAR(by_name["ttft_p99"], 0.397, 1e-12);  // rank 2.97
  EXPECT_NEAR(by_name["tpot_mean"], 0.01, 1e-9);
  EXPECT_NEAR(by_name["itl_mean"], 0.01, 1e-9);  // 16 gaps summing to 0.16 s
  EXPECT_NEAR(by_name["output_throughput"], 20 / 3.44, 1e-12);
  EXPECT_NEAR(by_name["total_token_throughput"], 60 / 3.44, 1e-12);
  EXPECT_NEAR(by_name["request_throughput"], 4 / 3.44, 1e-12);
}

TEST(Bootstrap, AConstantSampleGivesZeroWidthIntervals) {
  std::vector<RequestRow> rows(50, finished(0, 0.2, 1.2, 11));
  const Result<BootstrapResult> r = bootstrap_requests(rows, {.resamples = 200, .seed = 3, .threads = 2});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(r.value().estimates.empty());
  for (const BootstrapEstimate& e : r.value().estimates) {
    EXPECT_EQ(e.low, e.point) << e.metric.name;
    EXPECT_EQ(e.high, e.point) << e.metric.name;
    EXPECT_EQ(e.resamples, 200) << e.metric.name;
  }
  EXPECT_NEAR(find(r.value(), "ttft_p99")->point, 200, 1e-9);  // ms
}

// The interval recomputed by brute force: each resample's rows materialised from
// resample_indices, each statistic computed from scratch (sort, numpy's percentile, a plain mean).
TEST(Bootstrap, IntervalsEqualABruteForceBootstrapOfTheSameResamples) {
  const std::vector<RequestRow> rows = varied_sample(60, 11);
  const BootstrapOptions options{.resamples = 300, .seed = 5, .threads = 3};
  const Result<BootstrapResult> fast = bootstrap_requests(rows, options);
  ASSERT_TRUE(fast.ok()) << fast.error().message;
  const double duration = run_duration(rows);

  std::map<std::string, std::vector<double>> brute;  // seconds, per second, counts
  for (int64_t b = 0; b < options.resamples; ++b) {
    std::vector<RequestRow> resample;
    for (uint32_t i : resample_indices(options.seed, b, static_cast<int64_t>(rows.size()))) {
      resample.push_back(rows[i]);
    }
    for (const char* latency : {"ttft", "tpot", "e2el", "queue"}) {
      std::vector<double> v = latency_values(resample, latency);
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      double sum = 0;
      for (double x : v) sum += x;
      brute[std::string(latency) + "_mean"].push_back(sum / static_cast<double>(v.size()));
      for (int p : {50, 90, 99}) brute[std::string(latency) + "_p" + std::to_string(p)].push_back(percentile(v, p));
    }
    double out = 0, gap_sum = 0, gaps = 0, done = 0, preempted = 0;
    for (const RequestRow& r : resample) {
      preempted += static_cast<double>(r.preemptions);
      if (!r.finished_ok) continue;
      done += 1;
      out += static_cast<double>(r.output_tokens);
      if (r.output_tokens > 1) {
        gap_sum += r.finished - r.first_token;
        gaps += static_cast<double>(r.output_tokens - 1);
      }
    }
    brute["completed"].push_back(done);
    brute["output_throughput"].push_back(out / duration);
    brute["itl_mean"].push_back(gap_sum / gaps);
    brute["preemptions"].push_back(preempted);
  }
  for (auto& [name, values] : brute) {
    SCOPED_TRACE(name);
    const BootstrapEstimate* e = find(fast.value(), name);
    ASSERT_NE(e, nullptr);
    std::sort(values.begin(), values.end());
    const double low = percentile(values, 2.5) * e->metric.scale, high = percentile(values, 97.5) * e->metric.scale;
    const bool mean = name.find("_mean") != std::string::npos;
    // Means are summed in fixed point (2^-32 s): within 1e-9 s of the plain sum; the rest exactly.
    const double tolerance = mean ? 1e-9 * e->metric.scale : 1e-9 * std::abs(high);
    EXPECT_NEAR(e->low, low, tolerance);
    EXPECT_NEAR(e->high, high, tolerance);
    if (!mean && name != "output_throughput") {
      EXPECT_EQ(e->low, low);
      EXPECT_EQ(e->high, high);
    }
    EXPECT_LT(e->low, e->high);
  }
}

TEST(Bootstrap, TheSameSeedGivesTheSameIntervalsOnAnyNumberOfThreads) {
  const std::vector<RequestRow> rows = varied_sample(500, 2);
  auto run = [&](int threads, uint64_t seed) {
    Result<BootstrapResult> r = bootstrap_requests(rows, {.resamples = 100, .seed = seed, .threads = threads});
    EXPECT_TRUE(r.ok());
    return bootstrap_json(r.value()).dump();
  };
  const std::string one = run(1, 9);
  EXPECT_EQ(one, run(2, 9));
  EXPECT_EQ(one, run(5, 9));
  EXPECT_EQ(one, run(0, 9));
  EXPECT_NE(one, run(1, 10));
  EXPECT_EQ(resample_indices(9, 4, 500), resample_indices(9, 4, 500));
  EXPECT_NE(resample_indices(9, 4, 500), resample_indices(9, 5, 500));
}

TEST(Bootstrap, TheIntervalContainsThePointEstimate) {
  const std::vector<RequestRow> rows = varied_sample(2000, 7);
  const Result<BootstrapResult> r = bootstrap_requests(rows, {.resamples = 400, .seed = 1, .threads = 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().requests, 2001);
  for (const BootstrapEstimate& e : r.value().estimates) {
    EXPECT_LE(e.low, e.point) << e.metric.name;
    EXPECT_GE(e.high, e.point) << e.metric.name;
  }
  // 2,000 requests: the mean TTFT is known to a few percent, its p99 less well.
  const BootstrapEstimate* mean = find(r.value(), "ttft_mean");
  const BootstrapEstimate* p99 = find(r.value(), "ttft_p99");
  EXPECT_LT((mean->high - mean->low) / mean->point, 0.1);
  EXPECT_GT((p99->high - p99->low) / p99->point, (mean->high - mean->low) / mean->point);
}

TEST(Bootstrap, BadCountsAndRunsWithoutFinishedRequestsAreErrors) {
  const std::vector<RequestRow> rows = varied_sample(20, 1);
  for (int64_t n : {0, 9, 100001}) {
    const Result<BootstrapResult> r = bootstrap_requests(rows, {.resamples = n});
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.error().message.find("expected 10 to 100000"), std::string::npos) << r.error().message;
  }
  RequestRow rejected;
  rejected.rejected = true;
  const std::vector<RequestRow> none(3, rejected);
  const Result<BootstrapResult> r = bootstrap_requests(none, {.resamples = 100});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("finished no request"), std::string::npos) << r.error().message;
}

using servesim::testing::Cli;
using BootstrapCli = Cli;

// 40 explicit requests: a tiny trace.
std::string tiny_trace() {
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "[[request]]\narrival = " + std::to_string(0.05 * i) + "\nprompt_tokens = " +
            std::to_string(100 + 37 * (i % 9)) + "\noutput_tokens = " + std::to_string(5 + 13 * (i % 7)) + "\n";
  }
  return text;
}

TEST_F(BootstrapCli, ATraceRunPrintsIntervalsAndReportReadsTheSame) {
  const std::string trace = write("tiny.toml", tiny_trace());
  const auto o = sim({"--trace", trace, "--model", "llama-2-7b", "--bootstrap", "200", "--seed", "4", "-j", "2"});
  ASSERT_EQ(o.status, 0) << o.output;
  const size_t at = o.output.find("Bootstrap over the 40 requests of run 1: 200 resamples (seed 4)");
  ASSERT_NE(at, std::string::npos) << o.output;
  EXPECT_NE(o.output.find("ttft_p99 (ms)", at), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("itl_mean (ms)", at), std::string::npos) << o.output;

  // The same numbers from the stored run, on one thread.
  const auto text = sim({"report", "--bootstrap", "200", "--seed", "4", "-j", "1"});
  ASSERT_EQ(text.status, 0) << text.output;
  const size_t at_report = text.output.find("Bootstrap over the 40 requests");
  ASSERT_NE(at_report, std::string::npos) << text.output;
  EXPECT_EQ(o.output.substr(at), text.output.substr(at_report));

  const auto json = sim({"report", "--bootstrap", "200", "--seed", "4", "--format", "json"});
  ASSERT_EQ(json.status, 0) << json.output;
  const nlohmann::json b = nlohmann::json::parse(json.output).at("bootstrap");
  EXPECT_EQ(b.at("requests"), 40);
  EXPECT_EQ(b.at("resamples"), 200);
  std::set<std::string> seen;
  for (const nlohmann::json& e : b.at("estimates")) {
    const std::string name = e.at("metric");
    seen.insert(name);
    const double estimate = e.at("estimate");
    EXPECT_LE(e.at("ci_low").get<double>(), estimate) << name;
    EXPECT_GE(e.at("ci_high").get<double>(), estimate) << name;
    // The point estimate is the run's own metric (recomputed from the rows).
    const double stored = metric(name) * (e.at("unit") == "ms" ? 1000 : 1);
    EXPECT_NEAR(estimate, stored, 1e-6 * std::max(1.0, std::abs(stored))) << name;
  }
  for (const char* name : {"ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99", "tpot_p99", "e2el_p99", "itl_mean",
                           "output_throughput", "completed"}) {
    EXPECT_EQ(seen.count(name), 1u) << name;
  }
  EXPECT_EQ(seen.count("itl_p99"), 0u);  // needs each token gap: not in the rows

  EXPECT_EQ(sim({"report", "--bootstrap", "200", "--format", "csv"}).status, 2);
  const auto html = sim({"report", "--bootstrap", "50", "--html", "run.html"});
  ASSERT_EQ(html.status, 0) << html.output;
  std::ifstream page(dir_ / "run.html");
  const std::string content((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(content.find("Bootstrap over requests, run 1"), std::string::npos);
}

TEST_F(BootstrapCli, AGeneratedWorkloadIsResampledToo) {
  const auto o = sim({"--trace", "pareto.toml", "--num-prompts", "200", "--bootstrap", "100"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Bootstrap over the 200 requests of run 1: 100 resamples (seed 0)"), std::string::npos)
      << o.output;
}

TEST_F(BootstrapCli, ARunLoggedWithSummaryHasNoRowsToResample) {
  const std::string trace = write("tiny.toml", tiny_trace());
  const auto o = sim({"--trace", trace, "--log", "summary", "--bootstrap", "100"});
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("--log summary does not write"), std::string::npos) << o.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sim.db"));  // refused before running

  ASSERT_EQ(sim({"--trace", trace, "--log", "summary"}).status, 0);
  const auto report = sim({"report", "--bootstrap", "100"});
  EXPECT_EQ(report.status, 2) << report.output;
  EXPECT_NE(report.output.find("logged none (--log summary)"), std::string::npos) << report.output;
}

TEST_F(BootstrapCli, SeedsWithATracePointToBootstrapAndBadUsesAreRefused) {
  const auto seeds = sim({"--seeds", "3", "--trace", "seed-toy.toml"});
  EXPECT_EQ(seeds.status, 2) << seeds.output;
  EXPECT_NE(seeds.output.find("--bootstrap 1000"), std::string::npos) << seeds.output;
  const auto both = sim({"--seeds", "3", "--bootstrap", "100", "--trace", "pareto.toml"});
  EXPECT_EQ(both.status, 2) << both.output;
  EXPECT_NE(both.output.find("not both"), std::string::npos) << both.output;
  const auto few = sim({"--trace", "seed-toy.toml", "--bootstrap", "5"});
  EXPECT_EQ(few.status, 2) << few.output;
  EXPECT_NE(few.output.find("expected 10 to 100000"), std::string::npos) << few.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sim.db"));
}

}  // namespace
}  // namespace servesim
