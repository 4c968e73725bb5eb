// The tables of a sweep's or search's page in `sim report --html`: the best row per configuration
// (what answers the question, first), and every point with its verdict.
//
// A cheapest search runs, for each combination of the non-replicas keys, a binary search over the
// replicas, and skips counts that could not beat the best configuration found before. So a
// combination's fewest passing replicas may sit above counts that were never run: its row says
// which, rather than reading as the minimum.
#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/reports/html_report_sections.h"
#include "analysis/reports/html_report_sweep.h"
#include "analysis/reports/sweep_report.h"

namespace servesim::html {
namespace {

std::string header_of(const std::string& m) { return is_latency_metric(m) ? m + " (ms)" : m; }

std::string cell(const SweepPoint& p, const std::string& m) {
  const std::optional<double> v = p.metric(m);
  return v ? format_number(*v * (is_latency_metric(m) ? 1000 : 1)) : "-";
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// The metric columns of the best rows: what the question is about, then the SLOs' metrics.
std::vector<std::string> best_metrics(const SweepView& view) {
  std::vector<std::string> out;
  if (!view.minimize.empty()) add_unique(out, view.minimize);
  if (view.cheapest) {
    add_unique(out, "gpus");
    add_unique(out, "cost_per_hour");
  }
  if (!view.cheapest) add_unique(out, "request_throughput");
  for (const Slo& o : view.objectives) {
    if (o.metric != "rejected") add_unique(out, o.metric);
  }
  for (const char* m : {"ttft_p99", "tpot_p99", "slo_attainment"}) add_unique(out, m);
  add_unique(out, "rejected");
  std::vector<std::string> shown;
  for (const std::string& m : out) {
    const bool any = std::any_of(view.points.begin(), view.points.end(),
                                 [&](const SweepPoint& p) { return p.metric(m).has_value(); });
    if (any || m == "rejected") shown.push_back(m);
  }
  return shown;
}

// The points' values of key k, distinct, in the grid's order (or the order they appear).
std::vector<SweptValue> values_of(const SweepView& view, size_t k) {
  if (!view.grid.empty()) return view.grid[k];
  std::vector<SweptValue> out;
  for (const SweepPoint& p : view.points) {
    if (std::find(out.begin(), out.end(), p.keys[k]) == out.end()) out.push_back(p.keys[k]);
  }
  return out;
}

// Every combination of the keys other than `skip`, in grid order (the last key varying fastest).
std::vector<std::vector<SweptValue>> combinations(const SweepView& view, size_t skip) {
  std::vector<std::vector<SweptValue>> out = {{}};
  for (size_t k = 0; k < view.sweep.keys.size(); ++k) {
    if (k == skip) continue;
    std::vector<std::vector<SweptValue>> next;
    for (const auto& prefix : out) {
      for (const SweptValue& v : values_of(view, k)) {
        next.push_back(prefix);
        next.back().push_back(v);
      }
    }
    out = std::move(next);
  }
  return out;
}

bool in_combination(const SweepView& view, const SweepPoint& p, const std::vector<SweptValue>& combo, size_t skip) {
  for (size_t k = 0, c = 0; k < view.sweep.keys.size(); ++k) {
    if (k == skip) continue;
    if (!(p.keys[k] == combo[c++])) return false;
  }
  return true;
}

struct BestRow {
  std::vector<std::string> cells;  // the combination's values
  const SweepPoint* best = nullptr;
  std::string verdict;
  double cost = 0;
};

// The best row of one combination of a cheapest search: its passing probe with the fewest
// replicas, and what is known of the counts below it.
BestRow cheapest_row(const SweepView& view, const std::vector<const SweepPoint*>& probes, size_t rk) {
  BestRow row;
  const bool replicas = rk < view.sweep.keys.size();
  const auto count = [&](const SweepPoint* p) { return replicas ? p->keys[rk].x : 0.0; };
  const SweepPoint* most_missed = nullptr;  // the missing probe with the most replicas
  for (const SweepPoint* p : probes) {
    if (p->pass() && (row.best == nullptr || count(p) < count(row.best))) row.best = p;
    if (!p->pass() && (most_missed == nullptr || count(p) > count(most_missed))) most_missed = p;
  }
  const std::string why_not_run = view.sweep.status == "done"
                                      ? "the search judged they could not beat its best"
                                      : "the search stopped";
  if (probes.empty()) {
    row.verdict = "not run (" + why_not_run + ")";
    return row;
  }
  // The grid's counts never run between the most replicas that missed and the fewest that passed.
  const double ceiling = row.best ? count(row.best) : INFINITY;
  const double floor = most_missed && count(most_missed) < ceiling ? count(most_missed) : -INFINITY;
  std::string unrun;
  for (const SweptValue& v : replicas ? values_of(view, rk) : std::vector<SweptValue>{}) {
    const bool run = std::any_of(probes.begin(), probes.end(), [&](const SweepPoint* p) { return p->keys[rk] == v; });
    if (!run && v.x > floor && v.x < ceiling) unrun += (unrun.empty() ? "" : ", ") + v.text;
  }
  if (row.best) {
    row.cost = row.best->metric(view.minimize).value_or(INFINITY);
    row.verdict = unrun.empty() ? "pass (fewest replicas)"
                                : "pass; fewer not known: replicas " + unrun + " not run (" + why_not_run + ")";
  } else if (!unrun.empty()) {
    row.best = most_missed;
    row.verdict = "miss up to replicas=" + most_missed->keys[rk].text + "; " + unrun + " not run (" + why_not_run + ")";
  } else {
    row.best = most_missed;
    row.verdict = (replicas && probes.size() > 1 ? "miss at every count: " : "miss: ") + most_missed->miss;
  }
  return row;
}

// The best row of every combination of the non-replicas keys: passing rows by cost (the grid's
// order on a tie, as the search breaks ties), then the others in grid order.
std::vector<BestRow> cheapest_rows(const SweepView& view) {
  const size_t rk = view.key_index("replicas");
  std::vector<BestRow> rows;
  for (const std::vector<SweptValue>& combo : combinations(view, rk)) {
    std::vector<const SweepPoint*> probes;
    for (const SweepPoint& p : view.points) {
      if (in_combination(view, p, combo, rk)) probes.push_back(&p);
    }
    BestRow row = cheapest_row(view, probes, rk);
    for (const SweptValue& v : combo) row.cells.push_back(v.text);
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const BestRow& a, const BestRow& b) {
    const bool pa = a.best && a.best->pass(), pb = b.best && b.best->pass();
    if (pa != pb) return pa;
    return pa && a.cost < b.cost;
  });
  return rows;
}

Table cheapest_table(const SweepView& view) {
  const size_t rk = view.key_index("replicas");
  Table t{.title = "Best row per configuration: the fewest replicas that pass, cheapest first",
          .header = {},
          .rows = {}};
  for (size_t k = 0; k < view.sweep.keys.size(); ++k) {
    if (k != rk) t.header.push_back(view.sweep.keys[k]);
  }
  if (rk < view.sweep.keys.size()) t.header.push_back("replicas");
  t.header.push_back("verdict");
  const std::vector<std::string> metrics = best_metrics(view);
  for (const std::string& m : metrics) t.header.push_back(header_of(m));
  t.header.insert(t.header.end(), {"probe", "run"});
  std::vector<BestRow> rows = cheapest_rows(view);
  for (size_t i = 0; i < rows.size(); ++i) {
    BestRow& r = rows[i];
    const bool answer = i == 0 && r.best && r.best->pass();
    std::vector<std::string> cells = r.cells;
    if (rk < view.sweep.keys.size()) cells.push_back(r.best ? r.best->keys[rk].text : "-");
    cells.push_back(answer ? "the answer: " + r.verdict : r.verdict);
    for (const std::string& m : metrics) cells.push_back(r.best ? cell(*r.best, m) : "-");
    cells.push_back(r.best ? std::to_string(r.best->point) : "-");
    cells.push_back(r.best && r.best->run_id > 0 ? std::to_string(r.best->run_id) : "-");
    if (answer) t.highlight.push_back(t.rows.size());
    t.rows.push_back(std::move(cells));
  }
  t.footnote = "One row per combination of the other keys. A row that did not pass shows its probe with the most "
               "replicas. Verdicts are re-derived from the stored runs and SLOs.";
  return t;
}

// A max-rate search: the largest rate that passed, and the smallest that missed above it.
Table max_rate_table(const SweepView& view) {
  const size_t rk = view.key_index("request_rate");
  Table t{.title = "Answer: the largest rate that passed, the smallest that missed above it",
          .header = {"request_rate", "verdict"},
          .rows = {}};
  const std::vector<std::string> metrics = best_metrics(view);
  for (const std::string& m : metrics) t.header.push_back(header_of(m));
  t.header.insert(t.header.end(), {"probe", "run"});
  const SweepPoint *pass = nullptr, *miss = nullptr;
  for (const SweepPoint& p : view.points) {
    if (rk < p.keys.size() && p.pass() && (!pass || p.keys[rk].x > pass->keys[rk].x)) pass = &p;
  }
  for (const SweepPoint& p : view.points) {
    const bool above = !pass || p.keys[rk].x > pass->keys[rk].x;
    if (rk < p.keys.size() && !p.pass() && above && (!miss || p.keys[rk].x < miss->keys[rk].x)) miss = &p;
  }
  for (const SweepPoint* p : {pass, miss}) {
    if (!p) continue;
    std::vector<std::string> cells = {p->keys[rk].text, view.verdict(*p)};
    for (const std::string& m : metrics) cells.push_back(cell(*p, m));
    cells.insert(cells.end(), {std::to_string(p->point), p->run_id > 0 ? std::to_string(p->run_id) : "-"});
    if (p == pass) t.highlight.push_back(t.rows.size());
    t.rows.push_back(std::move(cells));
  }
  return t;
}

// In combination `combo` of the keys but request_rate (key rk): the usable point of the largest
// rate, and the point of the next rate up (nullptr when none).
std::pair<const SweepPoint*, const SweepPoint*> carried_and_next(const SweepView& view,
                                                                 const std::vector<SweptValue>& combo, size_t rk) {
  const SweepPoint *best = nullptr, *next = nullptr;
  for (const SweepPoint& p : view.points) {
    if (in_combination(view, p, combo, rk) && p.pass() && (!best || p.keys[rk].x > best->keys[rk].x)) best = &p;
  }
  for (const SweepPoint& p : view.points) {
    const bool above = !best || p.keys[rk].x > best->keys[rk].x;
    if (in_combination(view, p, combo, rk) && above && (!next || p.keys[rk].x < next->keys[rk].x)) next = &p;
  }
  return {best, next};
}

// A sweep over request_rate: for each combination of the other keys, the largest rate whose point
// is usable (done, not overloaded), and the verdict of the next rate up.
std::optional<Table> carried_rate_table(const SweepView& view) {
  const size_t rk = view.key_index("request_rate");
  if (rk == view.sweep.keys.size() || view.points.empty()) return std::nullopt;
  Table t{.title = "Largest request_rate each configuration carries (done, not overloaded)",
          .header = {},
          .rows = {}};
  for (size_t k = 0; k < view.sweep.keys.size(); ++k) {
    if (k != rk) t.header.push_back(view.sweep.keys[k]);
  }
  t.header.insert(t.header.end(), {"request_rate", "next rate up"});
  std::vector<std::string> metrics;
  for (const char* m : {"request_throughput", "ttft_p99", "tpot_p99", "slo_attainment", "cost_per_hour"}) {
    const bool any = std::any_of(view.points.begin(), view.points.end(),
                                 [&](const SweepPoint& p) { return p.metric(m).has_value(); });
    if (any) metrics.push_back(m);
  }
  for (const std::string& m : metrics) t.header.push_back(header_of(m));
  for (const std::vector<SweptValue>& combo : combinations(view, rk)) {
    const auto [best, next] = carried_and_next(view, combo, rk);
    if (!best && !next) continue;
    std::vector<std::string> cells;
    for (const SweptValue& v : combo) cells.push_back(v.text);
    cells.push_back(best ? best->keys[rk].text : "none");
    cells.push_back(next ? next->keys[rk].text + ": " + view.verdict(*next) : "- (the largest swept)");
    for (const std::string& m : metrics) cells.push_back(best ? cell(*best, m) : "-");
    t.rows.push_back(std::move(cells));
  }
  return t;
}

}  // namespace

const SweepPoint* answer_point(const SweepView& view) {
  if (!view.search) return nullptr;
  if (view.cheapest) {
    const std::vector<BestRow> rows = cheapest_rows(view);
    return !rows.empty() && rows.front().best && rows.front().best->pass() ? rows.front().best : nullptr;
  }
  const size_t rk = view.key_index("request_rate");
  const SweepPoint* best = nullptr;
  for (const SweepPoint& p : view.points) {
    if (rk < p.keys.size() && p.pass() && (!best || p.keys[rk].x > best->keys[rk].x)) best = &p;
  }
  return best;
}

std::optional<Table> best_rows_table(const SweepView& view) {
  if (view.search) return view.cheapest ? cheapest_table(view) : max_rate_table(view);
  return carried_rate_table(view);
}

Table points_table(const SweepView& view) {
  const std::string noun = view.search ? "probe" : "point";
  Table t{.title = std::string(view.search ? "Search " : "Sweep ") + std::to_string(view.sweep.id) + ": every " + noun,
          .header = {noun},
          .rows = {}};
  t.header.insert(t.header.end(), view.sweep.keys.begin(), view.sweep.keys.end());
  t.header.insert(t.header.end(), {"verdict", "run"});
  std::vector<std::string> shown;
  for (const std::string& m : sweep_table_metrics()) {
    if (m == "overloaded") continue;  // the verdict says it
    const bool any = std::any_of(view.points.begin(), view.points.end(),
                                 [&](const SweepPoint& p) { return p.metric(m).has_value(); });
    if (any || (view.search && m == "rejected")) shown.push_back(m);
  }
  for (const std::string& m : shown) t.header.push_back(header_of(m));
  // A max-rate search's probes by rate, a cheapest one's by configuration then replicas: the
  // threshold reads down the table. The probe column keeps the order they ran in.
  std::vector<const SweepPoint*> order;
  for (const SweepPoint& p : view.points) order.push_back(&p);
  if (view.search) {
    const size_t rk = view.key_index(view.cheapest ? "replicas" : "request_rate");
    std::map<std::string, size_t> first_seen;
    for (const SweepPoint* p : order) first_seen.emplace(keys_label(view, *p, rk), first_seen.size());
    std::stable_sort(order.begin(), order.end(), [&](const SweepPoint* a, const SweepPoint* b) {
      const size_t ga = first_seen[keys_label(view, *a, rk)], gb = first_seen[keys_label(view, *b, rk)];
      if (ga != gb) return ga < gb;
      return rk < a->keys.size() && a->keys[rk].x < b->keys[rk].x;
    });
  }
  for (const SweepPoint* p : order) {
    std::vector<std::string> row = {std::to_string(p->point)};
    for (const SweptValue& v : p->keys) row.push_back(v.text);
    row.push_back(view.verdict(*p));
    row.push_back(p->run_id > 0 ? std::to_string(p->run_id) : "-");
    for (const std::string& m : shown) row.push_back(cell(*p, m));
    t.rows.push_back(std::move(row));
  }
  t.footnote = view.search ? "Verdicts re-derived from each probe's run and the search's SLOs: a probe passes when "
                             "its run is done, not overloaded, rejects no request (unless a rejected SLO allows a "
                             "share) and meets every SLO."
                           : "Verdict: ok when the point's run is done and not overloaded (with the requests it "
                             "rejected, if any).";
  return t;
}

}  // namespace servesim::html
