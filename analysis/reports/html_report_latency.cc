// The latency CDFs of `sim report --html`: TTFT, TPOT, ITL, E2E latency and queueing delay.
//
// Each comes from the distributions table when the database has it (a few hundred stored quantiles
// per run and metric, the only source of ITL), else from the finished requests' rows, with the
// definitions of `vllm bench serve` (the same as the metrics'; analysis/storage/request_rows.h).
#include <algorithm>
#include <array>
#include <map>

#include "analysis/reports/html_report_data.h"
#include "analysis/reports/html_report_sections.h"
#include "analysis/storage/request_rows.h"

namespace servesim::html {
namespace {

struct Kind {
  const char* metric;  // as in the metrics and distributions tables
  const char* title;
  const char* what;  // the x axis' quantity
  const char* of;    // what the y axis counts
};

constexpr std::array<Kind, 5> kKinds = {{
    {"ttft", "Time to first token (TTFT)", "TTFT", "requests"},
    {"tpot", "Time per output token (TPOT, requests of 2+ tokens)", "TPOT", "requests"},
    {"itl", "Inter-token latency (ITL)", "ITL", "token gaps"},
    {"e2el", "End-to-end latency (E2EL)", "E2E latency", "requests"},
    {"queue", "Queueing delay (scheduled - arrival)", "queueing delay", "requests"},
}};

// One run's CDF points per metric, and where they came from.
struct RunCdfs {
  std::map<std::string, std::vector<Point>> points;  // seconds
  std::map<std::string, std::string> source;         // "stored quantiles" | "N requests"
  std::map<std::string, bool> steps;                 // every value kept: draw the CDF's steps
};

// 1234567 as "1,234,567".
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

Status read_distributions(Database& db, int64_t run, RunCdfs& out) {
  Query q(db,
          "SELECT metric, quantile, value FROM distributions WHERE run_id = ? "
          "AND value IS NOT NULL ORDER BY metric, quantile");
  if (!q.ok()) return q.error();
  q.bind(1, run);
  std::map<std::string, std::vector<Point>> stored;  // (quantile, value)
  while (q.step()) stored[q.text(0)].push_back({q.real(1), q.real(2)});
  for (const auto& [metric, qv] : stored) {
    out.points[metric] = quantile_points(qv, kMaxCdfPoints);
    out.source[metric] = "stored quantiles";
  }
  return Ok{};
}

Status read_requests(Database& db, int64_t run, RunCdfs& out) {
  Result<std::vector<RequestRow>> rows = read_request_rows(db, run);
  if (!rows.ok()) return rows.error();
  std::vector<double> ttft = latency_values(rows.value(), "ttft"), tpot = latency_values(rows.value(), "tpot"),
                      e2el = latency_values(rows.value(), "e2el"), queue = latency_values(rows.value(), "queue");
  const std::pair<const char*, std::vector<double>*> all[] = {
      {"ttft", &ttft}, {"tpot", &tpot}, {"e2el", &e2el}, {"queue", &queue}};
  for (const auto& [metric, values] : all) {
    if (out.points.count(metric) != 0 || values->empty()) continue;  // stored quantiles win
    std::sort(values->begin(), values->end());
    out.points[metric] = cdf_points(*values, kMaxCdfPoints);
    out.steps[metric] = values->size() + 1 <= kMaxCdfPoints;
    out.source[metric] = with_commas(static_cast<int64_t>(values->size())) + " requests";
  }
  return Ok{};
}

// Why a run has no CDF of `metric`.
std::string missing(Database& db, const ReportRun& run, const std::string& metric, bool has_distributions) {
  if (metric == "itl") {
    return has_distributions
               ? run.label() + " has no ITL quantiles in the distributions table"
               : "ITL is measured per token gap, which only the distributions table keeps, and this "
                 "database has none (it predates it); the ITL percentiles are in the summary table";
  }
  if (count_rows(db, "requests", run.id) == 0) {
    return run.label() +
           " logged no requests rows (--log summary): rerun with --log requests (the "
           "default) or --log iterations for its latency distributions";
  }
  return run.label() + " has no finished request with this latency";
}

}  // namespace

Result<Section> latency_section(Database& db, const std::vector<ReportRun>& runs) {
  const bool has_distributions = has_table(db, "distributions");
  std::vector<RunCdfs> cdfs(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    if (has_distributions) {
      if (Status s = read_distributions(db, runs[i].id, cdfs[i]); !s.ok()) return s.error();
    }
    bool need_requests = false;
    for (const char* m : {"ttft", "tpot", "e2el", "queue"})
      need_requests = need_requests || cdfs[i].points.count(m) == 0;
    if (need_requests) {
      if (Status s = read_requests(db, runs[i].id, cdfs[i]); !s.ok()) return s.error();
    }
  }
  const bool all_unit = std::all_of(runs.begin(), runs.end(), [](const ReportRun& r) { return r.unit(); });
  const bool any_unit = std::any_of(runs.begin(), runs.end(), [](const ReportRun& r) { return r.unit(); });
  const std::string unit = all_unit ? "steps" : any_unit ? "ms; steps for unit-backend runs" : "ms";

  Section section{.title = "Latency distributions"};
  for (const Kind& kind : kKinds) {
    Card card{.title = kind.title};
    card.chart =
        make_chart("line", std::string(kind.what) + " (" + unit + ")", "fraction of " + std::string(kind.of));
    card.chart["logToggle"] = true;
    card.chart["y"]["min"] = 0;
    card.chart["y"]["max"] = 1;
    std::string sources, gaps;
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto it = cdfs[i].points.find(kind.metric);
      if (it == cdfs[i].points.end()) {
        const std::string why = missing(db, runs[i], kind.metric, has_distributions);
        if (gaps.find(why) == std::string::npos) gaps += (gaps.empty() ? "" : "; ") + why;
        continue;
      }
      std::vector<Point> points = it->second;
      for (Point& p : points) p.x *= runs[i].latency_scale();
      nlohmann::json s =
          make_series(runs[i].label(), static_cast<int>(i), cdfs[i].steps[kind.metric] ? "step" : "line");
      add_points(s, points);
      card.chart["series"].push_back(std::move(s));
      sources += (sources.empty() ? "" : "; ") + (runs.size() > 1 ? runs[i].label() + ": " : "") +
                 cdfs[i].source[kind.metric];
    }
    if (card.chart["series"].empty()) {
      card.note = gaps + ".";
    } else {
      card.caption = "Fraction of " + std::string(kind.of) + " at or below each value (from " + sources +
                     ", drawn at up to " + std::to_string(kMaxCdfPoints) + " quantiles)." +
                     (gaps.empty() ? "" : " Not shown: " + gaps + ".");
    }
    section.cards.push_back(std::move(card));
  }
  return section;
}

}  // namespace servesim::html
