// The charts of a sweep's (or search's) page in `sim report --html`: each key metric against the
// swept value with the SLOs as horizontal lines, and the cost/latency Pareto frontier.
//
// The x axis is the first swept key whose values are numbers and differ most (else the first that
// differs, as categories); every combination of the other keys' values is a line of its own. A
// marker's shape gives its verdict: filled passed (or, in a sweep, is usable), hollow missed an SLO,
// a cross is overloaded. Latency axes stop near the SLOs (clip_ceiling): an overloaded point's
// hundreds of seconds would flatten every other point; the points beyond are drawn as triangles on
// the top edge with their values in the tooltip, and a "log y" button shows them all.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analysis/reports/html_report_data.h"
#include "analysis/reports/html_report_sections.h"
#include "analysis/reports/html_report_sweep.h"

namespace servesim::html {
namespace {

constexpr const char* kCharted[][2] = {{"ttft_p99", "p99 TTFT"},
                                       {"tpot_p99", "p99 TPOT"},
                                       {"e2el_p99", "p99 E2E latency"},
                                       {"request_throughput", "Request throughput"},
                                       {"output_throughput", "Output throughput"}};

// SLO lines are black: every palette colour may be a configuration's.
constexpr const char* kSloColor = "#222222";

// Marker styles (html_report.js): as the verdict.
enum Style { kPass = 0, kMiss = 1, kOverloaded = 2 };

int style_of(const SweepPoint& p) { return p.pass() ? kPass : p.overloaded() ? kOverloaded : kMiss; }

struct XAxis {
  size_t key = 0;
  bool numeric = true;
  bool integer = true;
  std::vector<std::string> labels;  // distinct values, in order of appearance
  double spread = 0;                // largest / least value, when all are > 0 (else 0)
};

// The key with the most distinct numbers (the first of those, on a tie), else the first key whose
// values differ (as categories).
std::optional<XAxis> choose_x(const SweepView& view) {
  std::optional<XAxis> best, fallback;
  for (size_t k = 0; k < view.sweep.keys.size(); ++k) {
    XAxis x{.key = k, .numeric = true, .integer = true, .labels = {}, .spread = 0};
    std::set<std::string> seen;
    double lo = INFINITY, hi = 0;
    for (const SweepPoint& p : view.points) {
      x.numeric = x.numeric && p.keys[k].number;
      x.integer = x.integer && p.keys[k].number && p.keys[k].x == std::floor(p.keys[k].x);
      if (seen.insert(p.keys[k].text).second) x.labels.push_back(p.keys[k].text);
      lo = std::min(lo, p.keys[k].x);
      hi = std::max(hi, p.keys[k].x);
    }
    if (x.numeric && lo > 0) x.spread = hi / lo;
    if (x.numeric && x.labels.size() > 1 && (!best || x.labels.size() > best->labels.size())) best = x;
    if (!fallback && (x.labels.size() > 1 || k + 1 == view.sweep.keys.size())) fallback = x;
  }
  return best ? best : fallback;
}

double x_of(const XAxis& x, const SweepPoint& p) {
  const SweptValue& v = p.keys[x.key];
  if (x.numeric) return v.x;
  return static_cast<double>(std::find(x.labels.begin(), x.labels.end(), v.text) - x.labels.begin());
}

// A series of the sweep's points, with their names for the tooltips and their verdicts' styles.
nlohmann::json point_series(const SweepView& view, const std::string& label, int color, const std::string& draw,
                            std::vector<std::pair<Point, const SweepPoint*>> points) {
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first.x < b.first.x; });
  nlohmann::json s = make_series(label, color, draw);
  bool styled = false;
  for (const auto& [xy, p] : points) {
    add_points(s, std::vector<Point>{xy});
    s["names"].push_back(p->name + " (" + view.verdict(*p) + ")");
    s["styles"].push_back(style_of(*p));
    styled = styled || style_of(*p) != kPass;
  }
  if (!styled) s.erase("styles");
  return s;
}

// The search's answer as a star over its own marker, always in the legend.
nlohmann::json answer_series(const SweepView& view, const SweepPoint& answer, Point xy, int color) {
  nlohmann::json s = point_series(view, "the answer (" + keys_label(view, answer, view.sweep.keys.size()) + ")",
                                  color, "markers", {{xy, &answer}});
  s["shape"] = 4;  // a star
  s["radius"] = 9;
  s["keep"] = true;
  return s;
}

// Limits the chart's y axis when overloaded points would flatten it (see clip_ceiling).
void clip_y(nlohmann::json& chart, const std::vector<std::pair<double, bool>>& values,
            const std::vector<double>& lines) {
  if (const std::optional<double> ceiling = clip_ceiling(values, lines)) {
    chart["y"]["clip"] = *ceiling;
    chart["logToggleY"] = true;
  }
}

std::string clip_caption(const nlohmann::json& chart) {
  if (!chart["y"].contains("clip")) return "";
  return " The y axis stops at " + format_number(chart["y"]["clip"].get<double>()) +
         " ms: points beyond it are triangles on the top edge (their values in the tooltip); "
         "\"log y\" shows them all.";
}

std::string legend_caption(const SweepView& view, const nlohmann::json& chart) {
  bool miss = false, overloaded = false;
  for (const auto& s : chart["series"]) {
    for (const auto& st : s.value("styles", nlohmann::json::array())) {
      miss = miss || st == kMiss;
      overloaded = overloaded || st == kOverloaded;
    }
  }
  std::string out;
  if (miss) out += view.search ? " Hollow: the probe missed an SLO." : " Hollow: the point did not complete.";
  if (overloaded) out += " Crosses: overloaded (the queue grows without bound).";
  return out;
}

Card metric_card(const std::string& metric, const std::string& title, const SweepView& view, const XAxis& x) {
  const bool latency = is_latency_metric(metric);
  const double scale = latency ? 1000 : 1;
  const std::string unit = latency ? " (ms)" : metric == "request_throughput" ? " (req/s)" : " (tok/s)";
  const std::string& key = view.sweep.keys[x.key];
  Card card{.title = title + " against " + key};
  card.chart = make_chart("line", key, title + unit);
  if (!x.numeric) card.chart["x"]["ticks"] = x.labels;
  if (x.numeric) card.chart["logToggle"] = true;
  if (x.numeric && x.spread >= 20) card.chart["logX"] = true;  // 2, 8, 32, 128, 512 spread out
  if (x.integer) card.chart["x"]["integer"] = true;
  card.chart["y"]["min"] = 0;  // a latency or a throughput: its size, not its change, is the point
  // One line per combination of the other keys' values, in order of appearance.
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::pair<Point, const SweepPoint*>>> members;
  std::vector<std::pair<double, bool>> values;
  double lo = INFINITY, hi = -INFINITY;
  for (const SweepPoint& p : view.points) {
    const std::optional<double> v = p.metric(metric);
    if (!v) continue;
    const std::string group = keys_label(view, p, x.key);
    if (members.count(group) == 0) groups.push_back(group);
    const double xv = x_of(x, p);
    members[group].push_back({{xv, *v * scale}, &p});
    values.push_back({*v * scale, p.overloaded()});
    lo = std::min(lo, xv);
    hi = std::max(hi, xv);
  }
  if (groups.empty()) {
    card.note = "No point recorded " + metric + " (failed points, or no request completed).";
    return card;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    nlohmann::json s =
        point_series(view, groups[g].empty() ? title : groups[g], static_cast<int>(g), "markers", members[groups[g]]);
    if (g >= 10) s["shape"] = (g / 10) % 5;  // past the palette's 10 colours: another marker
    card.chart["series"].push_back(std::move(s));
  }
  if (const SweepPoint* answer = answer_point(view); answer && answer->metric(metric)) {
    const size_t g = static_cast<size_t>(std::find(groups.begin(), groups.end(), keys_label(view, *answer, x.key)) -
                                         groups.begin());
    card.chart["series"].push_back(answer_series(view, *answer, {x_of(x, *answer), *answer->metric(metric) * scale},
                                                 static_cast<int>(g)));
  }
  std::vector<double> lines;
  for (const SloLine& slo : view.lines) {
    if (slo.metric != metric) continue;
    lines.push_back(slo.ms);
    nlohmann::json s = make_series(slo.label, 0, "dash");
    s["color"] = kSloColor;
    add_points(s, std::vector<Point>{{lo, slo.ms}, {hi, slo.ms}});
    card.chart["series"].push_back(std::move(s));
  }
  if (latency) clip_y(card.chart, values, lines);
  card.caption = "Each marker one " + std::string(view.search ? "probe" : "point") + " (" + metric + " of its run)" +
                 (groups.size() > 1 ? "; one line per combination of the other keys." : ".") +
                 (lines.empty() ? "" : " Dashed black: the SLO.") + legend_caption(view, card.chart) +
                 clip_caption(card.chart);
  return card;
}

// Cost against p99 TTFT; the frontier: the usable points that no other beats on both.
Card pareto_card(const SweepView& view) {
  Card card{.title = "Cost vs latency: Pareto frontier"};
  const bool cost = std::any_of(view.points.begin(), view.points.end(),
                                [](const SweepPoint& p) { return p.metric("cost_per_hour").has_value(); });
  const std::string x_metric = cost ? "cost_per_hour" : "gpus";
  std::vector<std::pair<Point, const SweepPoint*>> all;
  std::vector<std::pair<double, bool>> values;
  for (const SweepPoint& p : view.points) {
    const std::optional<double> x = p.metric(x_metric), y = p.metric("ttft_p99");
    if (!x || !y) continue;
    all.push_back({{*x, *y * 1000}, &p});
    values.push_back({*y * 1000, p.overloaded()});
  }
  if (all.empty()) {
    card.note = "No point recorded both " + x_metric + " and ttft_p99.";
    return card;
  }
  if (std::all_of(all.begin(), all.end(), [&](const auto& e) { return e.first.x == all.front().first.x; })) {
    card.note = "Every point costs the same (" + x_metric + " " + format_number(all.front().first.x) +
                "): no cost/latency trade-off to chart.";
    return card;
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first.x != b.first.x ? a.first.x < b.first.x : a.first.y < b.first.y;
  });
  std::vector<std::pair<Point, const SweepPoint*>> frontier;
  for (const auto& entry : all) {
    const bool usable = !entry.second->overloaded() && entry.second->status == "done";
    if (usable && (frontier.empty() || entry.first.y < frontier.back().first.y)) frontier.push_back(entry);
  }
  card.chart = make_chart("line", cost ? "cost (USD/hour)" : "GPUs", "p99 TTFT (ms)");
  if (!frontier.empty()) card.chart["series"].push_back(point_series(view, "Pareto frontier", 0, "markers", frontier));
  card.chart["series"].push_back(point_series(view, view.search ? "probes" : "points", 7, "points", all));
  if (const SweepPoint* answer = answer_point(view)) {
    const std::optional<double> x = answer->metric(x_metric), y = answer->metric("ttft_p99");
    if (x && y) card.chart["series"].push_back(answer_series(view, *answer, {*x, *y * 1000}, 0));
  }
  std::vector<double> lines;
  for (const SloLine& slo : view.lines) {
    if (slo.metric != "ttft_p99") continue;
    lines.push_back(slo.ms);
    nlohmann::json s = make_series(slo.label, 0, "dash");
    s["color"] = kSloColor;
    add_points(s, std::vector<Point>{{all.front().first.x, slo.ms}, {all.back().first.x, slo.ms}});
    card.chart["series"].push_back(std::move(s));
  }
  clip_y(card.chart, values, lines);
  card.caption = "Each point one configuration; the frontier joins those, not overloaded, that no cheaper "
                 "configuration beats on p99 TTFT." +
                 std::string(cost ? "" : " (No cost in the hardware files: x is the GPU count.)") +
                 legend_caption(view, card.chart) + clip_caption(card.chart);
  return card;
}

// The least of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten that is at least v (> 0):
// an axis end that reads well.
double nice_ceiling(double v) {
  const double power = std::pow(10.0, std::floor(std::log10(v)));
  for (const double m : {1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0}) {
    if (m * power >= v * (1 - 1e-12)) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::optional<double> clip_ceiling(const std::vector<std::pair<double, bool>>& value_overloaded,
                                   const std::vector<double>& slo_lines) {
  double top = -INFINITY, usable = -INFINITY;
  for (const auto& [v, overloaded] : value_overloaded) {
    if (!std::isfinite(v)) continue;
    top = std::max(top, v);
    if (!overloaded) usable = std::max(usable, v);
  }
  const double slo = slo_lines.empty() ? -INFINITY : *std::max_element(slo_lines.begin(), slo_lines.end());
  const double ceiling = slo > 0 ? 4 * slo : usable > 0 ? 1.1 * usable : NAN;
  if (!(ceiling > 0)) return std::nullopt;
  const double nice = nice_ceiling(ceiling);
  if (top <= nice) return std::nullopt;
  return nice;
}

Section sweep_charts(const SweepView& view) {
  Section section{.title = "Key metrics"};
  const std::optional<XAxis> x = choose_x(view);
  if (!x) {
    section.cards.push_back(
        Card{.title = "Key metrics", .note = "This sweep recorded no points with swept values to chart."});
    return section;
  }
  for (const auto& [metric, title] : kCharted) section.cards.push_back(metric_card(metric, title, view, *x));
  section.cards.push_back(pareto_card(view));
  return section;
}

}  // namespace servesim::html
