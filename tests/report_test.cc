#include "analysis/reports/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "analysis/storage/database.h"
#include "analysis/storage/db_recorder.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

// The metrics of the seeds' five-request example under continuous batching (see metrics_test).
std::vector<Metric> toy_metrics() {
  // clang-format off
  return {{"completed", 5}, {"rejected", 0}, {"capped", 0}, {"total_input_tokens", 5},
          {"total_output_tokens", 23}, {"duration", 8}, {"request_throughput", 0.625},
          {"output_throughput", 2.875}, {"total_token_throughput", 3.5},
          {"ttft_mean", 1.4}, {"ttft_p50", 1}, {"ttft_p90", 2}, {"ttft_p99", 2},
          {"e2el_mean", 5}, {"e2el_p50", 5}, {"e2el_p90", 6.8}, {"e2el_p99", 7.88},
          {"slot_utilization", 23.0 / 24}, {"preemptions", 0}, {"iterations", 8}};
  // clang-format on
}

TEST(PrintSummary, UnitBackendShowsSteps) {
  std::ostringstream out;
  print_summary(out,
                {.run_id = 3,
                 .db_path = "sim.db",
                 .status = "done",
                 .policy = "continuous",
                 .backend = "unit"},
                toy_metrics());
  EXPECT_EQ(out.str(),
            "============ Serving Benchmark Result ============\n"
            "Run:                                     3 (sim.db)\n"
            "Policy / backend:                        continuous / unit\n"
            "Successful requests:                     5\n"
            "Rejected requests:                       0\n"
            "Benchmark duration (steps):              8.00\n"
            "Total input tokens:                      5\n"
            "Total generated tokens:                  23\n"
            "Request throughput (req/step):           0.62\n"
            "Output token throughput (tok/step):      2.88\n"
            "Total Token throughput (tok/step):       3.50\n"
            "Preemptions:                             0\n"
            "Iterations:                              8\n"
            "Slot utilization:                        95.83%\n"
            "---------------Time to First Token----------------\n"
            "Mean TTFT (steps):                       1.40\n"
            "Median TTFT (steps):                     1.00\n"
            "P90 TTFT (steps):                        2.00\n"
            "P99 TTFT (steps):                        2.00\n"
            "----------------End-to-end Latency----------------\n"
            "Mean E2EL (steps):                       5.00\n"
            "Median E2EL (steps):                     5.00\n"
            "P90 E2EL (steps):                        6.80\n"
            "P99 E2EL (steps):                        7.88\n"
            "==================================================\n");
}

TEST(PrintSummary, OtherBackendsShowSecondsAndMilliseconds) {
  std::vector<Metric> metrics = toy_metrics();
  metrics[2].value = 2;  // capped
  metrics.push_back({"queue_mean", 0.0125});
  metrics.push_back({"kv_utilization_mean", 0.5});
  std::ostringstream out;
  print_summary(out,
                {.run_id = 1,
                 .status = "interrupted",
                 .policy = "chunked-prefill",
                 .backend = "roofline",
                 .hardware = "a100-80g",
                 .model = "llama-3-8b"},
                metrics);
  const std::string s = out.str();
  for (const char* expected : {"Run:                                     1\n",
                               "Status:                                  interrupted\n",
                               "Hardware / model:                        a100-80g / llama-3-8b\n",
                               "Benchmark duration (s):                  8.00\n",
                               "Request throughput (req/s):              0.62\n",
                               "Output token throughput (tok/s):         2.88\n",
                               "Mean TTFT (ms):                          1400.00\n",
                               "P99 E2EL (ms):                           7880.00\n",
                               "Capped at max_tokens:                    2\n",
                               "------------------Queueing Delay------------------\n"
                               "Mean Queue (ms):                         12.50\n"
                               "==================================================\n",
                               "KV cache utilization (mean):             50.00%\n"}) {
    EXPECT_NE(s.find(expected), std::string::npos) << "missing:\n" << expected << "in:\n" << s;
  }
  EXPECT_EQ(s.find("steps"), std::string::npos) << s;
  EXPECT_EQ(s.find("TPOT"), std::string::npos) << s;  // no tpot metrics: no section
}

TEST(PrintSummary, NamesTheReleaseAPolicyMirrors) {
  EXPECT_EQ(policy_release("[policy]\nname = 'chunked-prefill'\nvllm_version = '0.33.0'\n"),
            "vLLM 0.33.0");
  EXPECT_EQ(policy_release("[policy]\nname = 'static'\n"), "");
  EXPECT_EQ(policy_release("not toml ["), "");
  std::ostringstream out;
  print_summary(out, {.run_id = 1, .policy = "chunked-prefill", .backend = "unit",
                      .mirrors = "vLLM 0.33.0"},
                {});
  EXPECT_NE(out.str().find("Policy / backend:                        chunked-prefill (vLLM 0.33.0) "
                           "/ unit\n"),
            std::string::npos)
      << out.str();
}

TEST(ParseReportFormat, KnowsFourFormats) {
  EXPECT_EQ(parse_report_format("text").value(), ReportFormat::kText);
  EXPECT_EQ(parse_report_format("json").value(), ReportFormat::kJson);
  EXPECT_EQ(parse_report_format("csv").value(), ReportFormat::kCsv);
  EXPECT_EQ(parse_report_format("vllm-json").value(), ReportFormat::kVllmJson);
  auto bad = parse_report_format("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "unknown report format 'xml'; expected text, json, csv or vllm-json");
}

class PrintReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("servesim_report_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = (dir_ / "sim.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a run of two finished requests with the given policy; returns its id.
  int64_t write_run(Database& db, const std::string& policy) {
    const int64_t run = db.begin_run({.name = "toy",
                                      .policy = policy,
                                      .backend = "unit",
                                      .workload = "toy.toml",
                                      .config_toml = "seed = 3\n",
                                      .seed = 3,
                                      .version = "0.1.0"})
                            .value();
    MetricsAccumulator metrics({.max_num_seqs = 2});
    DbRecorder rec(db, run, metrics);
    static const RequestSpec specs[] = {{"A", 0, 1, 2, 0, 0}, {"B", 0, 1, 1, 0, 0}};
    for (int step = 0; step < 2; ++step) {
      IterationRecord it{.step = step,
                         .start = step * kNsPerSecond,
                         .duration = kNsPerSecond,
                         .num_seqs = 2 - step,
                         .emitted = 2 - step};
      metrics.on_iteration(it, {});
      rec.on_iteration(it, {});
    }
    for (const RequestSpec& spec : specs) {
      Request r;
      r.spec = &spec;
      r.prompt_tokens = 1;
      r.num_output = r.output_tokens = spec.output_tokens;
      r.status = RequestStatus::kDone;
      r.scheduled = 0;
      r.first_token = kNsPerSecond;
      r.finished = spec.output_tokens * kNsPerSecond;
      metrics.on_request(r);
      rec.on_request(r);
    }
    rec.on_run_end(RunOutcome::kDone, "");
    return run;
  }

  std::string report(std::optional<int64_t> run, ReportFormat format, const std::vector<double>& percentiles = {}) {
    std::ostringstream out;
    const Status s = print_report(db_path_, run, format, out, percentiles);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return out.str();
  }

  fs::path dir_;
  std::string db_path_;
};

// A run left `running` by a process that is gone (SIGKILL, a crash) is reported as abandoned, never
// as running; one whose process is alive (this test's own) stays running.
TEST_F(PrintReportTest, ARunWhoseProcessIsGoneIsShownAsAbandoned) {
  {
    auto db = Database::open(db_path_);
    ASSERT_TRUE(db.ok());
    // A pid that does not exist: above the kernel's pid_max.
    ASSERT_TRUE(db.value()->begin_run({.policy = "static", .backend = "unit", .host = this_host(),
                                       .pid = 1 << 30}).ok());
    ASSERT_TRUE(db.value()->begin_run({.policy = "static", .backend = "unit", .host = this_host(),
                                       .pid = static_cast<int64_t>(getpid())}).ok());
    ASSERT_TRUE(db.value()->begin_run({.policy = "static", .backend = "unit", .host = "elsewhere",
                                       .pid = 1 << 30}).ok());
  }
  const std::string gone = report(1, ReportFormat::kText);
  EXPECT_NE(gone.find("Status:                                  abandoned\n"), std::string::npos) << gone;
  EXPECT_NE(gone.find("Abandoned: process 1073741824 on " + this_host() + " is gone"),
            std::string::npos)
      << gone;
  EXPECT_EQ(nlohmann::json::parse(report(1, ReportFormat::kJson))["run"]["status"], "abandoned");
  EXPECT_NE(report(2, ReportFormat::kText).find("Status:                                  running\n"),
            std::string::npos);
  // Another host's process cannot be looked at from here: it stays running.
  EXPECT_NE(report(3, ReportFormat::kText).find("Status:                                  running\n"),
            std::string::npos);
}

TEST_F(PrintReportTest, RoundTripsInAllFormats) {
  {
    auto db = Database::open(db_path_);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(write_run(*db.value(), "static"), 1);
    EXPECT_EQ(write_run(*db.value(), "continuous"), 2);
  }
  const std::string text = report(std::nullopt, ReportFormat::kText);  // the latest run
  EXPECT_NE(text.find("Run:                                     2 (" + db_path_ + ")\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("continuous / unit"), std::string::npos) << text;
  EXPECT_NE(text.find("Benchmark duration (steps):              2.00\n"), std::string::npos);
  EXPECT_NE(text.find("Slot utilization:                        75.00%\n"), std::string::npos);
  EXPECT_EQ(text.find("Status:"), std::string::npos);  // done

  const auto json = nlohmann::json::parse(report(1, ReportFormat::kJson));
  EXPECT_EQ(json["run"]["id"], 1);
  EXPECT_EQ(json["run"]["policy"], "static");
  EXPECT_EQ(json["run"]["status"], "done");
  EXPECT_EQ(json["run"]["seed"], 3);
  EXPECT_EQ(json["run"]["config"], nlohmann::json({{"seed", 3}}));  // JSON, not the TOML text
  EXPECT_TRUE(json["run"]["hardware"].is_null());
  EXPECT_TRUE(json["run"]["error"].is_null());
  EXPECT_EQ(json["run"].size(), 23u);  // every column of runs
  EXPECT_EQ(json["metrics"]["completed"], 2.0);
  EXPECT_EQ(json["metrics"]["total_output_tokens"], 3.0);
  EXPECT_EQ(json["metrics"]["e2el_mean"], 1.5);

  const std::string csv = report(2, ReportFormat::kCsv);
  EXPECT_EQ(csv.rfind("name,value\ncompleted,2\nrejected,0\ncapped,0\ntotal_input_tokens,2\n", 0),
            0u)
      << csv;
  EXPECT_NE(csv.find("\ntotal_output_tokens,3\nduration,2\nrequest_throughput,1\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\nslot_utilization,0.75\npreemptions,0\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\niterations,2\nprefix_hit_rate,0\nprefix_request_hit_rate,0\n"),
            std::string::npos)
      << csv;
}

// With prefix caching, a workload whose prompts name no content (prefix_cacheable_requests 0)
// gets a note under the hit rates; one with such prompts, or a run without the metric, none.
TEST(PrintSummaryTest, SaysWhenNoPromptCanShareAPrefix) {
  const auto summary = [](std::vector<Metric> extra) {
    std::vector<Metric> metrics = toy_metrics();
    metrics.insert(metrics.end(), extra.begin(), extra.end());
    std::ostringstream out;
    print_summary(out, {.run_id = 1, .policy = "prefix-cached", .backend = "unit"}, metrics);
    return out.str();
  };
  const std::string none = summary({{"prefix_hit_rate", 0}, {"prefix_request_hit_rate", 0}, {"prefix_cacheable_requests", 0}});
  EXPECT_NE(none.find("Prefix cache hit rate (requests):        0.00%\n" + std::string(kNoPromptContent) + "\n"),
            std::string::npos)
      << none;
  const std::string some = summary({{"prefix_hit_rate", 0}, {"prefix_request_hit_rate", 0}, {"prefix_cacheable_requests", 3}});
  EXPECT_EQ(some.find("note:"), std::string::npos) << some;
  EXPECT_EQ(summary({{"prefix_hit_rate", 0}}).find("note:"), std::string::npos);
}

// --format vllm-json has exactly the keys of `vllm bench serve --save-result` (vLLM 0.33.0,
// benchmarks/serve.py, without --save-detailed, --percentile-metrics ttft,tpot,itl,e2el), in its
// order, in its units, and one key of ours at the end.
TEST_F(PrintReportTest, VllmJsonHasVllmsKeysInVllmsOrderAndUnits) {
  {
    auto db = Database::open(db_path_);
    ASSERT_TRUE(db.ok());
    write_run(*db.value(), "continuous");
  }
  const auto j = nlohmann::ordered_json::parse(report(1, ReportFormat::kVllmJson));
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  std::vector<std::string> expected = {
      "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
      "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
      "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
      "output_throughput", "total_token_throughput", "latencies", "queue_times",
      "max_output_tokens_per_s", "max_concurrent_requests", "rtfx"};
  for (const char* m : {"ttft", "tpot", "itl", "e2el"}) {
    for (const char* stat : {"mean", "median", "std", "p99"}) expected.push_back(std::string(stat) + "_" + m + "_ms");
  }
  expected.push_back("servesim");
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(j["completed"], 2);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["num_prompts"], 2);
  EXPECT_EQ(j["label"], "toy");
  EXPECT_TRUE(j["request_goodput"].is_null());  // no --goodput
  EXPECT_EQ(j["request_rate"], "inf");          // both arrive at 0
  EXPECT_EQ(j["latencies"], nlohmann::ordered_json({2.0, 1.0}));  // seconds, in arrival order
  EXPECT_EQ(j["max_concurrent_requests"], 2);
  // e2el [2, 1] s: numpy's mean, median, std (ddof 0) and 99th percentile, in milliseconds.
  EXPECT_DOUBLE_EQ(j["mean_e2el_ms"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(j["median_e2el_ms"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(j["std_e2el_ms"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(j["p99_e2el_ms"].get<double>(), 1990);
  EXPECT_DOUBLE_EQ(j["mean_ttft_ms"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(j["std_ttft_ms"].get<double>(), 0);
  EXPECT_EQ(j["mean_itl_ms"], 0.0);  // no token gaps recorded: vLLM's np.mean([] or 0)

  // --metric-percentiles: vLLM's key names, p25 and p99.9 (the latter found in the
  // distributions' grid), p97 computed from the requests rows.
  const auto p = nlohmann::ordered_json::parse(report(1, ReportFormat::kVllmJson, {25, 97, 99.9}));
  EXPECT_DOUBLE_EQ(p["p25_e2el_ms"].get<double>(), 1250);
  EXPECT_DOUBLE_EQ(p["p97_e2el_ms"].get<double>(), 1970);
  EXPECT_DOUBLE_EQ(p["p99.9_e2el_ms"].get<double>(), 1999);
  EXPECT_FALSE(p.contains("p99_e2el_ms"));
}

// Percentiles asked of the report that the run did not store are computed from its rows, and
// named as vLLM names them in text.
TEST_F(PrintReportTest, ReportPercentilesComeFromTheRowsWhenNotStored) {
  {
    auto db = Database::open(db_path_);
    ASSERT_TRUE(db.ok());
    write_run(*db.value(), "continuous");
  }
  const std::string text = report(1, ReportFormat::kText, {25, 97});
  EXPECT_NE(text.find("P25 E2EL (steps):                        1.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("P97 E2EL (steps):                        1.97\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("P99 E2EL"), std::string::npos) << text;
  const auto json = nlohmann::json::parse(report(1, ReportFormat::kJson, {97}));
  EXPECT_DOUBLE_EQ(json["metrics"]["e2el_p97"].get<double>(), 1.97);
  EXPECT_DOUBLE_EQ(json["metrics"]["e2el_std"].get<double>(), 0.5);
}

TEST_F(PrintReportTest, ErrorsSayWhatToDo) {
  std::ostringstream out;
  Status missing = print_report(db_path_, std::nullopt, ReportFormat::kText, out);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "no database at " + db_path_ + "; run `sim --trace ...` first");

  auto db = Database::open(db_path_);
  ASSERT_TRUE(db.ok());
  Status empty = print_report(db_path_, std::nullopt, ReportFormat::kText, out);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "no runs in " + db_path_ + "; run `sim --trace ...` first");

  for (int i = 0; i < 3; ++i) (void)db.value()->begin_run({});
  ASSERT_EQ(db.value()->exec("DELETE FROM runs WHERE id = 2").ok(), true);
  (void)db.value()->begin_run({});
  Status unknown = print_report(db_path_, 9, ReportFormat::kCsv, out);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message, "no run 9 in " + db_path_ + "; its runs are 1, 3-4");
  EXPECT_EQ(out.str(), "");  // nothing printed on error

  // A run that never finished shows its status and no metrics, without failing.
  const std::string text = report(3, ReportFormat::kText);
  EXPECT_NE(text.find("Status:                                  running\n"), std::string::npos);
  EXPECT_EQ(text.find("Successful requests"), std::string::npos);
}

}  // namespace
}  // namespace servesim
