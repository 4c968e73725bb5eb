// `sim report --html`: the reducers' bounds, escaping, the errors, and pages of made-up databases
// (a failed run, a hostile run name, runs of different workloads, a long run). The browser's view
// of real runs' pages is tests/html_report_browser_test.py's.
#include "analysis/reports/html_report.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/storage/database.h"
#include "analysis/reports/html_report_assets.h"
#include "analysis/reports/html_report_data.h"
#include "analysis/reports/html_report_page.h"
#include "analysis/storage/sweep_db.h"
#include "cli_harness.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;
using html::Point;

TEST(HtmlReportData, CdfOfManyValuesIsCutToTheQuantiles) {
  std::vector<double> v;
  for (int i = 0; i < 100'000; ++i) v.push_back(i * 0.001);
  const std::vector<Point> p = html::cdf_points(v, 500);
  ASSERT_EQ(p.size(), 500u);
  EXPECT_EQ(p.front().x, 0.0);
  EXPECT_EQ(p.front().y, 0.0);
  EXPECT_DOUBLE_EQ(p.back().x, 99.999);
  EXPECT_EQ(p.back().y, 1.0);
  for (size_t i = 1; i < p.size(); ++i) {
    EXPECT_GE(p[i].x, p[i - 1].x);
    EXPECT_GT(p[i].y, p[i - 1].y);
  }
  EXPECT_NEAR(p[250].x, 50.1, 0.1);  // the median, near the middle
}

TEST(HtmlReportData, CdfOfFewValuesKeepsEachValueAsAStep) {
  const std::vector<double> v = {1, 2, 2, 5};
  const std::vector<Point> p = html::cdf_points(v, 500);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].x, 1);
  EXPECT_EQ(p[0].y, 0.0);
  EXPECT_EQ(p[1].x, 1);
  EXPECT_EQ(p[1].y, 0.25);
  EXPECT_EQ(p[4].x, 5);
  EXPECT_EQ(p[4].y, 1.0);
  // 499 values and their start fit in 500 points; 500 values do not.
  EXPECT_EQ(html::cdf_points(std::vector<double>(499, 1.0), 500).size(), 500u);
  EXPECT_EQ(html::cdf_points(std::vector<double>(500, 1.0), 500).size(), 500u);
  EXPECT_EQ(html::cdf_points(std::vector<double>(500, 1.0), 500).front().y, 0.0);
}

TEST(HtmlReportData, StoredQuantilesAreCutEvenlyKeepingBothEnds) {
  std::vector<Point> qv;  // (quantile, value)
  for (int i = 0; i <= 1000; ++i) qv.push_back({i / 1000.0, i * 2.0});
  const std::vector<Point> p = html::quantile_points(qv, 500);
  ASSERT_EQ(p.size(), 500u);
  EXPECT_EQ(p.front().x, 0.0);
  EXPECT_EQ(p.front().y, 0.0);
  EXPECT_EQ(p.back().x, 2000.0);
  EXPECT_EQ(p.back().y, 1.0);
}

TEST(HtmlReportData, LongSeriesAreReducedToAtMostMaxPointsBins) {
  std::vector<html::BucketValue> rows;
  for (int64_t b = 0; b < 100'000; b += 2) rows.push_back({b, 2.0});  // every other bucket idle
  const html::ReducedSeries r = html::reduce_buckets(rows, 0, 99'999, 0.5, 1000);
  ASSERT_EQ(r.x.size(), 1000u);
  EXPECT_TRUE(r.reduced);
  EXPECT_EQ(r.buckets_per_bin, 100);
  for (size_t i = 0; i < r.x.size(); ++i) {
    EXPECT_DOUBLE_EQ(r.mean[i], 1.0) << i;  // idle buckets count as zeros
    EXPECT_EQ(r.lo[i], 0.0);
    EXPECT_EQ(r.hi[i], 2.0);
  }
  EXPECT_DOUBLE_EQ(r.x[0], 25.0);  // the middle of buckets 0-99 of 0.5 s
}

TEST(HtmlReportData, ReductionBoundHoldsJustAboveTheLimit) {
  std::vector<html::BucketValue> rows;
  for (int64_t b = 10; b <= 1010; ++b) rows.push_back({b, static_cast<double>(b)});  // 1001 buckets
  const html::ReducedSeries r = html::reduce_buckets(rows, 10, 1010, 1.0, 1000);
  EXPECT_EQ(r.buckets_per_bin, 2);
  EXPECT_EQ(r.x.size(), 501u);
  EXPECT_DOUBLE_EQ(r.mean.back(), 1010.0 / 1);  // the last bin holds one bucket: its mean is its own
  EXPECT_DOUBLE_EQ(r.mean.front(), 10.5);
}

TEST(HtmlReportData, ShortSeriesAreNotReduced) {
  const std::vector<html::BucketValue> rows = {{0, 3}, {2, 5}};
  const html::ReducedSeries r = html::reduce_buckets(rows, 0, 2, 1.0, 1000);
  EXPECT_FALSE(r.reduced);
  EXPECT_EQ(r.mean, (std::vector<double>{3, 0, 5}));
  EXPECT_EQ(r.x, (std::vector<double>{0.5, 1.5, 2.5}));
}

TEST(HtmlReportData, StrideKeepsAtMostTheLimit) {
  EXPECT_EQ(html::sample_stride(10'000, 3000), 4);  // keeps 2,500
  EXPECT_EQ(html::sample_stride(9'000, 3000), 3);   // keeps 3,000
  EXPECT_EQ(html::sample_stride(9'001, 3000), 4);
  EXPECT_EQ(html::sample_stride(10, 3000), 1);
  EXPECT_EQ(html::sample_stride(0, 3000), 1);
}

TEST(HtmlReportData, RoundsToSignificantDigits) {
  EXPECT_EQ(html::round_sig(123456.0), 123500.0);
  EXPECT_DOUBLE_EQ(html::round_sig(0.000123456), 0.0001235);
  EXPECT_EQ(html::round_sig(0.0), 0.0);
  EXPECT_EQ(nlohmann::json(html::round_sig(1.0 / 3)).dump(), "0.3333");
}

TEST(HtmlReportPage, EscapesTextAndTheDataBlob) {
  EXPECT_EQ(html::escape_html("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  const nlohmann::json j = {{"name", "</script><script>alert(1)</script>&"}};
  const std::string text = html::script_safe_json(j);
  EXPECT_EQ(text.find('<'), std::string::npos) << text;
  EXPECT_EQ(text.find('&'), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(text), j);  // the same data once parsed
}

TEST(HtmlReportAssets, ChartJsIsBuiltInByteForByte) {
  std::ifstream in{std::string(assets::chartjs_path()), std::ios::binary};
  ASSERT_TRUE(in) << assets::chartjs_path();
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(assets::chartjs().size(), file.str().size());
  EXPECT_TRUE(assets::chartjs() == file.str());
  EXPECT_NE(assets::chartjs().find("Chart.js v3.9.1"), std::string_view::npos);
  EXPECT_NE(assets::report_js().find("servesim-selfcheck"), std::string_view::npos);
}

TEST(HtmlReportPage, LongCellsWrapWithTheirTextAsTooltipAndHeadersBreakAtUnderscores) {
  const std::string path = "/home/planner/capacity/traces/2024-11/AzureLLMInferenceTrace_conv_rescaled_3x.csv";
  html::Page page{.title = "t"};
  page.tables.push_back(html::Table{.title = "Runs",
                                    .header = {"", "cost_per_million_output_tokens"},
                                    .rows = {{"Workload", path}, {"Policy", "continuous"}},
                                    .highlight = {1}});
  const std::string p = html::render_page(page);
  EXPECT_NE(p.find("<td class=\"long l\" title=\"" + path + "\">" + path + "</td>"), std::string::npos);
  EXPECT_NE(p.find("<td class=\"l\">continuous</td>"), std::string::npos);  // text: aligned left
  EXPECT_NE(p.find("<th class=\"l\">cost_<wbr>"), std::string::npos);
  EXPECT_NE(p.find("<tr class=\"best\"><td>Policy</td>"), std::string::npos);
  EXPECT_NE(p.find(">cost_<wbr>per_<wbr>million_<wbr>output_<wbr>tokens</th>"), std::string::npos);
  EXPECT_NE(p.find("td.long { white-space: normal; overflow-wrap: anywhere;"), std::string::npos);
}

// Databases made row by row, and reports of them.
class HtmlReport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servesim_html_report_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = (dir_ / "sim.db").string();
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }

  // A run with `requests` finished requests (TTFT i ms, and so on) and its metrics.
  int64_t add_run(const std::string& name, const std::string& workload, const std::string& status = "done",
                  int requests = 20, const std::string& error = "") {
    auto db = Database::open(db_path_);
    EXPECT_TRUE(db.ok()) << db.error().message;
    const int64_t id =
        db.value()
            ->begin_run(
                RunInfo{.name = name, .policy = "continuous", .backend = "roofline", .workload = workload})
            .value();
    std::string sql = "BEGIN;";
    for (int i = 0; i < requests; ++i) {
      const double a = i * 0.1;
      sql +=
          "INSERT INTO requests(run_id, id, replica, arrival, scheduled, first_token, finished, "
          "prompt_tokens, "
          "output_tokens, status) VALUES (" +
          std::to_string(id) + ", 'r" + std::to_string(i) + "', 0, " + std::to_string(a) + ", " +
          std::to_string(a + 0.001) + ", " + std::to_string(a + 0.01 * (i + 1)) + ", " +
          std::to_string(a + 1) + ", 100, 10, 'finished');";
    }
    sql += "INSERT INTO metrics VALUES (" + std::to_string(id) + ", 'completed', " +
           std::to_string(requests) + ");";
    sql += "INSERT INTO metrics VALUES (" + std::to_string(id) + ", 'rejected', 0);";
    sql += "UPDATE runs SET status = '" + status +
           "', error = " + (error.empty() ? "NULL" : "'" + error + "'") +
           " WHERE id = " + std::to_string(id) + "; COMMIT;";
    EXPECT_TRUE(db.value()->exec(sql.c_str()).ok()) << db.value()->error_message();
    return id;
  }

  Status report(HtmlReportOptions o) {
    if (o.out_path.empty()) o.out_path = out();
    o.db_path = db_path_;
    std::ostringstream log;
    return write_html_report(o, log);
  }
  std::string out() const { return (dir_ / "report.html").string(); }
  std::string page() const {
    std::ifstream in(out());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The page's data blob.
  nlohmann::json data() const {
    const std::string p = page();
    const std::string open = "<script type=\"application/json\" id=\"servesim-data\">";
    const size_t from = p.find(open) + open.size();
    return nlohmann::json::parse(p.substr(from, p.find("</script>", from) - from));
  }
  bool nothing_written() const {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().find("report") != std::string::npos) return false;
    }
    return true;
  }

  fs::path dir_;
  std::string db_path_;
};

TEST_F(HtmlReport, MissingOutputDirectoryIsAnErrorNamingIt) {
  add_run("a", "w.toml");
  const std::string where = (dir_ / "no" / "such").string();
  const Status s = report({.out_path = where + "/report.html"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no directory " + where), std::string::npos) << s.error().message;
  EXPECT_FALSE(fs::exists(dir_ / "no"));
}

TEST_F(HtmlReport, UnwritableDirectoryIsAnErrorNamingIt) {
  add_run("a", "w.toml");
  // /proc takes no new files, not even root's.
  Status s = report({.out_path = "/proc/servesim_report.html"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("/proc"), std::string::npos) << s.error().message;
  if (::geteuid() != 0) {  // root writes into a read-only folder
    const fs::path ro = dir_ / "ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    s = report({.out_path = (ro / "report.html").string()});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find(ro.string() + " is not writable"), std::string::npos)
        << s.error().message;
    fs::permissions(ro, fs::perms::owner_all);
    EXPECT_TRUE(fs::is_empty(ro));
  }
}

TEST_F(HtmlReport, AnOutputPathThatIsADirectoryIsAnError) {
  add_run("a", "w.toml");
  const Status s = report({.out_path = dir_.string()});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("is a directory"), std::string::npos) << s.error().message;
}

TEST_F(HtmlReport, UnknownRunIsAnErrorNamingTheRunsThatExist) {
  add_run("a", "w.toml");
  add_run("b", "w.toml");
  const Status s = report({.run_ids = {1, 9}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no run 9 in " + db_path_ + "; its runs are 1-2"), std::string::npos)
      << s.error().message;
  EXPECT_TRUE(nothing_written());
}

TEST_F(HtmlReport, NoDatabaseIsAnError) {
  const Status s = report({});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no database at"), std::string::npos) << s.error().message;
  EXPECT_TRUE(nothing_written());
}

TEST_F(HtmlReport, NoSweepIsAnError) {
  add_run("a", "w.toml");
  const Status s = report({.sweep_id = 0});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("has no sweeps"), std::string::npos) << s.error().message;
}

TEST_F(HtmlReport, AFailedRunGivesAPageThatSaysSo) {
  add_run("broken", "w.toml", "failed", 0, "the model does not fit in a100-40gb");
  ASSERT_TRUE(report({}).ok());
  const std::string p = page();
  EXPECT_NE(p.find("<div class=\"banner alert\">This run failed: the model does not fit in a100-40gb</div>"),
            std::string::npos);
  EXPECT_NE(p.find("No request was rejected."), std::string::npos);
  EXPECT_NE(p.find("id=\"servesim-selfcheck\""), std::string::npos);
  EXPECT_TRUE(data()["charts"].empty());  // no chart without data: no empty canvas
  EXPECT_NE(p.rfind("</html>\n"), std::string::npos);
}

TEST_F(HtmlReport, AnEmptyRunSaysItCompletedNothing) {
  add_run("idle", "w.toml", "done", 0);
  ASSERT_TRUE(report({}).ok());
  EXPECT_NE(page().find("This run completed no requests (status done)"), std::string::npos);
}

// A prefix cache over prompts that name no content says its hit rate is no finding, and the
// deployment its whole nodes, on the page as in the summary.
TEST_F(HtmlReport, ThePageSaysWhatTheTraceCannotShowAndTheNodes) {
  const int64_t id = add_run("azure", "azure-conv.csv");
  auto db = Database::open(db_path_);
  ASSERT_TRUE(db.ok());
  const std::string sql = "INSERT INTO metrics VALUES (" + std::to_string(id) + ", 'prefix_cacheable_requests', 0), (" +
                          std::to_string(id) + ", 'prefix_hit_rate', 0), (" + std::to_string(id) +
                          ", 'gpus', 12), (" + std::to_string(id) + ", 'nodes', 2);";
  ASSERT_TRUE(db.value()->exec(sql.c_str()).ok());
  db.value().reset();
  ASSERT_TRUE(report({}).ok());
  const std::string p = page();
  EXPECT_NE(p.find("its prefix cache hit rate is not a finding"), std::string::npos);
  EXPECT_NE(p.find("= 12 GPUs (2 nodes)"), std::string::npos);
}

TEST_F(HtmlReport, AHostileRunNameIsEscapedEverywhere) {
  const std::string name = "</script><script>alert(1)</script>&amp;";
  add_run(name, "w.toml");
  ASSERT_TRUE(report({}).ok());
  const std::string p = page();
  // Exactly the page's own three scripts end: the report's, the data blob, Chart.js.
  size_t ends = 0;
  for (size_t at = p.find("</script"); at != std::string::npos; at = p.find("</script", at + 1)) ++ends;
  EXPECT_EQ(ends, 3u);
  EXPECT_EQ(p.find("<script>alert"), std::string::npos);
  EXPECT_NE(p.find("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;"), std::string::npos);
  // The data blob reads back as the name itself (a CDF series is labelled with it).
  EXPECT_EQ(data()["charts"][0]["series"][0]["label"], "run 1 (" + name + ")");
}

TEST_F(HtmlReport, RunsOfDifferentWorkloadsAreComparedWithAWarning) {
  add_run("a", "chat.toml");
  add_run("b", "code.toml");
  add_run("c", "chat.toml");
  ASSERT_TRUE(report({.run_ids = {1, 3}}).ok());
  EXPECT_EQ(page().find("different workloads"), std::string::npos);
  ASSERT_TRUE(report({.run_ids = {1, 2}}).ok());
  const std::string p = page();
  EXPECT_NE(p.find("<div class=\"banner warning\">These runs serve different workloads (run 1: chat.toml; "
                   "run 2: code.toml)"),
            std::string::npos);
  // One column per run, one CDF line per run.
  EXPECT_NE(p.find("<th>run 1</th><th>run 2</th>"), std::string::npos);
  EXPECT_EQ(data()["charts"][0]["series"].size(), 2u);
}

// Compared runs: each run after the first shows its difference from the first, relative.
TEST_F(HtmlReport, ComparedRunsShowTheirDifferenceFromTheFirst) {
  add_run("a", "w.toml", "done", 20);
  add_run("b", "w.toml", "done", 30);
  ASSERT_TRUE(report({.run_ids = {1, 2}}).ok());
  const std::string p = page();
  EXPECT_NE(p.find("<td>Successful requests</td><td>20</td><td>30 (+50.00%)</td>"), std::string::npos) << p.substr(0, 4000);
  EXPECT_NE(p.find("In parentheses: the difference from run 1"), std::string::npos);
  ASSERT_TRUE(report({.run_ids = {2, 1}}).ok());
  EXPECT_NE(page().find("<td>Successful requests</td><td>30</td><td>20 (-33.33%)</td>"), std::string::npos);
}

TEST_F(HtmlReport, ComparedRunsOfDifferentBucketWidthsSayEach) {
  // By default a run's timeline buckets follow its workload's span: runs compared may differ.
  const int64_t a = add_run("short", "w.toml", "done", 20);
  const int64_t b = add_run("long", "w.toml", "done", 20);
  auto db = Database::open(db_path_);
  ASSERT_TRUE(db.ok());
  std::string sql = "BEGIN;";
  for (int i = 0; i < 50; ++i) {
    for (const auto& [id, width] : {std::pair{a, 1}, {b, 10}}) {
      sql += "INSERT INTO timeline VALUES (" + std::to_string(id) + ", 0, " + std::to_string(i) + ", " +
             std::to_string(i * width) + ", 10, 0.9, 100, 50, 50, 8, 2, 40.5, 45, 100, 0);";
    }
  }
  ASSERT_TRUE(db.value()->exec((sql + "COMMIT;").c_str()).ok());
  db.value().reset();
  ASSERT_TRUE(report({.run_ids = {a, b}}).ok());
  const std::string p = page();
  EXPECT_NE(p.find("Time buckets of 1 s for " + std::string("run ") + std::to_string(a)), std::string::npos)
      << p.substr(p.find("Time buckets"), 300);
  EXPECT_NE(p.find("; 10 s for run " + std::to_string(b)), std::string::npos);
  EXPECT_EQ(p.find("Time buckets of 1 s."), std::string::npos);
}

TEST_F(HtmlReport, StoredDistributionsAreUsedForEveryCdfIncludingItl) {
  const int64_t id = add_run("d", "w.toml", "done", 50);
  auto db = Database::open(db_path_);
  ASSERT_TRUE(db.ok());
  // As the distributions table is specified (IF NOT EXISTS: newer schemas create it themselves).
  std::string sql =
      "CREATE TABLE IF NOT EXISTS distributions(run_id INTEGER, metric TEXT, quantile REAL, value REAL);"
      "BEGIN;";
  for (int i = 0; i <= 1000; ++i) {
    for (const char* m : {"itl", "ttft"}) {
      sql += "INSERT INTO distributions(run_id, metric, quantile, value) VALUES (" + std::to_string(id) +
             ", '" + m + "', " + std::to_string(i / 1000.0) + ", " + std::to_string(0.002 * i) + ");";
    }
  }
  ASSERT_TRUE(db.value()->exec((sql + "COMMIT;").c_str()).ok()) << db.value()->error_message();
  db.value().reset();
  ASSERT_TRUE(report({}).ok());
  const std::string p = page();
  EXPECT_EQ(p.find("ITL is measured per token gap"), std::string::npos);  // no note: a chart
  const nlohmann::json charts = data()["charts"];
  ASSERT_EQ(charts.size(), 5u);  // TTFT, TPOT, ITL, E2EL, queue (no timeline or iterations rows)
  // TTFT and ITL: the stored quantiles (values up to 2 s), cut to 500; TPOT: from the requests.
  for (const int c : {0, 2}) {
    const nlohmann::json& s = charts[c]["series"][0];
    EXPECT_EQ(s["x"].size(), html::kMaxCdfPoints);
    EXPECT_EQ(s["x"].back(), 2000.0);  // milliseconds
    EXPECT_EQ(s["y"].back(), 1.0);
  }
  EXPECT_NE(p.find("Inter-token latency (ITL)"), std::string::npos);
  EXPECT_NE(p.find("(from stored quantiles, drawn at up to 500 quantiles)"), std::string::npos);
  EXPECT_NE(p.find("(from 50 requests, drawn at up to 500 quantiles)"), std::string::npos);
}

TEST_F(HtmlReport, ALongRunStaysWithinThePointBounds) {
  const int64_t id = add_run("long", "w.toml", "done", 3000);
  auto db = Database::open(db_path_);
  ASSERT_TRUE(db.ok());
  std::string sql = "BEGIN;";
  for (int b = 0; b < 5000; ++b) {
    sql += "INSERT INTO timeline VALUES (" + std::to_string(id) + ", 0, " + std::to_string(b) + ", " +
           std::to_string(b) + ", 10, 0.9, 100, 50, 50, 8, 2, 40.5, 45, 100, 0);";
  }
  for (int s = 0; s < 10'000; ++s) {
    sql += "INSERT INTO iterations VALUES (" + std::to_string(id) + ", 0, " + std::to_string(s) + ", " +
           std::to_string(s * 0.01) + ", 0.01, 4, " + std::to_string(s % 3 == 0 ? 100 : 0) + ", " +
           std::to_string(s % 2 == 0 ? 4 : 0) + ", 10, 100, NULL);";
  }
  ASSERT_TRUE(db.value()->exec((sql + "COMMIT;").c_str()).ok());
  db.value().reset();
  ASSERT_TRUE(report({}).ok());
  const nlohmann::json charts = data()["charts"];
  size_t cdfs = 0, series = 0, scatter_points = 0;
  for (const auto& c : charts) {
    for (const auto& s : c["series"]) {
      const bool scatter = s["draw"] == "points";
      ASSERT_LE(s["y"].size(),
                scatter ? static_cast<size_t>(html::kMaxScatterPoints) : html::kMaxSeriesPoints);
      if (scatter) scatter_points += s["y"].size();
      const bool total = s["label"].get<std::string>().ends_with(", total");  // a two-point line
      if (c["x"]["title"].get<std::string>().find("time") == 0 && !total) {
        ++series;
        EXPECT_GE(s["y"].size(), 500u);  // 5,000 buckets: 5 per bin
      }
      if (c.value("logToggle", false) && c["y"].value("max", 0) == 1) {
        ++cdfs;
        EXPECT_LE(s["y"].size(), html::kMaxCdfPoints);
      }
    }
  }
  EXPECT_EQ(cdfs, 4u);  // TTFT, TPOT, E2E latency, queue (no ITL without the distributions table)
  EXPECT_GE(series, 5u);
  EXPECT_LE(scatter_points, 3u * html::kMaxScatterPoints);
  EXPECT_GT(scatter_points, 2000u);
}

// A max-rate search made row by row: probes at 1, 2 and 4 req/s with p99 TTFT 0.5, 0.8 and 3 s; the
// probe at 2 req/s rejected 5 of its 25 requests, so under today's rule (a probe that rejects any
// request misses, unless a rejected SLO allows a share) it misses, whatever the search stored.
TEST_F(HtmlReport, ASearchPageRederivesVerdictsAndFlagsAStoredAnswerThatDisagrees) {
  for (const auto& [answer, banner] : {std::pair<std::string, bool>{"max request_rate 2 req/s meets the SLOs", true},
                                       {"max request_rate 1 req/s meets the SLOs", false}}) {
    fs::remove(db_path_);
    for (int i = 0; i < 3; ++i) add_run("probe " + std::to_string(i), "w.toml", "done", 25);
    auto db = Database::open(db_path_);
    ASSERT_TRUE(db.ok());
    Result<int64_t> id = begin_sweep(*db.value(), SweepInfo{.name = "",
                                                           .kind = "search",
                                                           .spec = "mode = 'max_rate'\n[slo]\np99_ttft = 1.0\n",
                                                           .keys = {"request_rate"},
                                                           .points = 3});
    ASSERT_TRUE(id.ok()) << id.error().message;
    ASSERT_TRUE(end_sweep(*db.value(), id.value(), "done", answer).ok());
    const std::string sql =
        "INSERT INTO sweep_points(sweep_id, point, run_id, status, request_rate) VALUES (1, 0, 1, 'done', 1.0), "
        "(1, 1, 2, 'done', 2.0), (1, 2, 3, 'done', 4.0);"
        "INSERT INTO metrics VALUES (1, 'ttft_p99', 0.5), (2, 'ttft_p99', 0.8), (3, 'ttft_p99', 3.0);"
        "UPDATE metrics SET value = 5 WHERE run_id = 2 AND name = 'rejected';"
        "UPDATE metrics SET value = 20 WHERE run_id = 2 AND name = 'completed';";
    ASSERT_TRUE(db.value()->exec(sql.c_str()).ok()) << db.value()->error_message();
    db.value().reset();
    ASSERT_TRUE(report({.sweep_id = 0}).ok());
    const std::string p = page();
    EXPECT_NE(p.find("<div class=\"text\">" + answer + "</div>"), std::string::npos);
    EXPECT_EQ(p.find("is not what its runs and SLOs give under the rules of this servesim (max request_rate 1.0)") !=
                  std::string::npos,
              banner)
        << answer;
    // The bracket: 1 req/s passes; 2 req/s misses for its rejections.
    EXPECT_NE(p.find("<tr class=\"best\"><td>1.0</td><td class=\"l\">pass</td>"), std::string::npos);
    EXPECT_NE(p.find("<td>2.0</td><td class=\"long l\" title=\"miss: rejected 20 % of requests (5 of 25); --slo "
                     "rejected=SHARE allows some\">"),
              std::string::npos);
    EXPECT_NE(p.find("<td class=\"l\">miss: p99_ttft 3 s &gt; 1 s</td>"), std::string::npos);
  }
}

// Compared runs: a workload's long path wraps in its column instead of pushing the others out.
TEST_F(HtmlReport, ComparedRunsLongWorkloadPathsWrapInTheirColumn) {
  const std::string path =
      "/data/traces/production/region-us-east/2024-11-05/conversation_sessions_sampled_at_3x_rate.jsonl";
  add_run("a", path);
  add_run("b", path + ".v2");
  ASSERT_TRUE(report({.run_ids = {1, 2}}).ok());
  const std::string p = page();
  EXPECT_NE(p.find("<td>Workload</td><td class=\"long l\" title=\"" + path + "\">" + path + "</td>"),
            std::string::npos);
  EXPECT_NE(p.find("title=\"" + path + ".v2\">"), std::string::npos);
}

// Compared runs' iteration chart: the colour is the kind of iteration (prefill-only, decode-only,
// mixed), whichever the run; the run is the marker's shape.
TEST_F(HtmlReport, ComparedIterationChartColoursTheThreeKindsApart) {
  const int64_t a = add_run("a", "w.toml"), b = add_run("b", "w.toml");
  auto db = Database::open(db_path_);
  ASSERT_TRUE(db.ok());
  std::string sql = "BEGIN;";
  for (const int64_t id : {a, b}) {
    for (int s = 0; s < 30; ++s) {
      const int prefill = s % 3 == 1 ? 0 : 100, decode = s % 3 == 0 ? 0 : 4;  // each kind 10 times
      sql += "INSERT INTO iterations VALUES (" + std::to_string(id) + ", 0, " + std::to_string(s) + ", " +
             std::to_string(s * 0.01) + ", 0.01, 4, " + std::to_string(prefill) + ", " + std::to_string(decode) +
             ", 10, 100, NULL);";
    }
  }
  ASSERT_TRUE(db.value()->exec((sql + "COMMIT;").c_str()).ok());
  db.value().reset();
  ASSERT_TRUE(report({.run_ids = {a, b}}).ok());
  nlohmann::json scatter;
  const nlohmann::json charts = data()["charts"];
  for (const auto& c : charts) {
    if (c["x"]["title"] == "batch tokens (prefill + decode)") scatter = c;
  }
  ASSERT_EQ(scatter["series"].size(), 6u);
  const std::string kinds[] = {"prefill-only", "decode-only", "mixed"};
  for (const auto& s : scatter["series"]) {
    const std::string label = s["label"];
    const int run = label.rfind("run 1", 0) == 0 ? 0 : 1;
    for (int k = 0; k < 3; ++k) {
      if (label.ends_with(", " + kinds[k])) {
        EXPECT_EQ(s["color"], k) << label;
        EXPECT_EQ(s["shape"], run) << label;
      }
    }
  }
}

}  // namespace
}  // namespace servesim

namespace servesim::testing {
namespace {

class HtmlReportCli : public Cli {};

TEST_F(HtmlReportCli, WritesAPageOfARealRun) {
  ASSERT_EQ(
      sim({"--backend", "unit", "--policy", "continuous", "--trace", kData + "/workloads/seed-toy.toml"})
          .status,
      0);
  const Outcome o = sim({"report", "--html", "r.html"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Wrote r.html"), std::string::npos) << o.output;
  std::ifstream in(dir_ / "r.html");
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_NE(page.str().find("Chart.js v3.9.1"), std::string::npos);
  EXPECT_EQ(page.str().find("<script src"), std::string::npos);  // self-contained
  EXPECT_EQ(page.str().find("<link"), std::string::npos);
}

TEST_F(HtmlReportCli, BadInputExitsWithTwoAndSaysWhy) {
  ASSERT_EQ(sim({"--backend", "unit", "--trace", kData + "/workloads/seed-toy.toml"}).status, 0);
  Outcome o = sim({"report", "--html", "no/such/dir/r.html"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("no directory no/such/dir"), std::string::npos) << o.output;
  o = sim({"report", "--html", "r.html", "--run", "7"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("no run 7 in sim.db; its runs are 1"), std::string::npos) << o.output;
  o = sim({"report", "--html", "r.html", "--format", "json"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("--format json does not apply"), std::string::npos) << o.output;
  o = sim({"report", "--run", "1", "--run", "1"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("give one --run, or use --html / sim compare"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "r.html"));
  // One --run still prints the text report.
  o = sim({"report", "--run", "1"});
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Serving Benchmark Result"), std::string::npos);
}

}  // namespace
}  // namespace servesim::testing
