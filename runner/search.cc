#include "runner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "analysis/storage/sweep_db.h"
#include "backends/hardware.h"
#include "backends/roofline_backend.h"
#include "sim/config/config.h"
#include "sim/config/presets.h"
#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

std::string rate_text(double r) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", r);
  return buf;
}

// The shape of `count` replicas of `tp` GPUs each (tp x pp) on `hardware` (the configuration's when empty), priced as
// the run would price them; nullopt when the hardware cannot be read.
std::optional<ReplicaGroupShape> shape_of(const RunConfig& c, int32_t count, int32_t tp, const std::string& hardware) {
  const std::string name = !hardware.empty() ? hardware : !c.hardware.empty() ? c.hardware : kDefaultHardware;
  Result<std::string> path = resolve_preset(name, PresetKind::kHardware, "hardware");
  if (!path.ok()) return std::nullopt;
  Result<HardwareSpec> hw = load_hardware(path.value());
  if (!hw.ok()) return std::nullopt;
  ReplicaGroupShape shape;
  shape.count = count;
  shape.tp = tp;
  shape.price_per_gpu_hour = c.price_per_hour_usd >= 0 ? c.price_per_hour_usd : hw.value().price_per_hour_usd;
  const NodePrice node = node_price(c, static_cast<int32_t>(hw.value().gpus_per_node), hw.value().node_price(),
                                    shape.price_per_gpu_hour);
  shape.gpus_per_node = node.gpus;
  shape.node_price_per_hour = node.per_hour;
  shape.hardware = path.value();
  return shape;
}

// The cost a probe's configuration has before it runs (gpus, nodes, cost_per_hour), or nullopt
// when only a run can tell (cost_per_million_output_tokens, or a configuration that does not
// resolve).
std::optional<double> cost_before_run(const toml::table& table, const std::string& minimize) {
  if (minimize == "cost_per_million_output_tokens") return std::nullopt;
  Result<RunConfig> resolved = resolve_config(table);
  if (!resolved.ok() || resolved.value().backend != "roofline") return std::nullopt;
  const RunConfig& c = resolved.value();
  std::vector<ReplicaGroupShape> shapes;
  if (c.replica_groups.empty()) {
    if (auto s = shape_of(c, c.replicas, c.gpus_per_replica(), "")) shapes.push_back(*s);
  }
  for (const ReplicaGroup& g : c.replica_groups) {
    if (auto s = shape_of(c, g.count, c.gpus_per_replica(g.tp), g.hardware)) shapes.push_back(*s);
  }
  if (shapes.size() != std::max<size_t>(1, c.replica_groups.size())) return std::nullopt;
  const DeploymentCost cost = deployment_cost(shapes, c.price_by_node);
  if (minimize == "gpus") return cost.gpus;
  if (minimize == "nodes") return cost.nodes >= 0 ? std::optional<double>(static_cast<double>(cost.nodes)) : std::nullopt;
  return cost.per_hour >= 0 ? std::optional<double>(cost.per_hour) : std::nullopt;
}

// The state of one search: its sweeps row, its probes, and how to run a round of them.
class Searcher {
 public:
  Searcher(const SearchSpec& spec, const SearchOptions& options, SearchResult& result)
      : spec_(spec), options_(options), result_(result) {}

  bool stopped() const {
    return (options_.stop != nullptr && options_.stop->load()) || !result_.storage_error.empty() ||
           !result_.executor_error.empty();
  }

  // Runs a round of probes in parallel; returns their indices in result.probes.
  std::vector<size_t> run_round(std::vector<toml::table> tables, std::vector<std::vector<const toml::node*>> values) {
    std::vector<int64_t> ids;
    for (size_t i = 0; i < tables.size(); ++i) {
      ids.push_back(static_cast<int64_t>(result_.probes.size() + i));
      tables[i].insert_or_assign("name", (spec_.name.empty() ? std::string("search") : spec_.name) + " probe " +
                                             std::to_string(ids.back()));
      if (!tables[i].contains("log")) tables[i].insert("log", "summary");
    }
    std::vector<PointOutcome> out = execute(tables, ids, values);
    std::vector<size_t> indices;
    for (size_t i = 0; i < out.size(); ++i) {
      SearchProbe p;
      p.point = ids[i];
      p.values = values[i];
      p.outcome = std::move(out[i]);
      p.miss = slo_miss(spec_.slos, p.outcome);
      if (p.outcome.storage_failed && result_.storage_error.empty()) result_.storage_error = p.outcome.error;
      // A probe not run to its end (its task lost) is neither a pass nor a miss: the search stops
      // rather than bisect on it, and says its answer is not established.
      const bool signalled = options_.stop != nullptr && options_.stop->load();
      if (p.outcome.status == "interrupted" && !p.outcome.storage_failed && !signalled &&
          result_.executor_error.empty()) {
        result_.executor_error = "probe " + std::to_string(p.point) + " was not run to its end" +
                                 (p.outcome.error.empty() ? "" : " (" + p.outcome.error + ")") +
                                 ", so whether it meets the SLOs is not known";
      }
      indices.push_back(result_.probes.size());
      result_.probes.push_back(std::move(p));
      if (options_.on_probe) options_.on_probe(result_.probes.back());
    }
    return indices;
  }

  void max_rate();
  void cheapest();

 private:
  // Whether the probe misses whatever the rate or the replicas (analysis/metrics/slo.h).
  bool at_any_load(const SearchProbe& p) const {
    return !p.miss.empty() && misses_at_any_load(spec_.slos, p.outcome.status, p.outcome.metrics);
  }
  // The round's outcomes, one per probe: from the options' executor, else run_points here. An
  // executor that cannot run the round stops the search (executor_error); its probes are
  // interrupted.
  std::vector<PointOutcome> execute(const std::vector<toml::table>& tables, const std::vector<int64_t>& ids,
                                    const std::vector<std::vector<const toml::node*>>& values);
  // Probes at these rates, one round.
  std::vector<size_t> rate_round(const std::vector<double>& rates);
  // The miss of the probe at rate `r`.
  std::string miss_at(double r) const;
  // Cheapest: the fewest replicas that pass for combination `combo` of the other keys.
  void search_combination(int64_t combo);
  // One combination's bisection over the replicas axis, in replica_order: [lo, hi) unknown,
  // everything below lo misses, hi passes (hi == n: none passes yet).
  struct Bisection {
    int64_t lo = 0, hi = 0;
    int64_t found = -1;  // the passing probe at hi; -1: none
    bool pruned = false;
    std::string last_miss;  // of the probe with the most replicas that missed
  };
  // One round of the bisection of combination `combo`; false when it is done.
  bool bisect(int64_t combo, Bisection& b);
  // "tp=2 hardware=h100-sxm": combination `combo`'s values, but for the replicas.
  std::string combination_label(int64_t combo) const;
  // The frontier's row of combination `combo`, bisected as `b`.
  SearchResult::FrontierRow frontier_row(int64_t combo, const Bisection& b) const;
  std::string cost_text(double cost, const std::vector<Metric>& metrics) const;

  const SearchSpec& spec_;
  const SearchOptions& options_;
  SearchResult& result_;
  WorkloadCache cache_;
  int64_t rounds_ = 0;
  // Cheapest mode.
  struct Grid {
    size_t replicas_axis = 0;  // == number of axes: none
    std::vector<int64_t> replica_order;  // indices into the replicas axis, by value
    int64_t nrep = 1, stride = 1;
    int64_t point_of(int64_t combo, int64_t ri, size_t axes) const {
      if (replicas_axis >= axes) return combo;
      const int64_t high = combo / stride, low = combo % stride;
      return (high * nrep + ri) * stride + low;
    }
  } g_;
  double best_cost_ = INFINITY;
  int64_t best_grid_point_ = -1;
};

std::vector<PointOutcome> Searcher::execute(const std::vector<toml::table>& tables, const std::vector<int64_t>& ids,
                                           const std::vector<std::vector<const toml::node*>>& values) {
  if (!options_.execute) {
    return run_points(tables, ids, values, result_.keys, result_.sweep_id, result_.db_path, options_.jobs, cache_,
                      options_.stop);
  }
  const ProbeRound round{rounds_++, tables, ids, values, result_.keys, result_.sweep_id, result_.db_path};
  Result<std::vector<PointOutcome>> ran = options_.execute(round);
  std::string error = ran.ok() ? "" : ran.error().message;
  if (ran.ok() && ran.value().size() != tables.size()) {
    error = "the executor returned " + std::to_string(ran.value().size()) + " outcomes for " +
            std::to_string(tables.size()) + " probes";
  }
  if (error.empty()) return std::move(ran).value();
  // A signal that stopped the executor is an interruption, not its failure.
  const bool signalled = options_.stop != nullptr && options_.stop->load();
  if (!signalled) result_.executor_error = error;
  std::vector<PointOutcome> out(tables.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].point = ids[i];
    out[i].status = "interrupted";
    out[i].error = signalled ? "" : "not run: " + error;
  }
  return out;
}

std::vector<size_t> Searcher::rate_round(const std::vector<double>& rates) {
  std::vector<toml::table> tables;
  std::vector<std::vector<const toml::node*>> values;
  for (double r : rates) {
    toml::table t = spec_.fixed;
    t.insert_or_assign("request_rate", r);
    t.erase("time_scale");  // the rate probed replaces the workload's own, however scaled
    t.erase("rate_scale");
    tables.push_back(std::move(t));
    auto v = std::make_shared<toml::array>();
    v->push_back(r);
    values.push_back({v->get(0)});
    result_.owned_rates.push_back(std::move(v));
  }
  return run_round(std::move(tables), std::move(values));
}

std::string Searcher::miss_at(double r) const {
  for (const SearchProbe& p : result_.probes) {
    if (!p.miss.empty() && std::abs(p.values[0]->value_or(0.0) - r) < 1e-12 * r) return p.miss;
  }
  return "miss";
}

// Max rate: doubling (or halving) until the edge is bracketed, then a k-ary search in [pass, miss].
void Searcher::max_rate() {
  double lo = 0, hi = 0;  // the largest rate that passed, the smallest that missed (0: none yet)
  int64_t best = -1;
  double r = spec_.start_rate;
  std::string hopeless;  // a miss that no rate would mend
  while (!stopped()) {  // exponential phase
    const size_t i = rate_round({r}).front();
    if (at_any_load(result_.probes[i])) {
      hopeless = result_.probes[i].miss;
      break;
    }
    if (result_.probes[i].miss.empty()) {
      lo = r;
      best = static_cast<int64_t>(i);
      if (hi > 0 || r * 2 > spec_.max_rate) break;
      r *= 2;
    } else {
      hi = r;
      if (lo > 0 || r / 2 < 1e-6) break;
      r /= 2;
    }
  }
  const int k = std::max(1, options_.jobs);
  while (!stopped() && lo > 0 && hi > 0 && hi / lo - 1 > spec_.precision) {
    std::vector<double> rates;
    for (int j = 1; j <= k; ++j) rates.push_back(lo + (hi - lo) * j / (k + 1));
    const std::vector<size_t> got = rate_round(rates);
    // Monotone: the pass below the first miss raises lo; the first miss lowers hi.
    for (size_t j = 0; j < got.size(); ++j) {
      if (result_.probes[got[j]].miss.empty()) {
        lo = rates[j];
        best = static_cast<int64_t>(got[j]);
      } else {
        hi = rates[j];
        break;
      }
    }
  }
  result_.rate = lo;
  result_.found = lo > 0;
  result_.best_point = best;
  if (stopped()) return;
  if (!hopeless.empty()) {
    result_.answer = "no rate meets the SLOs: at " + rate_text(r) + " req/s " + hopeless +
                     ", which does not depend on the rate";
  } else if (!result_.found) {
    result_.answer = "no rate down to 1e-6 req/s meets the SLOs (" + result_.probes.back().miss + ")";
  } else if (hi == 0) {
    result_.answer = "every rate up to " + rate_text(lo) + " req/s meets the SLOs (the search stops there)";
  } else {
    result_.answer = "max request_rate " + rate_text(lo) + " req/s meets the SLOs (" + rate_text(hi) +
                     " misses: " + miss_at(hi) + ")";
  }
}

// "5-7" or "5": replica counts of the replicas axis at order positions [from, to).
std::string count_range(const toml::array& values, const std::vector<int64_t>& order, int64_t from, int64_t to) {
  if (from >= to) return "";
  const auto at = [&](int64_t i) { return plain_value(*values.get(static_cast<size_t>(order[static_cast<size_t>(i)]))); };
  return from + 1 == to ? at(from) : at(from) + "-" + at(to - 1);
}

void Searcher::search_combination(int64_t c) {
  Bisection b;
  b.hi = static_cast<int64_t>(g_.replica_order.size());
  while (b.lo < b.hi && !stopped()) {
    if (!bisect(c, b)) break;
  }
  result_.frontier.push_back(frontier_row(c, b));
  if (b.found < 0) return;
  const double cost = find_metric(result_.probes[static_cast<size_t>(b.found)].outcome.metrics, spec_.minimize)
                          .value_or(INFINITY);
  const int64_t gp = g_.point_of(c, g_.replica_order[static_cast<size_t>(b.hi)], spec_.grid.size());
  if (cost < best_cost_ || (cost == best_cost_ && gp < best_grid_point_)) {
    best_cost_ = cost;
    best_grid_point_ = gp;
    result_.best_point = b.found;
  }
}

bool Searcher::bisect(int64_t c, Bisection& b) {
  const SweepSpec& grid = *result_.owned_grid;
  const size_t axes = spec_.grid.size();
  // k-ary: up to jobs probes spread over [lo, hi), skipping counts that cannot win.
  const int64_t span = b.hi - b.lo;
  const int64_t k = std::min<int64_t>(std::max(1, options_.jobs), span);
  std::vector<int64_t> picks;
  for (int64_t j = 1; j <= k; ++j) picks.push_back(b.lo + (span * j) / (k + 1));
  picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
  // Prune: the cheapest candidate left (at lo) cannot beat the best so far.
  const int64_t gp_lo = g_.point_of(c, g_.replica_order[static_cast<size_t>(b.lo)], axes);
  if (auto cost = cost_before_run(grid.point_table(gp_lo), spec_.minimize);
      cost && !(*cost < best_cost_ || (*cost == best_cost_ && gp_lo < best_grid_point_))) {
    b.pruned = true;
    return false;
  }
  std::vector<toml::table> tables;
  std::vector<std::vector<const toml::node*>> values;
  for (int64_t pick : picks) {
    const int64_t gp = g_.point_of(c, g_.replica_order[static_cast<size_t>(pick)], axes);
    tables.push_back(grid.point_table(gp));
    tables.back().erase("name");
    values.push_back(grid.values(gp));
  }
  const std::vector<size_t> got = run_round(std::move(tables), std::move(values));
  const auto hopeless = std::find_if(got.begin(), got.end(), [&](size_t i) { return at_any_load(result_.probes[i]); });
  if (hopeless != got.end()) {  // no replica count mends it: the combination is done
    b.last_miss = result_.probes[*hopeless].miss;
    b.found = -1;
    return false;
  }
  const auto pass = std::find_if(got.begin(), got.end(), [&](size_t i) { return result_.probes[i].miss.empty(); });
  if (pass == got.end()) {
    b.last_miss = result_.probes[got.back()].miss;
    b.lo = picks.back() + 1;
    return true;
  }
  const size_t first_pass = static_cast<size_t>(pass - got.begin());
  b.hi = picks[first_pass];
  b.found = static_cast<int64_t>(got[first_pass]);
  if (first_pass > 0) {
    b.last_miss = result_.probes[got[first_pass - 1]].miss;
    b.lo = picks[first_pass - 1] + 1;
  }
  return true;
}

std::string Searcher::combination_label(int64_t c) const {
  const SweepSpec& grid = *result_.owned_grid;
  const size_t axes = spec_.grid.size();
  std::string label;
  const std::vector<const toml::node*> v = grid.values(g_.point_of(c, 0, axes));
  const std::vector<std::string> keys = grid.keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (g_.replicas_axis < axes && keys[i] == "replicas") continue;
    label += (label.empty() ? "" : " ") + keys[i] + "=" + plain_value(*v[i]);
  }
  return label;
}

SearchResult::FrontierRow Searcher::frontier_row(int64_t c, const Bisection& b) const {
  const std::string label = combination_label(c);
  SearchResult::FrontierRow row{label.empty() ? std::string("(fixed)") : label, b.found, "", ""};
  const auto counts = [&](int64_t from, int64_t to) {
    return count_range(spec_.grid[g_.replicas_axis].values, g_.replica_order, from, to);
  };
  if (stopped() && b.found < 0) {
    row.note = "not finished: the search stopped (" + (b.last_miss.empty() ? std::string("interrupted") : b.last_miss) + ")";
  } else if (b.pruned && b.found < 0) {
    // What was run missed; the larger counts left cost at least the best.
    row.note = b.last_miss.empty() ? "not run: cannot beat the best found before it"
                                   : "misses up to " + counts(b.lo - 1, b.lo) + " replicas (" + b.last_miss +
                                         "); more cannot beat the best found before it";
  } else if (b.found < 0 && g_.replicas_axis >= spec_.grid.size()) {
    row.note = b.last_miss.empty() ? "not run" : "miss: " + b.last_miss;  // one probe: no replicas axis
  } else if (b.found < 0) {
    row.note = b.last_miss.empty() ? "not run" : "no replica count meets the SLOs (" + b.last_miss + ")";
  } else if (b.pruned) {
    row.untried = counts(b.lo, b.hi);
  } else if (stopped() && b.lo < b.hi) {
    // A pass, but the bisection below it was cut short: fewer may pass too.
    row.untried = counts(b.lo, b.hi);
    row.note = "the search stopped first";
  }
  return row;
}

// "6.559 USD per million output tokens; 8 GPUs = 1 node": what the answer minimised, then its
// GPUs and the whole nodes they take (when the hardware says how many GPUs a node holds).
std::string Searcher::cost_text(double cost, const std::vector<Metric>& metrics) const {
  const auto count = [](double n, const char* one, const char* many) {
    return format_number(n) + " " + (n == 1 ? one : many);
  };
  const std::string& m = spec_.minimize;
  const std::optional<double> gpus = find_metric(metrics, "gpus"), nodes = find_metric(metrics, "nodes");
  const auto money = [](const char* format, double usd) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, usd);
    return std::string(buf);
  };
  std::string text = m == "gpus"            ? count(cost, "GPU", "GPUs")
                     : m == "nodes"         ? count(cost, "node", "nodes")
                     : m == "cost_per_hour" ? money("%.2f USD/hour", cost)
                                            : money("%.4g USD per million output tokens", cost);
  if (m == "gpus" && nodes) {
    text += " = " + count(*nodes, "node", "nodes");
  } else if (m == "nodes") {
    text += " = " + count(gpus.value_or(0), "GPU", "GPUs");
  } else if (gpus) {
    text += "; " + count(*gpus, "GPU", "GPUs") + (nodes ? " = " + count(*nodes, "node", "nodes") : "");
  }
  if (find_metric(metrics, "priced_by_node").value_or(0) > 0 && m != "gpus" && m != "nodes") text += ", priced by node";
  return text;
}

// Cheapest: combinations of the other keys, each with a binary search over replicas.
void Searcher::cheapest() {
  result_.owned_grid = std::make_shared<SweepSpec>(SweepSpec{"", "summary", spec_.fixed, spec_.grid});
  const SweepSpec& grid = *result_.owned_grid;
  const size_t axes = spec_.grid.size();
  g_.replicas_axis = axes;
  for (size_t i = 0; i < axes; ++i) {
    if (spec_.grid[i].key == "replicas") g_.replicas_axis = i;  // a tuple with replicas is enumerated
  }
  if (g_.replicas_axis < axes) {
    const toml::array& v = spec_.grid[g_.replicas_axis].values;
    for (size_t i = 0; i < v.size(); ++i) g_.replica_order.push_back(static_cast<int64_t>(i));
    std::stable_sort(g_.replica_order.begin(), g_.replica_order.end(), [&](int64_t a, int64_t b) {
      return v.get(static_cast<size_t>(a))->value_or(int64_t{0}) < v.get(static_cast<size_t>(b))->value_or(int64_t{0});
    });
    g_.nrep = static_cast<int64_t>(v.size());
    for (size_t i = axes; i-- > g_.replicas_axis + 1;) g_.stride *= static_cast<int64_t>(spec_.grid[i].values.size());
  } else {
    g_.replica_order.push_back(0);
  }
  const int64_t combos = grid.num_points() / g_.nrep;
  for (int64_t c = 0; c < combos && !stopped(); ++c) search_combination(c);
  result_.found = result_.best_point >= 0;
  if (stopped()) return;
  if (!result_.found) {
    result_.answer = "no configuration of the grid meets the SLOs";
    return;
  }
  const SearchProbe& p = result_.probes[static_cast<size_t>(result_.best_point)];
  std::string what;
  for (size_t i = 0; i < result_.keys.size(); ++i) {
    what += (what.empty() ? "" : " ") + result_.keys[i] + "=" + plain_value(*p.values[i]);
  }
  result_.answer = "cheapest: " + what + " (" + cost_text(best_cost_, p.outcome.metrics) + ")";
}

}  // namespace

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
  for (const Slo& slo : slos) s.insert(slo.key, slo.given);  // as given, with its unit
  t.insert("slo", std::move(s));
  t.insert("minimize", minimize);
  t.insert("start_rate", start_rate);
  t.insert("precision", precision);
  std::ostringstream out;
  out << toml::toml_formatter(t);
  return out.str();
}

namespace {
std::string option_name(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}
}  // namespace

Status check_search(const SearchSpec& spec) {
  if (spec.slos.empty()) {
    return Error{"no SLO: give --slo KEY=VALUE (e.g. --slo p99_ttft=2s; keys: " + known_slo_keys() + ")"};
  }
  for (size_t i = 0; i < spec.slos.size(); ++i) {
    const Slo& s = spec.slos[i];
    for (size_t j = 0; j < i; ++j) {
      if (spec.slos[j].key == s.key) {
        return Error{"--slo " + s.key + " is given twice (" + spec.slos[j].given + " and " + s.given + "); give it once"};
      }
    }
    if (s.metric == "slo_attainment" && !spec.fixed.contains("goodput")) {
      return Error{"--slo slo_attainment needs --goodput (the per-request SLOs it counts)"};
    }
  }
  for (const SweepAxis& a : spec.grid) {
    for (const std::string& k : a.keys()) {
      if (k == "request_rate") {
        return Error{"grid key 'request_rate': the cheapest-configuration search serves one rate (give "
                     "--request-rate R); to find the largest rate, search without a grid"};
      }
      // Keys that change the traffic: each combination would be sized for other load, and the
      // cheapest of them is not the cheapest for one workload.
      for (const char* traffic : {"rate_scale", "time_scale", "num_prompts", "trace", "burstiness",
                                  "max_concurrency", "seed"}) {
        if (k == traffic) {
          return Error{"grid key '" + k + "' changes the traffic: the cheapest-configuration search sizes "
                       "deployments for one workload (set --" + option_name(k) + " once); compare workloads "
                       "with a search each, or with sim sweep"};
        }
      }
    }
  }
  if (!(spec.precision >= 1e-4 && spec.precision < 1)) {  // finer than the rates printed (4 digits)
    return Error{"--precision: expected a fraction from 0.0001 to below 1, got " + rate_text(spec.precision)};
  }
  if (!(spec.start_rate >= 1e-6 && spec.start_rate < spec.max_rate)) {  // the search halves down to 1e-6
    return Error{"--start-rate: expected a rate from 1e-06 to below " + rate_text(spec.max_rate) +
                 " requests per second, got " + rate_text(spec.start_rate)};
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
  for (const SweepAxis& a : spec.grid) {
    for (std::string& k : a.keys()) result.keys.push_back(std::move(k));
  }
  if (max_rate) result.keys.push_back("request_rate");
  SweepInfo info{spec.name, "search", spec.to_toml(), result.keys, 0};
  Result<int64_t> id = begin_sweep(db, info);
  if (!id.ok()) return storage_error(id.error());
  result.sweep_id = id.value();

  Searcher searcher(spec, options, result);
  if (max_rate) {
    searcher.max_rate();
  } else {
    searcher.cheapest();
  }
  result.interrupted = searcher.stopped();
  if (!result.storage_error.empty()) {
    result.answer = "not answered: a probe could not write the database (" + result.storage_error + ")";
  } else if (!result.executor_error.empty()) {
    result.answer = "not answered: the probes could not be run (" + result.executor_error + ")";
  } else if (result.interrupted) {
    result.answer = "interrupted";
  }
  const std::string sql = "UPDATE sweeps SET points = " + std::to_string(result.probes.size()) +
                          " WHERE id = " + std::to_string(result.sweep_id);
  (void)db.exec(sql.c_str());
  if (Status s = end_sweep(db, result.sweep_id, result.interrupted ? "interrupted" : "done", result.answer);
      !s.ok() && result.storage_error.empty()) {
    result.storage_error = "ending the search: " + s.error().message;
  }
  return result;
}

}  // namespace servesim
