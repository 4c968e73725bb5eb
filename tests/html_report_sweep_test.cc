// `sim report --html --sweep`: the pages of sweeps and searches (analysis/reports/html_report_sweep.h), of
// real small searches and sweeps run by `sim`: the answer first, the best row per configuration,
// verdicts, and latency axes that overloaded points do not flatten. The browser's view of the same
// pages is tests/html_report_browser_test.py's.
#include "analysis/reports/html_report_sweep.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_harness.h"

namespace servesim {
namespace {

// Where a latency axis stops: near the SLO, or above the points that are not overloaded, and
// only when some point lies beyond (an overloaded sweep's 400,000 ms would flatten the rest).
TEST(HtmlReportSweep, LatencyAxesStopNearTheSloOrTheUsablePoints) {
  using V = std::vector<std::pair<double, bool>>;
  EXPECT_EQ(html::clip_ceiling(V{{300, false}, {1800, false}, {400'000, true}}, {2000}), 8000.0);  // 4 x SLO
  EXPECT_EQ(html::clip_ceiling(V{{300, false}, {1800, false}, {400'000, true}}, {}), 2000.0);  // 1.1 x 1800, rounded up
  EXPECT_EQ(html::clip_ceiling(V{{300, false}, {1800, false}, {7000, false}}, {2000}), std::nullopt);  // all fit
  EXPECT_EQ(html::clip_ceiling(V{{300, false}, {1800, false}}, {}), std::nullopt);
  EXPECT_EQ(html::clip_ceiling(V{{400'000, true}, {500'000, true}}, {}), std::nullopt);  // nothing usable to keep
  EXPECT_EQ(html::clip_ceiling(V{}, {2000}), std::nullopt);
  EXPECT_EQ(html::clip_ceiling(V{{30, false}, {90'000, false}}, {5}), 20.0);  // 4 x 5 ms: far misses clip too
}

}  // namespace
}  // namespace servesim

namespace servesim::testing {
namespace {

// A table of a page as the browser shows it: its title, header and cells (tags and <wbr> removed).
struct PageTable {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> highlighted;
  size_t column(const std::string& name) const {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  }
};

std::string unescape(std::string s) {
  s = std::regex_replace(s, std::regex("<wbr>"), "");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""},
                                 {"&#39;", "'"}, {"&amp;", "&"}}) {
    s = std::regex_replace(s, std::regex(from), to);
  }
  return s;
}

std::vector<PageTable> page_tables(const std::string& page) {
  std::vector<PageTable> out;
  const std::string html = page.substr(0, page.find("<script type=\"application/json\""));
  const std::regex table("<h3>([^<]*)</h3><div class=\"scroll\"><table>([\\s\\S]*?)</table>");
  const std::regex row("<tr( class=\"best\")?>([\\s\\S]*?)</tr>"), cell("<t[hd][^>]*>([\\s\\S]*?)</t[hd]>");
  for (auto t = std::sregex_iterator(html.begin(), html.end(), table); t != std::sregex_iterator(); ++t) {
    PageTable pt{.title = unescape((*t)[1]), .header = {}, .rows = {}, .highlighted = {}};
    const std::string body = (*t)[2];
    bool first = true;
    for (auto r = std::sregex_iterator(body.begin(), body.end(), row); r != std::sregex_iterator(); ++r) {
      const std::string cells = (*r)[2];
      std::vector<std::string> texts;
      for (auto c = std::sregex_iterator(cells.begin(), cells.end(), cell); c != std::sregex_iterator(); ++c) {
        texts.push_back(unescape((*c)[1]));
      }
      if (first) {
        pt.header = texts;
        first = false;
        continue;
      }
      if ((*r)[1].matched) pt.highlighted.push_back(pt.rows.size());
      pt.rows.push_back(texts);
    }
    out.push_back(std::move(pt));
  }
  return out;
}

class HtmlSweepPageCli : public Cli {
 protected:
  std::string read_page(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static nlohmann::json data_of(const std::string& p) {
    const std::string open = "<script type=\"application/json\" id=\"servesim-data\">";
    const size_t from = p.find(open) + open.size();
    return nlohmann::json::parse(p.substr(from, p.find("</script>", from) - from));
  }
  // Writes the page of the latest sweep of `db` and returns it.
  std::string sweep_page(const std::string& db) const {
    const Outcome o = sim({"report", "--db", db, "--sweep", "--html", "page.html"});
    EXPECT_EQ(o.status, 0) << o.output;
    return read_page("page.html");
  }
};

// A cheapest search's page opens with its answer, then the best row of each configuration
// (cheapest first, the answer highlighted), then every probe; each table has a verdict and a
// rejected column.
TEST_F(HtmlSweepPageCli, CheapestSearchPageLeadsWithTheAnswerAndTheBestRowPerConfiguration) {
  const Outcome o = sim({"search", "--trace", "pareto.toml", "--num-prompts", "300", "--request-rate", "12",
                         "--slo", "p99_ttft=1s", "--grid", "hardware=t4,a100-80gb,h100-sxm", "--grid",
                         "replicas=1,2,4,8", "--minimize", "cost_per_hour", "--db", "s.db"});
  ASSERT_EQ(o.status, 0) << o.output;
  const std::string answer = query("SELECT answer FROM sweeps", "s.db");
  ASSERT_EQ(answer.rfind("cheapest: ", 0), 0u) << answer;
  const std::string p = sweep_page("s.db");
  const size_t box = p.find("<div class=\"answer\"><div class=\"label\">Answer</div><div class=\"text\">" + answer);
  ASSERT_NE(box, std::string::npos);
  EXPECT_LT(box, p.find("<table>"));
  EXPECT_NE(p.find("with the least cost_per_hour that is not overloaded and meets p99_ttft \u2264 1 s, no request "
                   "rejected. Fixed: trace=pareto.toml"),
            std::string::npos);
  const std::vector<PageTable> tables = page_tables(p);
  ASSERT_EQ(tables.size(), 2u);
  const PageTable& best = tables[0];
  EXPECT_EQ(best.title, "Best row per configuration: the fewest replicas that pass, cheapest first");
  ASSERT_EQ(best.rows.size(), 3u);  // one per hardware
  ASSERT_EQ(best.highlighted, std::vector<size_t>{0});
  const size_t hw = best.column("hardware"), reps = best.column("replicas"), verdict = best.column("verdict");
  ASSERT_LT(verdict, best.header.size());
  EXPECT_LT(best.column("rejected"), best.header.size());
  EXPECT_EQ(best.rows[0][verdict].rfind("the answer: pass", 0), 0u) << best.rows[0][verdict];
  EXPECT_NE(answer.find("hardware=" + best.rows[0][hw]), std::string::npos) << answer;
  EXPECT_NE(answer.find("replicas=" + best.rows[0][reps]), std::string::npos) << answer;
  for (const auto& row : best.rows) {
    if (row[hw] == "t4") {
      EXPECT_EQ(row[verdict].rfind("miss", 0), 0u) << row[verdict];  // the model does not fit
    }
  }
  const PageTable& probes = tables[1];
  EXPECT_EQ(probes.title, "Search 1: every probe");
  const size_t pv = probes.column("verdict");
  ASSERT_LT(pv, probes.header.size());
  EXPECT_LT(probes.column("rejected"), probes.header.size());
  EXPECT_EQ(probes.rows.size(), std::stoul(query("SELECT count(*) FROM sweep_points", "s.db")));
  size_t passes = 0;
  for (const auto& row : probes.rows) {
    EXPECT_TRUE(row[pv] == "pass" || row[pv].rfind("miss: ", 0) == 0) << row[pv];
    passes += row[pv] == "pass";
  }
  EXPECT_GT(passes, 0u);
}

// A max-rate search's page brackets its answer: the largest rate that passed (as the stored answer
// says) and the smallest that missed above it, with the verdict the search gave.
TEST_F(HtmlSweepPageCli, MaxRateSearchPageBracketsTheAnswer) {
  const Outcome o = sim({"search", "--trace", "pareto.toml", "--num-prompts", "300", "--slo", "p99_ttft=1s",
                         "--precision", "0.05", "--db", "s.db"});
  ASSERT_EQ(o.status, 0) << o.output;
  const std::string answer = query("SELECT answer FROM sweeps", "s.db");
  double pass = 0, miss = 0;
  ASSERT_EQ(std::sscanf(answer.c_str(), "max request_rate %lf req/s meets the SLOs (%lf misses", &pass, &miss), 2)
      << answer;
  const std::vector<PageTable> tables = page_tables(sweep_page("s.db"));
  ASSERT_EQ(tables.size(), 2u);
  const PageTable& bracket = tables[0];
  ASSERT_EQ(bracket.rows.size(), 2u);
  EXPECT_EQ(bracket.highlighted, std::vector<size_t>{0});
  EXPECT_NEAR(std::stod(bracket.rows[0][0]), pass, pass * 1e-3);
  EXPECT_EQ(bracket.rows[0][1], "pass");
  EXPECT_NEAR(std::stod(bracket.rows[1][0]), miss, miss * 1e-3);
  const std::string miss_reason = answer.substr(answer.find("misses: ") + 8);
  EXPECT_EQ("miss: " + bracket.rows[1][1].substr(6) + ")", "miss: " + miss_reason) << bracket.rows[1][1];
  // Every probe, by rate: the passes all below the misses.
  const PageTable& probes = tables[1];
  bool missed = false;
  for (const auto& row : probes.rows) {
    const bool is_pass = row[probes.column("verdict")] == "pass";
    EXPECT_FALSE(missed && is_pass) << row[1];
    missed = missed || !is_pass;
  }
}

// Overloaded points (hundreds of seconds of TTFT) no longer flatten a sweep's latency charts: the
// axis stops above the usable points, the overloaded ones are marked, and their values are kept.
TEST_F(HtmlSweepPageCli, OverloadedSweepPointsDoNotFlattenTheLatencyAxes) {
  const Outcome o = sim({"sweep", "--trace", "pareto.toml", "--num-prompts", "300", "--grid",
                         "request_rate=2,4,8,64,256", "--grid", "replicas=1,2", "--db", "o.db"});
  ASSERT_EQ(o.status, 0) << o.output;
  ASSERT_NE(query("SELECT count(*) FROM metrics WHERE name = 'overloaded' AND value > 0", "o.db"), "0");
  const std::string p = sweep_page("o.db");
  const nlohmann::json ttft = data_of(p)["charts"][0];
  ASSERT_EQ(ttft["y"]["title"], "p99 TTFT (ms)");
  ASSERT_TRUE(ttft["y"].contains("clip")) << ttft.dump();
  EXPECT_TRUE(ttft.value("logToggleY", false));
  const double clip = ttft["y"]["clip"];
  double top = 0;
  size_t overloaded = 0;
  for (const auto& s : ttft["series"]) {
    for (size_t i = 0; i < s["y"].size(); ++i) {
      const double y = s["y"][i];
      top = std::max(top, y);  // the true values: the page clips them when drawn
      const bool over = s.contains("styles") && s["styles"][i] == 2;
      overloaded += over;
      if (!over) {
        EXPECT_LE(y, clip) << s["label"];
      }
    }
  }
  EXPECT_GT(overloaded, 0u);
  EXPECT_GT(top, clip);
  EXPECT_NE(p.find("Crosses: overloaded"), std::string::npos);
  EXPECT_NE(p.find("points beyond it are triangles on the top edge"), std::string::npos);
  const std::vector<PageTable> tables = page_tables(p);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].title, "Largest request_rate each configuration carries (done, not overloaded)");
  ASSERT_EQ(tables[0].rows.size(), 2u);  // replicas 1 and 2
  EXPECT_NE(tables[0].rows[0][tables[0].column("next rate up")].find("overloaded"), std::string::npos);
  EXPECT_LT(tables[1].column("verdict"), tables[1].header.size());
}

}  // namespace
}  // namespace servesim::testing
