// The page of a sweep (or search) in `sim report --html`: reading the points and judging each, and
// the page's order: a search's answer first, then the best row per configuration, the points'
// table with its verdict column, and the charts.
#include "analysis/reports/html_report_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <toml++/toml.h>

#include "analysis/reports/html_report_sections.h"
#include "analysis/reports/model_band.h"
#include "analysis/reports/seed_stats.h"
#include "sim/config/toml_fields.h"

namespace servesim::html {
namespace {

Status read_points(Database& db, SweepView& view) {
  const StoredSweep& sweep = view.sweep;
  std::string sql = "SELECT point, status, run_id, error";
  for (const std::string& k : sweep.keys) sql += ", " + quote_identifier(k);
  Query q(db, sql + " FROM sweep_points WHERE sweep_id = ? ORDER BY point");
  if (!q.ok()) return q.error();
  q.bind(1, sweep.id);
  while (q.step()) {
    SweepPoint p;
    p.point = q.integer(0);
    p.run_id = q.null(2) ? 0 : q.integer(2);
    p.status = q.text(1);
    p.error = q.text(3);
    p.name = "point " + std::to_string(p.point) + ":";
    for (size_t k = 0; k < sweep.keys.size(); ++k) {
      const int c = static_cast<int>(4 + k);
      SweptValue v;
      v.null = q.null(c);
      v.number = q.number(c);
      v.x = q.real(c);
      v.text = v.null ? "-" : q.text(c);  // SQLite's text of a number is its shortest exact form
      if (v.number && v.text.size() > 8) {  // a rate a search bisected to: 6.37037, not 6.37037037037037
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", v.x);
        v.text = buf;
      }
      p.name += std::string(k == 0 ? " " : ", ") + sweep.keys[k] + "=" + v.text;
      p.keys.push_back(std::move(v));
    }
    view.points.push_back(std::move(p));
  }
  Query m(db,
          "SELECT p.point, m.name, m.value FROM sweep_points p JOIN metrics m ON m.run_id = p.run_id "
          "WHERE p.sweep_id = ? AND m.value IS NOT NULL ORDER BY p.point, m.name");
  if (!m.ok()) return m.error();
  m.bind(1, sweep.id);
  size_t at = 0;  // both in point order
  while (m.step()) {
    const int64_t point = m.integer(0);
    while (at < view.points.size() && view.points[at].point < point) ++at;
    if (at < view.points.size() && view.points[at].point == point) {
      view.points[at].metrics.push_back({m.text(1), m.real(2)});
    }
  }
  return Ok{};
}

SweptValue swept_value(const toml::node& n) {
  SweptValue v{.null = false, .number = true, .x = 0, .text = plain_value(n)};
  if (const auto* i = n.as_integer()) {
    v.x = static_cast<double>(i->get());
  } else if (const auto* f = n.as_floating_point()) {
    v.x = f->get();
  } else if (const auto* b = n.as_boolean()) {
    v.x = b->get() ? 1 : 0;  // as sweep_points stores it
  } else {
    v.number = false;
  }
  return v;
}

// The [grid] of the definition, key by key in sweep.keys order; left empty unless every key has
// an array of plain values there.
void read_grid(const toml::table& t, SweepView& view) {
  const toml::table* grid = t["grid"].as_table();
  if (grid == nullptr) return;
  std::vector<std::vector<SweptValue>> out;
  for (const std::string& key : view.sweep.keys) {
    const toml::array* values = grid->get_as<toml::array>(key);
    if (values == nullptr || values->empty()) return;
    std::vector<SweptValue> column;
    for (const toml::node& n : *values) {
      if (n.is_table() || n.is_array()) return;
      column.push_back(swept_value(n));
    }
    out.push_back(std::move(column));
  }
  view.grid = std::move(out);
}

// "the least cost_per_hour under p99_ttft <= 2 s, rejecting no request; fixed: trace=..., ...".
std::string definition(const toml::table& t, const SweepView& view) {
  std::string slos;
  bool rejected = false;
  for (const Slo& o : view.objectives) {
    slos += (slos.empty() ? "" : ", ") + o.key + (o.at_least ? " \u2265 " : " \u2264 ") + o.bound_text();
    rejected = rejected || o.metric == "rejected";
  }
  if (!rejected) slos += std::string(slos.empty() ? "" : ", ") + "no request rejected";
  std::string out = view.cheapest ? "The configuration of the grid with the least " + view.minimize
                                  : std::string("The largest request_rate");
  out += " that is not overloaded and meets " + slos + ".";
  std::string fixed;
  if (const toml::table* f = t["fixed"].as_table()) {
    for (const char* key : {"trace", "model", "hardware", "tp", "replicas", "request_rate", "time_scale"}) {
      const toml::node* n = f->get(key);
      if (n != nullptr && !n->is_table() && !n->is_array() && view.key_index(key) == view.sweep.keys.size()) {
        fixed += (fixed.empty() ? "" : ", ") + std::string(key) + "=" + plain_value(*n);
      }
    }
  }
  return fixed.empty() ? out : out + " Fixed: " + fixed + ".";
}

// The definition's SLOs, minimize and mode (a search), and per-request goodput objectives
// (milliseconds, as vLLM's --goodput), drawn as lines on the p99 charts.
void read_spec(SweepView& view) {
  if (view.sweep.spec.empty()) {
    if (view.search) view.notes.push_back("This search stored no definition: its SLOs are unknown.");
    return;
  }
  Result<toml::table> parsed = parse_toml(view.sweep.spec, "the sweep's stored definition");
  if (!parsed.ok()) {
    view.notes.push_back("The stored definition could not be read (" + parsed.error().message +
                         "): the verdicts leave out its SLOs.");
    return;
  }
  const toml::table& t = parsed.value();
  read_grid(t, view);
  if (view.search) {
    view.cheapest = t["mode"].value_or(std::string()) == "cheapest" || t["grid"].as_table() != nullptr;
    if (view.cheapest) view.minimize = t["minimize"].value_or(std::string("gpus"));
    if (const toml::table* slo = t["slo"].as_table()) {
      Result<std::vector<Slo>> o = slos_from_table(*slo);
      if (o.ok()) {
        view.objectives = o.value();
      } else {
        view.notes.push_back("The search's SLOs could not be read (" + o.error().message +
                             "): the verdicts leave them out.");
      }
    }
    for (const Slo& o : view.objectives) {
      if (o.latency()) view.lines.push_back({o.metric, "SLO " + o.key + " \u2264 " + o.bound_text(), o.bound * 1000});
    }
  }
  if (view.search) view.definition = definition(t, view);
  if (const toml::table* goodput = t["fixed"]["goodput"].as_table()) {
    for (const auto& [key, v] : *goodput) {
      const std::string k(key.str());
      if (const std::optional<double> ms = v.value<double>()) {
        view.lines.push_back(
            {k + "_p99", "goodput SLO " + k + " \u2264 " + format_number(*ms) + " ms (per request)", *ms});
      }
    }
  }
}

std::string metric_label(const SeedMetric& m) {
  return std::string(m.name) + (m.unit.empty() ? "" : " (" + std::string(m.unit) + ")");
}

Result<Table> seeds_table(Database& db, const StoredSweep& sweep) {
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
  return t;
}

Result<Table> model_band_table(Database& db, const StoredSweep& sweep) {
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
  return t;
}

// The summary of a seeds sweep (mean and 95 % CI over the seeds) or of a model-uncertainty sweep
// (the band over the calibration samples), as `sim report --sweep` prints it; none for other kinds.
Result<std::optional<Table>> summary_table(Database& db, const StoredSweep& sweep) {
  if (sweep.kind != "seeds" && sweep.kind != "model-uncertainty") return std::optional<Table>();
  Result<Table> t = sweep.kind == "seeds" ? seeds_table(db, sweep) : model_band_table(db, sweep);
  if (!t.ok()) return t.error();
  return std::optional<Table>(std::move(t.value()));
}

std::string subtitle(Database& db, const SweepView& view) {
  std::string keys;
  for (const std::string& k : view.sweep.keys) keys += (keys.empty() ? "" : ", ") + k;
  const std::string what =
      view.search ? " probes run" : " of " + std::to_string(view.sweep.points) + " points recorded";
  return "Database " + db.path() + "; servesim " SERVESIM_VERSION "; " + std::to_string(view.points.size()) + what +
         "; " + (view.search ? "searched" : "swept") + ": " + (keys.empty() ? "-" : keys) + ".";
}

// The number after `after` in `text` (the rate of "max request_rate 6.37 req/s ..."), if any.
std::optional<double> number_after(const std::string& text, const std::string& after) {
  const size_t at = text.find(after);
  if (at == std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str() + at + after.size(), &end);
  return end != text.c_str() + at + after.size() ? std::optional<double>(v) : std::nullopt;
}

// When the answer the search stored is not the one its stored runs and SLOs give now (a search
// run by a servesim that judged probes otherwise, e.g. let a probe that rejected requests pass):
// a banner that says so, since the tables show the verdicts re-derived here.
std::optional<std::string> answer_mismatch(const SweepView& view) {
  const std::string& stored = view.sweep.answer;
  if (!view.search || stored.empty() || stored == "interrupted") return std::nullopt;
  const SweepPoint* a = answer_point(view);
  std::string derived = "none passes";
  bool same = false;
  if (view.cheapest) {
    const bool stored_found = stored.rfind("cheapest: ", 0) == 0;
    same = stored_found == (a != nullptr);
    if (a) {
      derived.clear();
      for (size_t k = 0; k < view.sweep.keys.size(); ++k) {
        const std::string item = view.sweep.keys[k] + "=" + a->keys[k].text;
        derived += (derived.empty() ? "" : " ") + item;
        same = same && stored.find(item) != std::string::npos;
      }
    }
  } else {
    std::optional<double> rate = number_after(stored, "max request_rate ");
    if (!rate) rate = number_after(stored, "every rate up to ");
    const size_t rk = view.key_index("request_rate");
    same = rate.has_value() == (a != nullptr);
    if (a && rk < a->keys.size()) {
      derived = "max request_rate " + a->keys[rk].text;
      same = same && std::fabs(*rate - a->keys[rk].x) <= 1e-3 * std::fabs(a->keys[rk].x);
    }
  }
  if (same) return std::nullopt;
  return "The answer stored by this search (" + stored + ") is not what its runs and SLOs give under the rules "
         "of this servesim (" + derived + "): the search judged its probes otherwise (an older servesim let a probe "
         "that rejected requests pass). The tables show the verdicts re-derived here.";
}

void add_banners(const SweepView& view, Page& page) {
  if (view.sweep.status != "done") {
    page.banners.push_back({view.sweep.status == "failed",
                            "The " + std::string(view.search ? "search" : "sweep") + "'s status is " +
                                view.sweep.status + ": some points may be missing."});
  }
  const auto failed = std::count_if(view.points.begin(), view.points.end(),
                                    [](const SweepPoint& p) { return p.status != "done"; });
  if (failed > 0) {
    page.banners.push_back({false, std::to_string(failed) +
                                       " point(s) did not complete; the table gives their errors, and the "
                                       "charts leave them out."});
  }
  for (const std::string& n : view.notes) page.banners.push_back({false, n});
  if (const std::optional<std::string> m = answer_mismatch(view)) page.banners.push_back({true, *m});
}

}  // namespace

bool is_latency_metric(const std::string& m) {
  return m.rfind("ttft", 0) == 0 || m.rfind("tpot", 0) == 0 || m.rfind("e2el", 0) == 0 || m.rfind("itl", 0) == 0 ||
         m.rfind("queue", 0) == 0;
}

size_t SweepView::key_index(std::string_view key) const {
  return static_cast<size_t>(std::find(sweep.keys.begin(), sweep.keys.end(), key) - sweep.keys.begin());
}

std::string SweepView::verdict(const SweepPoint& p) const {
  if (search) return p.pass() ? "pass" : "miss: " + p.miss;
  const double rejected = p.metric("rejected").value_or(0);
  if (p.pass() && rejected > 0) return "ok, " + format_number(rejected) + " rejected";
  return p.pass() ? "ok" : p.miss;
}

std::string keys_label(const SweepView& view, const SweepPoint& p, size_t skip) {
  std::string out;
  for (size_t k = 0; k < view.sweep.keys.size(); ++k) {
    if (k != skip) out += (out.empty() ? "" : ", ") + view.sweep.keys[k] + "=" + p.keys[k].text;
  }
  return out;
}

Result<SweepView> read_sweep_view(Database& db, std::optional<int64_t> sweep_id) {
  Result<StoredSweep> read = read_sweep(db, sweep_id && *sweep_id > 0 ? sweep_id : std::nullopt);
  if (!read.ok()) return read.error();
  SweepView view;
  view.sweep = read.value();
  view.search = view.sweep.kind == "search";
  if (Status s = read_points(db, view); !s.ok()) return s.error();
  read_spec(view);
  // A sweep has no SLOs: its verdict is only whether the point is usable (done, not overloaded);
  // its rejections are a property of the configuration, counted in the verdict, not a miss.
  const std::vector<Slo> any_rejected = {
      Slo{.key = "rejected", .metric = "rejected", .bound = 1, .at_least = false, .unit = "", .given = "1"}};
  for (SweepPoint& p : view.points) {
    p.miss = slo_miss(view.search ? view.objectives : any_rejected, p.status, p.error, p.metrics);
  }
  return view;
}

Result<Page> sweep_page(Database& db, std::optional<int64_t> sweep_id) {
  Result<SweepView> read = read_sweep_view(db, sweep_id);
  if (!read.ok()) return read.error();
  const SweepView& view = read.value();
  Page page;
  page.title = "servesim report: " + std::string(view.search ? "search " : "sweep ") + std::to_string(view.sweep.id) +
               (view.sweep.name.empty() ? "" : " (" + view.sweep.name + ")");
  page.subtitle = subtitle(db, view);
  if (view.search) {
    page.answer = view.sweep.answer.empty() ? "(none stored: the search did not finish)" : view.sweep.answer;
    page.answer_detail = view.definition;
  }
  add_banners(view, page);
  Result<std::optional<Table>> summary = summary_table(db, view.sweep);
  if (!summary.ok()) return summary.error();
  if (summary.value()) page.tables.push_back(std::move(*summary.value()));
  if (std::optional<Table> best = best_rows_table(view)) page.tables.push_back(std::move(*best));
  page.tables.push_back(points_table(view));
  for (Table& t : page.tables) t.wide = true;
  page.sections.push_back(sweep_charts(view));
  return page;
}

}  // namespace servesim::html
