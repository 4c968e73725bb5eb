// The page of a sweep (or search) in `sim report --html`: the points' table as `sim report --sweep`
// prints it, each key metric against the swept value with the sweep's SLOs as horizontal lines, and
// the cost/latency Pareto frontier.
//
// The x axis is the first swept key whose values are numbers and differ (else the first that
// differs, as categories); every combination of the other keys' values is a line of its own.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <toml++/toml.h>

#include "analysis/html_report_data.h"
#include "analysis/html_report_sections.h"
#include "analysis/model_band.h"
#include "analysis/seed_stats.h"
#include "analysis/sweep_db.h"
#include "analysis/sweep_report.h"
#include "sim/toml_fields.h"

namespace servesim::html {
namespace {

struct Value {
  bool null = true, number = false;
  double x = 0;
  std::string text;  // as shown
};

struct SweepPoint {
  int64_t point = 0, run_id = 0;
  std::string status, error;
  std::vector<Value> keys;  // one per swept key
  std::map<std::string, double> metrics;
  std::string name;  // "point 3: replicas=2, tp=4"
};

constexpr const char* kCharted[][2] = {{"ttft_p99", "p99 TTFT"},
                                       {"tpot_p99", "p99 TPOT"},
                                       {"e2el_p99", "p99 E2E latency"},
                                       {"request_throughput", "Request throughput"},
                                       {"output_throughput", "Output throughput"}};

bool is_latency(const std::string& m) {
  return m.rfind("ttft", 0) == 0 || m.rfind("tpot", 0) == 0 || m.rfind("e2el", 0) == 0;
}

Result<std::vector<SweepPoint>> read_points(Database& db, const StoredSweep& sweep) {
  std::string sql = "SELECT point, status, run_id, error";
  for (const std::string& k : sweep.keys) sql += ", " + quote_identifier(k);
  Query q(db, sql + " FROM sweep_points WHERE sweep_id = ? ORDER BY point");
  if (!q.ok()) return q.error();
  q.bind(1, sweep.id);
  std::vector<SweepPoint> out;
  while (q.step()) {
    SweepPoint p;
    p.point = q.integer(0);
    p.run_id = q.null(2) ? 0 : q.integer(2);
    p.status = q.text(1);
    p.error = q.text(3);
    p.name = "point " + std::to_string(p.point) + ":";
    for (size_t k = 0; k < sweep.keys.size(); ++k) {
      const int c = static_cast<int>(4 + k);
      Value v;
      v.null = q.null(c);
      v.number = q.number(c);
      v.x = q.real(c);
      v.text = q.text(c);  // SQLite's text of a number is its shortest exact form
      p.name += " " + sweep.keys[k] + "=" + (v.null ? "-" : v.text);
      p.keys.push_back(std::move(v));
    }
    out.push_back(std::move(p));
  }
  Query m(db,
          "SELECT p.point, m.name, m.value FROM sweep_points p JOIN metrics m ON m.run_id = p.run_id "
          "WHERE p.sweep_id = ? AND m.value IS NOT NULL");
  if (!m.ok()) return m.error();
  m.bind(1, sweep.id);
  std::map<int64_t, SweepPoint*> by_point;
  for (SweepPoint& p : out) by_point[p.point] = &p;
  while (m.step()) by_point[m.integer(0)]->metrics[m.text(1)] = m.real(2);
  return out;
}

Table points_table(const StoredSweep& sweep, const std::vector<SweepPoint>& points) {
  Table t{.title = std::string(sweep.kind == "search" ? "Search " : "Sweep ") + std::to_string(sweep.id) +
                   " points",
          .header = {"point"},
          .rows = {}};
  for (const std::string& k : sweep.keys) t.header.push_back(k);
  t.header.insert(t.header.end(), {"status", "run"});
  std::vector<std::string> shown;
  for (const std::string& m : sweep_table_metrics()) {
    if (std::any_of(points.begin(), points.end(),
                    [&](const SweepPoint& p) { return p.metrics.count(m) != 0; })) {
      shown.push_back(m);
      t.header.push_back(is_latency(m) ? m + " (ms)" : m);
    }
  }
  const bool errors =
      std::any_of(points.begin(), points.end(), [](const SweepPoint& p) { return !p.error.empty(); });
  if (errors) t.header.push_back("error");
  for (const SweepPoint& p : points) {
    std::vector<std::string> row = {std::to_string(p.point)};
    for (const Value& v : p.keys) row.push_back(v.null ? "-" : v.text);
    row.push_back(p.status.empty() ? "-" : p.status);
    row.push_back(p.run_id > 0 ? std::to_string(p.run_id) : "-");
    for (const std::string& m : shown) {
      const auto it = p.metrics.find(m);
      row.push_back(it == p.metrics.end() ? "-" : format_number(it->second * (is_latency(m) ? 1000 : 1)));
    }
    if (errors) row.push_back(p.error.empty() ? "" : p.error);
    t.rows.push_back(std::move(row));
  }
  if (!sweep.answer.empty()) t.footnote = "Answer: " + sweep.answer;
  return t;
}

struct Slo {
  std::string metric, label;
  double ms;
};

// The SLOs in the sweep's definition: a search's [slo] ("p99_ttft" = seconds) and the per-request
// objectives of [fixed.goodput] (milliseconds, as vLLM's --goodput), drawn on the p99 charts.
std::vector<Slo> read_slos(const std::string& spec) {
  std::vector<Slo> out;
  Result<toml::table> parsed = parse_toml(spec, "the sweep's spec");
  if (!parsed.ok()) return out;
  const toml::table& t = parsed.value();
  if (const toml::table* slo = t["slo"].as_table()) {
    for (const auto& [key, v] : *slo) {
      const std::string k(key.str());
      const size_t us = k.find('_');
      const std::optional<double> bound = v.value<double>();
      if (us == std::string::npos || !bound) continue;
      out.push_back({k.substr(us + 1) + "_" + k.substr(0, us),
                     "SLO " + k + " \u2264 " + format_number(*bound * 1000) + " ms", *bound * 1000});
    }
  }
  if (const toml::table* goodput = t["fixed"]["goodput"].as_table()) {
    for (const auto& [key, v] : *goodput) {
      const std::string k(key.str());
      if (const std::optional<double> ms = v.value<double>()) {
        out.push_back(
            {k + "_p99", "goodput SLO " + k + " \u2264 " + format_number(*ms) + " ms (per request)", *ms});
      }
    }
  }
  return out;
}

// The x axis: the key with the most distinct numbers (the first of those, on a tie), else the
// first key whose values differ (as categories).
struct XAxis {
  size_t key = 0;
  bool numeric = true;
  bool integer = true;
  std::vector<std::string> labels;  // distinct values, in order of appearance
};

std::optional<XAxis> choose_x(const StoredSweep& sweep, const std::vector<SweepPoint>& points) {
  std::optional<XAxis> best, fallback;
  for (size_t k = 0; k < sweep.keys.size(); ++k) {
    XAxis x{.key = k, .numeric = true, .integer = true, .labels = {}};
    std::set<std::string> seen;
    for (const SweepPoint& p : points) {
      x.numeric = x.numeric && p.keys[k].number;
      x.integer = x.integer && p.keys[k].number && p.keys[k].x == std::floor(p.keys[k].x);
      if (seen.insert(p.keys[k].text).second) x.labels.push_back(p.keys[k].text);
    }
    if (x.numeric && x.labels.size() > 1 && (!best || x.labels.size() > best->labels.size())) best = x;
    if (!fallback && (x.labels.size() > 1 || k + 1 == sweep.keys.size())) fallback = x;
  }
  return best ? best : fallback;
}

double x_of(const XAxis& x, const SweepPoint& p) {
  const Value& v = p.keys[x.key];
  if (x.numeric) return v.x;
  return static_cast<double>(std::find(x.labels.begin(), x.labels.end(), v.text) - x.labels.begin());
}

// A series of the sweep's points, with their names for the tooltips.
nlohmann::json point_series(const std::string& label, int color, const std::string& draw,
                            std::vector<std::pair<Point, const SweepPoint*>> points) {
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first.x < b.first.x; });
  nlohmann::json s = make_series(label, color, draw);
  for (const auto& [xy, p] : points) {
    add_points(s, std::vector<Point>{xy});
    s["names"].push_back(p->name);
  }
  return s;
}

Card metric_card(const std::string& metric, const std::string& title, const StoredSweep& sweep,
                 const std::vector<SweepPoint>& points, const XAxis& x, const std::vector<Slo>& slos) {
  const double scale = is_latency(metric) ? 1000 : 1;
  const std::string unit = is_latency(metric)               ? " (ms)"
                           : metric == "request_throughput" ? " (req/s)"
                                                            : " (tok/s)";
  Card card{.title = title + " against " + sweep.keys[x.key]};
  card.chart = make_chart("line", sweep.keys[x.key], title + unit);
  if (!x.numeric) card.chart["x"]["ticks"] = x.labels;
  if (x.numeric) card.chart["logToggle"] = true;
  if (x.integer) card.chart["x"]["integer"] = true;
  // One line per combination of the other keys' values, in order of appearance.
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::pair<Point, const SweepPoint*>>> members;
  double lo = INFINITY, hi = -INFINITY;
  for (const SweepPoint& p : points) {
    const auto it = p.metrics.find(metric);
    if (it == p.metrics.end()) continue;
    std::string group;
    for (size_t k = 0; k < sweep.keys.size(); ++k) {
      if (k != x.key)
        group += (group.empty() ? "" : ", ") + sweep.keys[k] + "=" + (p.keys[k].null ? "-" : p.keys[k].text);
    }
    if (members.count(group) == 0) groups.push_back(group);
    const double xv = x_of(x, p);
    members[group].push_back({{xv, it->second * scale}, &p});
    lo = std::min(lo, xv);
    hi = std::max(hi, xv);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    card.chart["series"].push_back(point_series(groups[g].empty() ? title : groups[g], static_cast<int>(g),
                                                "markers", members[groups[g]]));
  }
  if (groups.empty()) {
    card.note = "No point of this sweep recorded " + metric + " (failed points, or no request completed).";
    return card;
  }
  bool slo_drawn = false;
  for (const Slo& slo : slos) {
    if (slo.metric != metric) continue;
    slo_drawn = true;
    nlohmann::json s = make_series(slo.label, 3, "dash");
    add_points(s, std::vector<Point>{{lo, slo.ms}, {hi, slo.ms}});
    card.chart["series"].push_back(std::move(s));
  }
  card.caption = "Each marker one point of the sweep (" + metric + " of its run)" +
                 (groups.size() > 1 ? "; one line per combination of the other swept keys." : ".") +
                 (slo_drawn ? " Dashed: the sweep's SLOs." : "");
  return card;
}

// Cost against p99 TTFT; the frontier: the points no other point beats on both.
Card pareto_card(const std::vector<SweepPoint>& points) {
  Card card{.title = "Cost vs latency: Pareto frontier"};
  const bool cost = std::any_of(points.begin(), points.end(),
                                [](const SweepPoint& p) { return p.metrics.count("cost_per_hour") != 0; });
  const std::string x_metric = cost ? "cost_per_hour" : "gpus";
  std::vector<std::pair<Point, const SweepPoint*>> all;
  for (const SweepPoint& p : points) {
    const auto x = p.metrics.find(x_metric), y = p.metrics.find("ttft_p99");
    if (x != p.metrics.end() && y != p.metrics.end()) all.push_back({{x->second, y->second * 1000}, &p});
  }
  if (all.empty()) {
    card.note = "No point recorded both " + x_metric + " and ttft_p99.";
    return card;
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first.x != b.first.x ? a.first.x < b.first.x : a.first.y < b.first.y;
  });
  std::vector<std::pair<Point, const SweepPoint*>> frontier;
  for (const auto& entry : all) {
    if (frontier.empty() || entry.first.y < frontier.back().first.y) frontier.push_back(entry);
  }
  card.chart = make_chart("line", cost ? "cost (USD/hour)" : "GPUs", "p99 TTFT (ms)");
  card.chart["series"].push_back(point_series("Pareto frontier", 3, "markers", frontier));
  card.chart["series"].push_back(point_series("points", 7, "points", all));
  card.caption =
      "Each point one configuration of the sweep; the frontier joins those that no cheaper "
      "configuration beats on p99 TTFT." +
      std::string(cost ? "" : " (No cost in the hardware files: x is the GPU count.)");
  return card;
}

Section sweep_charts(const StoredSweep& sweep, const std::vector<SweepPoint>& points,
                     const std::vector<Slo>& slos) {
  Section section{.title = "Key metrics"};
  const std::optional<XAxis> x = choose_x(sweep, points);
  if (!x) {
    section.cards.push_back(
        Card{.title = "Key metrics", .note = "This sweep recorded no points with swept values to chart."});
    return section;
  }
  for (const auto& [metric, title] : kCharted)
    section.cards.push_back(metric_card(metric, title, sweep, points, *x, slos));
  section.cards.push_back(pareto_card(points));
  return section;
}

std::string metric_label(const SeedMetric& m) {
  return std::string(m.name) + (m.unit.empty() ? "" : " (" + std::string(m.unit) + ")");
}

// The summary of a seeds sweep (mean and 95 % CI over the seeds) or of a model-uncertainty sweep
// (the band over the calibration samples), as `sim report --sweep` prints it; none for other kinds.
Result<std::optional<Table>> summary_table(Database& db, const StoredSweep& sweep) {
  if (sweep.kind == "seeds") {
    int64_t runs = 0;
    Result<std::vector<SeedAggregate>> a = read_seed_aggregate(db, sweep.id, &runs);
    if (!a.ok()) return a.error();
    Table t{.title = "Mean and 95 % CI of the mean over " + std::to_string(runs) + " seeds",
            .header = {"", "mean", "95 % CI", "std", "seeds"},
            .rows = {}};
    for (const SeedAggregate& g : a.value()) {
      const SampleStats& st = g.stats;
      const int d = interval_decimals(st.mean, st.half_width);
      const bool spread = !std::isnan(st.half_width);
      t.rows.push_back({metric_label(g.metric), fixed_decimals(st.mean, d),
                        spread ? "[" + fixed_decimals(st.low(), d) + ", " + fixed_decimals(st.high(), d) + "]" : "-",
                        spread ? fixed_decimals(st.std, d) : "-", std::to_string(st.n)});
    }
    t.footnote = std::string(kSeedIntervalMethod) + ": the interval of the mean over the seeds' runs, the spread of the workload's random draws.";
    return std::optional<Table>(std::move(t));
  }
  if (sweep.kind == "model-uncertainty") {
    Result<std::vector<ModelBand>> band = read_model_band(db, sweep.id);
    if (!band.ok()) return band.error();
    Table t{.title = "Model uncertainty: the band over the hardware file's calibration samples",
            .header = {"", "with the file's values", "2.5-97.5 % over the samples", "samples"},
            .rows = {}};
    for (const ModelBand& b : band.value()) {
      const int d = interval_decimals(std::isnan(b.value) ? b.low : b.value, (b.high - b.low) / 2);
      t.rows.push_back({metric_label(b.metric), std::isnan(b.value) ? "-" : fixed_decimals(b.value, d),
                        "[" + fixed_decimals(b.low, d) + ", " + fixed_decimals(b.high, d) + "]",
                        std::to_string(b.samples)});
    }
    t.footnote = "Each sample: the fitted keys of one bootstrap resample of the calibration's measurements, on "
                 "the same workload and seed. The calibration's own uncertainty only, not the roofline's error "
                 "at its best keys.";
    return std::optional<Table>(std::move(t));
  }
  return std::optional<Table>();
}

}  // namespace

Result<Page> sweep_page(Database& db, std::optional<int64_t> sweep_id) {
  Result<StoredSweep> read = read_sweep(db, sweep_id && *sweep_id > 0 ? sweep_id : std::nullopt);
  if (!read.ok()) return read.error();
  const StoredSweep& sweep = read.value();
  Result<std::vector<SweepPoint>> points = read_points(db, sweep);
  if (!points.ok()) return points.error();
  Page page;
  page.title = "servesim report: " + std::string(sweep.kind == "search" ? "search " : "sweep ") +
               std::to_string(sweep.id) + (sweep.name.empty() ? "" : " (" + sweep.name + ")");
  page.subtitle = "Database " + db.path() + "; servesim " SERVESIM_VERSION "; " + std::to_string(points.value().size()) +
                  " of " + std::to_string(sweep.points) + " points recorded; swept: " +
                  (sweep.keys.empty() ? std::string("-") : [&] { std::string s; for (const auto& k : sweep.keys) s += (s.empty() ? "" : ", ") + k; return s; }()) + ".";
  if (sweep.status != "done")
    page.banners.push_back({sweep.status == "failed",
                            "The sweep's status is " + sweep.status + ": some points may be missing."});
  const auto failed = std::count_if(points.value().begin(), points.value().end(),
                                    [](const SweepPoint& p) { return p.status != "done"; });
  if (failed > 0)
    page.banners.push_back(
        {false,
         std::to_string(failed) +
             " point(s) did not complete; the table gives their errors, and the charts leave them out."});
  Result<std::optional<Table>> summary = summary_table(db, sweep);
  if (!summary.ok()) return summary.error();
  if (summary.value()) page.tables.push_back(std::move(*summary.value()));
  page.tables.push_back(points_table(sweep, points.value()));
  page.sections.push_back(sweep_charts(sweep, points.value(), read_slos(sweep.spec)));
  return page;
}

}  // namespace servesim::html
