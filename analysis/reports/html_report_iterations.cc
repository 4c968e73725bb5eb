// The iteration charts of `sim report --html`, from the iterations table (`--log iterations`, and
// always for the cpu and cuda backends): duration against batch tokens by kind of iteration, and
// for measuring backends the roofline's prediction against the measured time and its error,
// (predicted - measured) / measured as `sim validate` computes it (signed here, to show the bias).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "analysis/reports/html_report_data.h"
#include "analysis/reports/html_report_sections.h"
#include "analysis/metrics/metrics.h"

namespace servesim::html {
namespace {

constexpr std::array<const char*, 3> kKinds = {"prefill-only", "decode-only", "mixed"};
constexpr size_t kHistogramBins = 40;

// As analysis/calibration/validate.cc classifies iterations.
size_t kind_of(int64_t prefill, int64_t decode) { return decode == 0 ? 0 : prefill == 0 ? 1 : 2; }

std::string missing_note(const ReportRun& run) {
  return run.label() +
         " logged no iterations rows: rerun with --log iterations (the default with "
         "the unit, cpu and cuda backends)";
}

// Every kind's points for one run, each kind sampled by its own stride.
Status scatter_run(Database& db, const ReportRun& run, size_t index, bool several, nlohmann::json& chart) {
  std::array<int64_t, 3> count{};
  Query n(db,
          "SELECT prefill_tokens, decode_tokens, count(*) FROM iterations WHERE run_id = ? "
          "GROUP BY prefill_tokens = 0, decode_tokens = 0");
  if (!n.ok()) return n.error();
  n.bind(1, run.id);
  while (n.step()) count[kind_of(n.integer(0), n.integer(1))] += n.integer(2);
  std::array<int64_t, 3> stride{}, seen{};
  for (size_t k = 0; k < 3; ++k) stride[k] = sample_stride(count[k], kMaxScatterPoints);
  std::array<std::vector<Point>, 3> points;
  Query q(db,
          "SELECT prefill_tokens, decode_tokens, duration FROM iterations WHERE run_id = ? ORDER BY replica, "
          "step");
  if (!q.ok()) return q.error();
  q.bind(1, run.id);
  while (q.step()) {
    const int64_t prefill = q.integer(0), decode = q.integer(1);
    const size_t k = kind_of(prefill, decode);
    if (seen[k]++ % stride[k] != 0) continue;
    points[k].push_back({static_cast<double>(prefill + decode), q.real(2) * run.latency_scale()});
  }
  for (size_t k = 0; k < 3; ++k) {
    if (points[k].empty()) continue;
    const std::string label = several ? run.label() + ", " + kKinds[k] : kKinds[k];
    // Colour is the kind (blue, orange, green), in every run; the marker's shape is the run.
    nlohmann::json s = make_series(label, static_cast<int>(k), "points");
    if (several) {
      s["shape"] = index;
      s["radius"] = 2.5;
    }
    add_points(s, points[k]);
    chart["series"].push_back(std::move(s));
  }
  return Ok{};
}

// A step of 1, 2, 2.5 or 5 times a power of ten, at least `span / bins`.
double nice_width(double span, size_t bins) {
  const double raw = std::max(span / static_cast<double>(bins), 1e-9);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

// Predicted against measured (sampled) and the error histogram (every iteration) of measuring runs.
Status prediction_cards(Database& db, const std::vector<ReportRun>& runs, Section& section) {
  Card scatter{.title = "Predicted vs measured iteration time"};
  scatter.chart = make_chart("line", "measured (ms)", "roofline prediction (ms)");
  scatter.chart["logToggle"] = true;
  std::vector<std::vector<double>> errors(runs.size());
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].measuring()) continue;
    Query q(db,
            "SELECT duration, predicted FROM iterations WHERE run_id = ? AND predicted IS NOT NULL "
            "AND duration > 0 ORDER BY replica, step");
    if (!q.ok()) return q.error();
    q.bind(1, runs[i].id);
    std::vector<Point> all;
    while (q.step()) all.push_back({q.real(0) * 1000, q.real(1) * 1000});
    if (all.empty()) continue;
    const int64_t stride = sample_stride(static_cast<int64_t>(all.size()), kMaxScatterPoints);
    std::vector<Point> sampled;
    for (size_t j = 0; j < all.size(); j += static_cast<size_t>(stride)) sampled.push_back(all[j]);
    nlohmann::json s = make_series(runs[i].label(), static_cast<int>(i), "points");
    add_points(s, sampled);
    scatter.chart["series"].push_back(std::move(s));
    for (const Point& p : all) {
      errors[i].push_back(100 * (p.y - p.x) / p.x);
      lo = std::min({lo, p.x, p.y});
      hi = std::max({hi, p.x, p.y});
    }
  }
  if (scatter.chart["series"].empty()) return Ok{};
  nlohmann::json diagonal = make_series("predicted = measured", 7, "dash");
  add_points(diagonal, std::vector<Point>{{lo, lo}, {hi, hi}});
  scatter.chart["series"].push_back(std::move(diagonal));
  scatter.caption = "Each point one iteration (up to " + std::to_string(kMaxScatterPoints) +
                    " per run, every k-th): the time the backend measured and the roofline's prediction "
                    "for the same batch. Points above the dashed line are over-predicted.";
  section.cards.push_back(std::move(scatter));

  // Shared bins over the middle 99 % of all runs' errors; the tails fall into the edge bins.
  std::vector<double> pooled;
  for (const auto& e : errors) pooled.insert(pooled.end(), e.begin(), e.end());
  std::sort(pooled.begin(), pooled.end());
  const double from = percentile(pooled, 0.5), to = percentile(pooled, 99.5);
  const double w = nice_width(to - from, kHistogramBins);
  const double first = std::floor(from / w) * w;
  const auto bins = static_cast<size_t>(std::max(1.0, std::ceil((to - first) / w)));
  Card histogram{.title = "Prediction error"};
  histogram.chart = make_chart("bar", "(predicted - measured) / measured (%)", "iterations");
  for (size_t b = 0; b < bins; ++b) {
    char label[48];
    std::snprintf(label, sizeof label, "%.4g", first + (static_cast<double>(b) + 0.5) * w);
    histogram.chart["x"]["labels"].push_back(label);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (errors[i].empty()) continue;
    std::vector<int64_t> counts(bins, 0);
    for (const double e : errors[i]) {
      const double b = std::floor((e - first) / w);
      counts[static_cast<size_t>(std::clamp(b, 0.0, static_cast<double>(bins - 1)))]++;
    }
    nlohmann::json s = make_series(runs[i].label(), static_cast<int>(i), "bar");
    s.erase("x");
    s["y"] = counts;
    histogram.chart["series"].push_back(std::move(s));
  }
  histogram.caption = "Iterations by the roofline's signed error, in bins of " + format_number(w) +
                      " points (labels: bin centres); the first and last bins also hold the 0.5 % "
                      "tails. `sim validate` prints the same errors' absolute mean (MAPE).";
  section.cards.push_back(std::move(histogram));
  return Ok{};
}

}  // namespace

Result<Section> iterations_section(Database& db, const std::vector<ReportRun>& runs) {
  Section section{.title = "Iterations"};
  Card scatter{.title = "Iteration duration by batch tokens"};
  const bool all_unit = std::all_of(runs.begin(), runs.end(), [](const ReportRun& r) { return r.unit(); });
  scatter.chart = make_chart("line", "batch tokens (prefill + decode)",
                             std::string("duration (") + (all_unit ? "steps" : "ms") + ")");
  scatter.chart["logToggle"] = true;
  std::string missing;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (count_rows(db, "iterations", runs[i].id) == 0) {
      missing += (missing.empty() ? "" : "; ") + missing_note(runs[i]);
      continue;
    }
    if (Status s = scatter_run(db, runs[i], i, runs.size() > 1, scatter.chart); !s.ok()) return s.error();
  }
  if (scatter.chart["series"].empty()) {
    scatter.note = missing + ".";
  } else {
    scatter.caption = std::string(runs.size() > 1 ? "Colour: the kind of iteration; shape: the run (circles the first, "
                                                    "triangles the second, then squares, diamonds, stars). "
                                                  : "") +
                      "Each point one iteration, by kind: prefill-only, decode-only, or mixed (up to " +
                      std::to_string(kMaxScatterPoints) + " per kind and run, every k-th in time order)." +
                      (missing.empty() ? "" : " Not shown: " + missing + ".");
  }
  section.cards.push_back(std::move(scatter));
  if (Status s = prediction_cards(db, runs, section); !s.ok()) return s.error();
  return section;
}

}  // namespace servesim::html
