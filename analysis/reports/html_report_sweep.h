// The page of a sweep or a search in `sim report --html`, in its parts: the stored points with a
// verdict on each (html_report_sweep.cc reads them), the tables that lead the page (the search's
// answer and its best row per configuration, html_report_search.cc), and the charts of each key
// metric against the swept value (html_report_sweep_charts.cc).
//
// A verdict is re-derived here from what the database holds, by the rule `sim search` applies
// (analysis/metrics/slo.h): for a search, "pass" or "miss: why" against its stored SLOs; for a sweep, which
// has no SLOs, "ok" or what makes the point unusable (not done, overloaded, requests rejected).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/reports/html_report_page.h"
#include "analysis/metrics/metrics.h"
#include "analysis/metrics/slo.h"
#include "analysis/storage/sweep_db.h"

namespace servesim::html {

// A swept key's value at one point, as SQLite holds it.
struct SweptValue {
  bool null = true, number = false;
  double x = 0;
  std::string text;  // as shown ("-" when null)
  bool operator==(const SweptValue& o) const {
    return null == o.null && number == o.number && (number ? x == o.x : text == o.text);
  }
};

struct SweepPoint {
  int64_t point = 0, run_id = 0;
  std::string status, error;
  std::vector<SweptValue> keys;  // one per swept key
  std::vector<Metric> metrics;
  std::string name;  // "point 3: replicas=2, tp=4"
  std::string miss;  // why the verdict is not a pass; "" when it is (see pass())
  bool pass() const { return miss.empty(); }
  bool overloaded() const { return metric("overloaded").value_or(0) > 0; }
  std::optional<double> metric(std::string_view metric_name) const { return find_metric(metrics, metric_name); }
};

// A horizontal line on a metric's chart: an SLO of the search, or a per-request goodput objective.
struct SloLine {
  std::string metric, label;
  double ms;
};

// A sweep as the page shows it.
struct SweepView {
  StoredSweep sweep;
  bool search = false;
  std::vector<SweepPoint> points;        // in point order (a search's: the order run)
  std::vector<Slo> objectives;  // a search's SLOs
  std::string minimize;                  // a cheapest search's cost metric ("" for others)
  bool cheapest = false;                 // a cheapest-configuration search (else max rate)
  std::vector<SloLine> lines;
  // Each swept key's values as the stored definition's [grid] gives them, in sweep.keys order;
  // empty when the definition has no such grid (then only the points tell which values exist).
  std::vector<std::vector<SweptValue>> grid;
  std::string definition;                // a search's question in one line (see read_spec)
  std::vector<std::string> notes;        // what could not be read from the spec (shown as banners)

  // The verdict column's text for point p: "pass", "miss: ...", "ok", "overloaded", ...
  std::string verdict(const SweepPoint& p) const;
  // The key's index in sweep.keys; keys.size() when it is not swept.
  size_t key_index(std::string_view key) const;
};

// Reads sweep `sweep_id` (nullopt: the latest) and its points, and judges each point.
Result<SweepView> read_sweep_view(Database& db, std::optional<int64_t> sweep_id);

// The tables that lead a search's page: for a cheapest search, the best row of each configuration
// of the non-replicas keys (the passing probe with the fewest replicas), cheapest first; for a
// max-rate search, the largest rate that passed and the smallest that missed above it. For a sweep
// that swept request_rate: the largest rate each configuration carries (html_report_search.cc).
std::optional<Table> best_rows_table(const SweepView& view);

// The probe that answers a search, as re-derived: for a cheapest search, the passing probe of least
// cost (the grid's order on a tie), for a max-rate search the passing probe of the largest rate;
// null for a sweep or when none passed (html_report_search.cc).
const SweepPoint* answer_point(const SweepView& view);

// Every point: its swept values, verdict, run and key metrics (html_report_search.cc).
Table points_table(const SweepView& view);

// Each key metric against the swept value, and the cost/latency frontier
// (html_report_sweep_charts.cc).
Section sweep_charts(const SweepView& view);

// Where a latency chart's y axis stops so that overloaded points (hundreds of seconds) do not
// flatten the rest: 4 times the largest SLO line on it when there is one, else 1.1 times the
// largest value of a point that is not overloaded; nullopt when every value fits under it (or no
// point is usable). Values in the chart's unit (ms).
std::optional<double> clip_ceiling(const std::vector<std::pair<double, bool>>& value_overloaded,
                                   const std::vector<double>& slo_lines);

// "a=1, b=x" of the keys other than skip (a key index; keys.size(): none).
std::string keys_label(const SweepView& view, const SweepPoint& p, size_t skip);

bool is_latency_metric(const std::string& m);

}  // namespace servesim::html
