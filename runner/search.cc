#include "runner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "analysis/sweep_db.h"
#include "backends/hardware.h"
#include "backends/roofline_backend.h"
#include "sim/config.h"
#include "sim/presets.h"
#include "sim/toml_fields.h"

namespace servesim {
namespace {

const char* const kStats[] = {"mean", "p50", "p90", "p99"};
const char* const kLatencies[] = {"ttft", "tpot", "itl", "e2el", "queue"};

std::string known_slo_keys() {
  std::string out;
  for (const char* s : kStats) {
    for (const char* l : kLatencies) out += std::string(out.empty() ? "" : ", ") + s + "_" + l;
  }
  return out + ", slo_attainment, rejected";
}

std::string rate_text(double r) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", r);
  return buf;
}

std::optional<double> metric_of(const PointOutcome& o, const std::string& name) {
  return find_metric(o.metrics, name);
}

// The cost a probe's configuration has before it runs (gpus, cost_per_hour), or nullopt when only a
// run can tell (cost_per_million_output_tokens, or a configuration that does not resolve).
std::optional<double> cost_before_run(const toml::table& table, const std::string& minimize) {
  if (minimize == "cost_per_million_output_tokens") return std::nullopt;
  Result<RunConfig> c = resolve_config(table);
  if (!c.ok()) return std::nullopt;
  const double gpus = static_cast<double>(c.value().replicas) * c.value().tp;
  if (minimize == "gpus") return gpus;
  double price = c.value().price_per_hour_usd;
  if (price < 0) {
    Result<std::string> path = resolve_preset(c.value().hardware.empty() ? kDefaultHardware : c.value().hardware,
                                              PresetKind::kHardware, "hardware");
    if (!path.ok()) return std::nullopt;
    Result<HardwareSpec> hw = load_hardware(path.value());
    if (!hw.ok()) return std::nullopt;
    price = hw.value().price_per_hour_usd;
  }
  if (!(price > 0)) return std::nullopt;
  return gpus * price;
}

}  // namespace

Result<Slo> parse_slo(const std::string& token) {
  const size_t eq = token.find('=');
  const std::string quoted = "--slo '" + token + "'";
  if (eq == std::string::npos || eq == 0) {
    return Error{quoted + ": expected KEY=VALUE, e.g. p99_ttft=2s (keys: " + known_slo_keys() + ")"};
  }
  Slo slo;
  slo.key = token.substr(0, eq);
  std::string value = token.substr(eq + 1);
  if (slo.key == "slo_attainment" || slo.key == "rejected") {
    slo.metric = slo.key;
    slo.at_least = slo.key == "slo_attainment";
  } else {
    const size_t us = slo.key.find('_');
    const std::string stat = slo.key.substr(0, us), what = us == std::string::npos ? "" : slo.key.substr(us + 1);
    const bool ok_stat = std::find(std::begin(kStats), std::end(kStats), stat) != std::end(kStats);
    const bool ok_what = std::find(std::begin(kLatencies), std::end(kLatencies), what) != std::end(kLatencies);
    if (!ok_stat || !ok_what) {
      return Error{quoted + ": unknown SLO '" + slo.key + "' (known: " + known_slo_keys() + ")"};
    }
    slo.metric = what + "_" + stat;
  }
  double scale = 1;
  const bool time = slo.metric != "slo_attainment" && slo.metric != "rejected";
  if (time && value.size() > 2 && value.compare(value.size() - 2, 2, "ms") == 0) {
    scale = 1e-3;
    value.resize(value.size() - 2);
  } else if (time && value.size() > 1 && value.back() == 's') {
    value.pop_back();
  } else if (!time && !value.empty() && value.back() == '%') {
    scale = 0.01;
    value.pop_back();
  }
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v) || v < 0 ||
      (time && v == 0)) {
    return Error{quoted + ": expected " +
                 (time ? std::string("a time > 0 with s or ms, e.g. 2s or 150ms")
                       : std::string("a fraction in [0, 1], e.g. 0.99 or 99%"))};
  }
  slo.bound = v * scale;
  if (!time && slo.bound > 1) return Error{quoted + ": expected a fraction in [0, 1], e.g. 0.99 or 99%"};
  return slo;
}

std::string slo_miss(const std::vector<Slo>& slos, const PointOutcome& probe) {
  if (probe.status != "done") return probe.status + (probe.error.empty() ? "" : ": " + probe.error);
  if (metric_of(probe, "overloaded").value_or(0) > 0) return "overloaded";
  for (const Slo& s : slos) {
    std::optional<double> v;
    if (s.metric == "rejected") {
      const double rejected = metric_of(probe, "rejected").value_or(0);
      const double total = rejected + metric_of(probe, "completed").value_or(0);
      v = total > 0 ? rejected / total : 0;
    } else {
      v = metric_of(probe, s.metric);
    }
    if (!v) return s.key + " not measured";
    if (s.at_least ? *v < s.bound : *v > s.bound) {
      char buf[160];
      const bool time = s.metric != "slo_attainment" && s.metric != "rejected";
      std::snprintf(buf, sizeof buf, time ? "%s %.4g s > %.4g s" : (s.at_least ? "%s %.4g < %.4g" : "%s %.4g > %.4g"),
                    s.key.c_str(), *v, s.bound);
      return buf;
    }
  }
  return "";
}

std::string SearchSpec::to_toml() const {
  toml::table t;
  if (!name.empty()) t.insert("name", name);
  t.insert("mode", grid.empty() ? "max_rate" : "cheapest");
  toml::table base = fixed;
  base.erase("db");
  t.insert("fixed", std::move(base));
  toml::table g;
  for (const SweepAxis& a : grid) g.insert(a.key, a.values);
  if (!grid.empty()) t.insert("grid", std::move(g));
  toml::table s;
  for (const Slo& slo : slos) s.insert(slo.key, slo.bound);
  t.insert("slo", std::move(s));
  t.insert("minimize", minimize);
  t.insert("start_rate", start_rate);
  t.insert("precision", precision);
  std::ostringstream out;
  out << toml::toml_formatter(t);
  return out.str();
}

Status check_search(const SearchSpec& spec) {
  if (spec.slos.empty()) {
    return Error{"no SLO: give --slo KEY=VALUE (e.g. --slo p99_ttft=2s; keys: " + known_slo_keys() + ")"};
  }
  for (const Slo& s : spec.slos) {
    if (s.metric == "slo_attainment" && !spec.fixed.contains("goodput")) {
      return Error{"--slo slo_attainment needs --goodput (the per-request SLOs it counts)"};
    }
  }
  for (const SweepAxis& a : spec.grid) {
    if (a.key == "request_rate") {
      return Error{"grid key 'request_rate': the cheapest-configuration search serves one rate (give "
                   "--request-rate R); to find the largest rate, search without a grid"};
    }
  }
  if (!(spec.precision > 0 && spec.precision < 1)) return Error{"--precision: expected a fraction in (0, 1)"};
  if (!(spec.start_rate > 0 && spec.start_rate < spec.max_rate)) {
    return Error{"--start-rate: expected a rate > 0 (requests per second)"};
  }
  SweepSpec sweep;
  sweep.fixed = spec.fixed;
  sweep.grid = spec.grid;
  if (sweep.grid.empty()) {  // check the base configuration as one point
    SweepAxis axis{"request_rate", {}};
    axis.values.push_back(spec.start_rate);
    sweep.grid.push_back(std::move(axis));
  }
  return check_sweep(sweep);
}

Result<SearchResult> run_search(const SearchSpec& spec, const SearchOptions& options) {
  SearchResult result;
  result.db_path = sweep_db_path(SweepSpec{"", "summary", spec.fixed, {}});
  Result<std::unique_ptr<Database>> opened = Database::open(result.db_path);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  const bool max_rate = spec.grid.empty();
  for (const SweepAxis& a : spec.grid) result.keys.push_back(a.key);
  if (max_rate) result.keys.push_back("request_rate");
  SweepInfo info{spec.name, "search", spec.to_toml(), result.keys, 0};
  Result<int64_t> id = begin_sweep(db, info);
  if (!id.ok()) return id.error();
  result.sweep_id = id.value();
  WorkloadCache cache;

  // Runs a round of probes in parallel; returns their indices in result.probes.
  auto run_round = [&](std::vector<toml::table> tables, std::vector<std::vector<const toml::node*>> values) {
    std::vector<int64_t> ids;
    for (size_t i = 0; i < tables.size(); ++i) {
      ids.push_back(static_cast<int64_t>(result.probes.size() + i));
      tables[i].insert_or_assign("name", (spec.name.empty() ? std::string("search") : spec.name) + " probe " +
                                             std::to_string(ids.back()));
      if (!tables[i].contains("log")) tables[i].insert("log", "summary");
    }
    std::vector<PointOutcome> out = run_points(tables, ids, values, result.keys, result.sweep_id,
                                               result.db_path, options.jobs, cache, options.stop);
    std::vector<size_t> indices;
    for (size_t i = 0; i < out.size(); ++i) {
      SearchProbe p;
      p.point = ids[i];
      p.values = values[i];
      p.outcome = std::move(out[i]);
      p.miss = slo_miss(spec.slos, p.outcome);
      indices.push_back(result.probes.size());
      result.probes.push_back(std::move(p));
      if (options.on_probe) options.on_probe(result.probes.back());
    }
    return indices;
  };
  auto stopped = [&] { return options.stop != nullptr && options.stop->load(); };

  if (max_rate) {
    auto rate_probe = [&](const std::vector<double>& rates) {
      std::vector<toml::table> tables;
      std::vector<std::vector<const toml::node*>> values;
      for (double r : rates) {
        toml::table t = spec.fixed;
        t.insert_or_assign("request_rate", r);
        t.erase("time_scale");
        tables.push_back(std::move(t));
        auto v = std::make_shared<toml::array>();
        v->push_back(r);
        values.push_back({v->get(0)});
        result.owned_rates.push_back(std::move(v));
      }
      return run_round(std::move(tables), std::move(values));
    };
    double lo = 0, hi = 0;  // the largest rate that passed, the smallest that missed (0: none yet)
    int64_t best = -1;
    double r = spec.start_rate;
    while (!stopped()) {  // exponential phase
      const size_t i = rate_probe({r}).front();
      if (result.probes[i].miss.empty()) {
        lo = r;
        best = static_cast<int64_t>(i);
        if (hi > 0) break;
        if (r * 2 > spec.max_rate) break;
        r *= 2;
      } else {
        hi = r;
        if (lo > 0) break;
        if (r / 2 < 1e-6) break;
        r /= 2;
      }
    }
    const int k = std::max(1, options.jobs);
    while (!stopped() && lo > 0 && hi > 0 && hi / lo - 1 > spec.precision) {
      std::vector<double> rates;
      for (int j = 1; j <= k; ++j) rates.push_back(lo + (hi - lo) * j / (k + 1));
      const std::vector<size_t> got = rate_probe(rates);
      // Monotone: the pass below the first miss raises lo; the first miss lowers hi.
      for (size_t j = 0; j < got.size(); ++j) {
        if (result.probes[got[j]].miss.empty()) {
          lo = rates[j];
          best = static_cast<int64_t>(got[j]);
        } else {
          hi = rates[j];
          break;
        }
      }
    }
    result.rate = lo;
    result.found = lo > 0;
    result.best_point = best;
    if (stopped()) {
      result.answer = "interrupted";
    } else if (!result.found) {
      result.answer = "no rate down to 1e-6 req/s meets the SLOs (" + result.probes.back().miss + ")";
    } else if (hi == 0) {
      result.answer = "every rate up to " + rate_text(lo) + " req/s meets the SLOs (the search stops there)";
    } else {
      result.answer = "max request_rate " + rate_text(lo) + " req/s meets the SLOs (" + rate_text(hi) +
                      " misses: " + [&] {
                        for (const SearchProbe& p : result.probes) {
                          if (!p.miss.empty() && std::abs(p.values[0]->value_or(0.0) - hi) < 1e-12 * hi) return p.miss;
                        }
                        return std::string("miss");
                      }() + ")";
    }
  } else {
    // Cheapest: combinations of the other keys, each with a binary search over replicas.
    result.owned_grid = std::make_shared<SweepSpec>(SweepSpec{"", "summary", spec.fixed, spec.grid});
    const SweepSpec& grid = *result.owned_grid;
    size_t replicas_axis = spec.grid.size();
    for (size_t i = 0; i < spec.grid.size(); ++i) {
      if (spec.grid[i].key == "replicas") replicas_axis = i;
    }
    std::vector<int64_t> replica_order;  // indices into the replicas axis, by value
    if (replicas_axis < spec.grid.size()) {
      const toml::array& v = spec.grid[replicas_axis].values;
      for (size_t i = 0; i < v.size(); ++i) replica_order.push_back(static_cast<int64_t>(i));
      std::stable_sort(replica_order.begin(), replica_order.end(), [&](int64_t a, int64_t b) {
        return v.get(static_cast<size_t>(a))->value_or(int64_t{0}) < v.get(static_cast<size_t>(b))->value_or(int64_t{0});
      });
    } else {
      replica_order.push_back(0);
    }
    // Grid point of combination c with replicas index ri.
    const int64_t total = grid.num_points();
    const int64_t nrep = replicas_axis < spec.grid.size() ? static_cast<int64_t>(spec.grid[replicas_axis].values.size()) : 1;
    int64_t stride = 1;
    for (size_t i = spec.grid.size(); i-- > replicas_axis + 1;) stride *= static_cast<int64_t>(spec.grid[i].values.size());
    auto point_of = [&](int64_t combo, int64_t ri) {
      if (replicas_axis >= spec.grid.size()) return combo;
      const int64_t high = combo / stride, low = combo % stride;
      return (high * nrep + ri) * stride + low;
    };
    const int64_t combos = total / nrep;
    double best_cost = INFINITY;
    int64_t best_grid_point = -1;
    auto better = [&](double cost, int64_t gp) {
      return cost < best_cost || (cost == best_cost && gp < best_grid_point);
    };
    for (int64_t c = 0; c < combos && !stopped(); ++c) {
      // Binary search for the smallest passing replicas index in replica_order: [lo, hi) unknown,
      // everything below lo misses, hi passes (hi == n: none passes yet).
      int64_t lo = 0, hi = static_cast<int64_t>(replica_order.size());
      int64_t found = -1;
      bool pruned = false;
      std::string last_miss;  // of the probe with the most replicas that missed
      while (lo < hi && !stopped()) {
        // k-ary: up to jobs probes spread over [lo, hi), skipping counts that cannot win.
        const int64_t span = hi - lo;
        const int64_t k = std::min<int64_t>(std::max(1, options.jobs), span);
        std::vector<int64_t> picks;
        for (int64_t j = 1; j <= k; ++j) picks.push_back(lo + (span * j) / (k + 1));
        picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
        // Prune: the cheapest candidate left (at lo) cannot beat the best so far.
        const int64_t gp_lo = point_of(c, replica_order[static_cast<size_t>(lo)]);
        if (auto cost = cost_before_run(grid.point_table(gp_lo), spec.minimize); cost && !better(*cost, gp_lo)) {
          pruned = true;
          break;
        }
        std::vector<toml::table> tables;
        std::vector<std::vector<const toml::node*>> values;
        for (int64_t pick : picks) {
          const int64_t gp = point_of(c, replica_order[static_cast<size_t>(pick)]);
          tables.push_back(grid.point_table(gp));
          tables.back().erase("name");
          values.push_back(grid.values(gp));
        }
        const std::vector<size_t> got = run_round(std::move(tables), std::move(values));
        int64_t first_pass = -1;
        if (!got.empty() && !result.probes[got.front()].miss.empty() && last_miss.empty()) {
          last_miss = result.probes[got.front()].miss;
        }
        for (size_t j = 0; j < got.size(); ++j) {
          if (result.probes[got[j]].miss.empty()) {
            first_pass = static_cast<int64_t>(j);
            break;
          }
        }
        if (first_pass < 0) {
          last_miss = result.probes[got.back()].miss;
          lo = picks.back() + 1;
        } else {
          hi = picks[static_cast<size_t>(first_pass)];
          found = static_cast<int64_t>(got[static_cast<size_t>(first_pass)]);
          lo = first_pass > 0 ? picks[static_cast<size_t>(first_pass) - 1] + 1 : lo;
        }
      }
      std::string label;
      const int64_t gp0 = point_of(c, 0);
      const std::vector<const toml::node*> v = grid.values(gp0);
      for (size_t i = 0; i < spec.grid.size(); ++i) {
        if (i == replicas_axis) continue;
        label += (label.empty() ? "" : " ") + spec.grid[i].key + "=" +
                 plain_value(*v[i]);
      }
      std::string note;
      if (pruned && found < 0) {
        note = "not run further: cannot beat the best found before it";
      } else if (found < 0) {
        note = "no replica count meets the SLOs (" + last_miss + ")";
      }
      result.frontier.push_back({label.empty() ? std::string("(fixed)") : label, found, note});
      if (found >= 0) {
        const PointOutcome& o = result.probes[static_cast<size_t>(found)].outcome;
        const double cost = metric_of(o, spec.minimize).value_or(INFINITY);
        const int64_t gp = point_of(c, replica_order[static_cast<size_t>(hi)]);
        if (better(cost, gp)) {
          best_cost = cost;
          best_grid_point = gp;
          result.best_point = found;
        }
      }
    }
    result.found = result.best_point >= 0;
    if (stopped()) {
      result.answer = "interrupted";
    } else if (!result.found) {
      result.answer = "no configuration of the grid meets the SLOs";
    } else {
      const SearchProbe& p = result.probes[static_cast<size_t>(result.best_point)];
      std::string what;
      for (size_t i = 0; i < result.keys.size(); ++i) {
        what += (what.empty() ? "" : " ") + result.keys[i] + "=" +
                plain_value(*p.values[i]);
      }
      char cost[96];
      std::snprintf(cost, sizeof cost, "%.4g %s", best_cost,
                    spec.minimize == "gpus" ? "GPUs" : spec.minimize == "cost_per_hour" ? "USD/hour" : "USD per million output tokens");
      result.answer = "cheapest: " + what + " (" + cost + ")";
    }
  }
  result.interrupted = stopped();
  const std::string sql = "UPDATE sweeps SET points = " + std::to_string(result.probes.size()) +
                          " WHERE id = " + std::to_string(result.sweep_id);
  (void)db.exec(sql.c_str());
  if (Status s = end_sweep(db, result.sweep_id, result.interrupted ? "interrupted" : "done", result.answer); !s.ok()) {
    return s.error();
  }
  return result;
}

}  // namespace servesim
