// The fit of `sim calibrate` (calibrate.h): the search (calibrate_search.h) from several starts,
// then what tells a user how far to trust it: a bootstrap for the ranges and the keys that trade
// against each other, a held-out half for an honest error, the residuals by kind and size of
// batch, and warnings.
#include "analysis/calibration/calibrate.h"

#include <nlopt.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>
#include <thread>

#include "analysis/calibration/calibrate_search.h"
#include "analysis/metrics/metrics.h"

namespace servesim {
namespace {

using namespace calibration;

// What NLopt's result means for a fit.
std::string meaning(nlopt_result code) {
  switch (code) {
    case NLOPT_SUCCESS: return "converged";
    case NLOPT_STOPVAL_REACHED: return "converged: the loss reached its target";
    case NLOPT_FTOL_REACHED: return "converged: the loss stopped improving";
    case NLOPT_XTOL_REACHED: return "converged: the parameters stopped moving (relative change < 1e-6)";
    case NLOPT_MAXEVAL_REACHED:
      return "NOT converged: stopped at the evaluation limit; the fit may improve with more";
    case NLOPT_MAXTIME_REACHED: return "NOT converged: stopped at the time limit";
    case NLOPT_ROUNDOFF_LIMITED:
      return "stopped by rounding: the loss is as low as floating point resolves; usually converged";
    case NLOPT_FORCED_STOP: return "NOT converged: stopped from outside";
    case NLOPT_OUT_OF_MEMORY: return "NOT converged: out of memory";
    case NLOPT_INVALID_ARGS: return "NOT converged: NLopt refused the problem (a bug in servesim)";
    default: return "NOT converged: NLopt failed";
  }
}

std::vector<double> all_ones(size_t n) { return std::vector<double>(n, 1.0); }

// The values of a fit's keys in options.keys order, in HardwareSpec units.
std::vector<double> values(const HardwareSpec& hw, const std::vector<FitKey>& keys) {
  std::vector<double> v;
  for (FitKey key : keys) v.push_back(value_of(key_info(key), hw));
  return v;
}

// `count` fits, each of a resample (with replacement) of the data, warm-started at x: the values of
// the keys (options.keys order) of each.
std::vector<std::vector<double>> bootstrap(const Context& c, const CalibrationOptions& cal,
                                           const std::vector<double>& x, int& evaluations) {
  const int count = cal.bootstrap;
  std::vector<std::vector<double>> runs(static_cast<size_t>(count));
  std::vector<int> evals(static_cast<size_t>(count), 0);
  std::atomic<int> next{0};
  auto work = [&] {
    for (int b; (b = next.fetch_add(1)) < count;) {
      // Each resample from its own stream: the same ranges on any number of threads.
      SplitMix rng{cal.seed * 0x2545f4914f6cdd1dULL + static_cast<uint64_t>(b) + 1};
      std::vector<double> weight(c.data.size(), 0.0);
      for (size_t i = 0; i < c.data.size(); ++i) weight[rng.below(c.data.size())] += 1;
      const Optimum o = minimise(c, weight, x, 0.1, cal.max_evaluations);
      runs[static_cast<size_t>(b)] = values(hardware_at(c, o.x.data(), o.theta), cal.keys);
      evals[static_cast<size_t>(b)] = o.evaluations;
    }
  };
  unsigned threads = cal.threads > 0 ? static_cast<unsigned>(cal.threads)
                                     : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, static_cast<unsigned>(count));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (int e : evals) evaluations += e;
  return runs;
}

// Each key's values over the resamples, sorted.
std::vector<std::vector<double>> by_key(const std::vector<std::vector<double>>& runs, size_t keys) {
  std::vector<std::vector<double>> v(keys);
  for (const auto& run : runs) {
    for (size_t k = 0; k < keys; ++k) v[k].push_back(run[k]);
  }
  for (auto& values : v) std::sort(values.begin(), values.end());
  return v;
}

// The pairs of keys whose values move together over the resamples (|Pearson's r| >= 0.9): each
// resample's optimum slides along a valley of the loss where one makes up for the other.
std::vector<CalibrationFit::TradeOff> trade_offs(const std::vector<std::vector<double>>& runs,
                                                 const std::vector<ParameterFit>& parameters) {
  const size_t n = runs.size(), keys = parameters.size();
  std::vector<double> mean(keys, 0.0), sd(keys, 0.0);
  for (size_t k = 0; k < keys; ++k) {
    for (const auto& run : runs) mean[k] += run[k] / static_cast<double>(n);
    for (const auto& run : runs) sd[k] += (run[k] - mean[k]) * (run[k] - mean[k]);
    sd[k] = std::sqrt(sd[k]);
  }
  std::vector<CalibrationFit::TradeOff> out;
  for (size_t a = 0; a < keys; ++a) {
    for (size_t b = a + 1; b < keys; ++b) {
      // A key that does not move (pinned at a bound in every resample) trades with nothing.
      if (!(sd[a] > 1e-9 * std::fabs(mean[a])) || !(sd[b] > 1e-9 * std::fabs(mean[b]))) continue;
      double cov = 0;
      for (const auto& run : runs) cov += (run[a] - mean[a]) * (run[b] - mean[b]);
      const double r = cov / (sd[a] * sd[b]);
      if (std::fabs(r) >= 0.9) out.push_back({parameters[a].key, parameters[b].key, r});
    }
  }
  return out;
}

}  // namespace

double total_price(const RooflineModel& roofline, const Measurement& m) {
  return roofline.price(m.items.data(), m.items.size()).total();
}

const char* fit_key_name(FitKey key) { return key_info(key).name; }
double fit_key_file_unit(FitKey key) { return key_info(key).file_unit; }

Result<FitKey> parse_fit_key(const std::string& name) {
  std::string known;
  for (const KeyInfo& k : all_keys()) {
    if (name == k.name) return k.key;
    known += std::string(known.empty() ? "" : ", ") + k.name;
  }
  return Error{"unknown key '" + name + "' to fit; the keys are " + known};
}

namespace {

// The kind of an iteration: a decode is a one-token item over a cache; a prompt chunk is anything
// else (a one-token prompt included); a timing of the linear layers alone is "linear-only".
const char* kind_of(const Measurement& m) {
  if (m.covers == Coverage::kLinearLayers) return "linear-only";
  bool prefill = false, decode = false;
  for (const RooflineModel::Item& it : m.items) {
    (it.new_tokens == 1 && it.context_tokens > 0 ? decode : prefill) = true;
  }
  return prefill && decode ? "mixed" : decode ? "decode" : "prefill";
}

constexpr const char* kFitKinds[] = {"prefill", "decode", "mixed", "linear-only"};

// The size a kind's cost grows with: sequences for decodes, new tokens otherwise.
int64_t size_of(const Measurement& m, const std::string& kind) {
  if (kind == "decode") return static_cast<int64_t>(m.items.size());
  int64_t tokens = 0;
  for (const RooflineModel::Item& it : m.items) tokens += it.new_tokens;
  return tokens;
}

// The signed residuals, by kind and by size band (split at the kind's median size, so that a trend
// with size shows as two bands of different sign or size).
std::vector<ResidualGroup> residuals(const Context& c, const HardwareSpec& before,
                                     const HardwareSpec& after) {
  const Rooflines rb(before, c.models), ra(after, c.models);
  std::vector<ResidualGroup> groups;
  for (const std::string kind : kFitKinds) {
    std::vector<size_t> members;
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < c.data.size(); ++i) {
      if (kind_of(c.data[i]) != kind) continue;
      members.push_back(i);
      sizes.push_back(size_of(c.data[i], kind));
    }
    if (members.empty()) continue;
    std::vector<int64_t> sorted = sizes;
    std::sort(sorted.begin(), sorted.end());
    const int64_t median = sorted[(sorted.size() - 1) / 2];
    const std::string unit = kind == "decode" ? " seqs" : " tokens";
    ResidualGroup small{kind, "small", "<= " + std::to_string(median) + unit};
    ResidualGroup large{kind, "large", "> " + std::to_string(median) + unit};
    for (size_t k = 0; k < members.size(); ++k) {
      const Measurement& m = c.data[members[k]];
      ResidualGroup& g = sizes[k] <= median ? small : large;
      ++g.count;
      g.before += (rb.price(c, members[k]) - m.measured) / m.measured;
      g.after += (ra.price(c, members[k]) - m.measured) / m.measured;
    }
    for (ResidualGroup* g : {&small, &large}) {
      if (g->count == 0) continue;
      g->before /= static_cast<double>(g->count);
      g->after /= static_cast<double>(g->count);
      groups.push_back(*g);
    }
  }
  return groups;
}

// -1 / +1 when the fitted key sits at its lower / upper bound (within kAtBound of the optimiser's
// range), else 0.
int at_bound(const KeyInfo& k, double value) {
  if (k.additive) return value <= k.lower ? -1 : value >= k.upper ? 1 : 0;
  const double lo = to_x(k, k.lower), hi = to_x(k, k.upper), x = to_x(k, value);
  const double tolerance = kAtBound * (hi - lo);
  return x <= lo + tolerance ? -1 : x >= hi - tolerance ? 1 : 0;
}

// The start with each grid key (gemm_tile_rows) at the candidate whose fit of the other keys to the
// weighted data has the lowest loss (the start's own value among the candidates; ties keep the
// smaller value).
HardwareSpec choose_grid(const HardwareSpec& start, const std::vector<FitModel>& models,
                         const std::vector<Measurement>& data, const CalibrationOptions& cal,
                         const std::vector<double>& weight, int& evaluations) {
  HardwareSpec chosen = start;
  for (FitKey key : cal.keys) {
    const KeyInfo& k = key_info(key);
    if (!k.grid) continue;
    std::vector<double> candidates(std::begin(kGemmTileRowsCandidates), std::end(kGemmTileRowsCandidates));
    candidates.push_back(value_of(k, start));
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    double best_loss = 0, best_value = value_of(k, start);
    for (size_t i = 0; i < candidates.size(); ++i) {
      HardwareSpec at = chosen;
      at.*(k.field) = candidates[i];
      std::vector<FitKey> unfitted;
      const Context c = make_context(at, models, data, cal, unfitted);
      const Optimum o = minimise_from_starts(c, weight, cal);
      evaluations += o.evaluations;
      if (i == 0 || o.loss < best_loss) {
        best_loss = o.loss;
        best_value = candidates[i];
      }
    }
    chosen.*(k.field) = best_value;
  }
  return chosen;
}

// The error of a fit of a random half (seeded) on the other half, the grid keys chosen on that half
// too.
void held_out(const Context& c, const HardwareSpec& start, const CalibrationOptions& cal,
              CalibrationFit& fit) {
  const size_t n = c.data.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  SplitMix rng{cal.seed ^ 0x6a09e667f3bcc908ULL};  // a stream apart from the bootstrap's
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  std::vector<double> train(n, 0.0), test(n, 0.0);
  for (size_t k = 0; k < n; ++k) (k < n / 2 ? train : test)[order[k]] = 1;
  const HardwareSpec chosen = choose_grid(start, c.models, c.data, cal, train, fit.evaluations);
  std::vector<FitKey> unfitted;
  const Context half = make_context(chosen, c.models, c.data, cal, unfitted);
  const Optimum o = minimise_from_starts(half, train, cal);
  fit.evaluations += o.evaluations;
  fit.held_out_count = n - n / 2;
  const HardwareSpec fitted = hardware_at(half, o.x.data(), o.theta);
  fit.held_out_before = mape(start, c, test);
  fit.held_out_after = mape(fitted, c, test);
  // The error on the held-out measurements that `in` picks, before and after.
  const auto on_test = [&](const std::string& name, const auto& in) {
    std::vector<double> members(n, 0.0);
    size_t count = 0;
    for (size_t i = 0; i < n; ++i) {
      if (test[i] > 0 && in(c.data[i])) {
        members[i] = 1;
        ++count;
      }
    }
    return CalibrationFit::KindError{name, count, count > 0 ? mape(start, c, members) : 0,
                                     count > 0 ? mape(fitted, c, members) : 0};
  };
  for (const std::string kind : kFitKinds) {
    CalibrationFit::KindError e = on_test(kind, [&](const Measurement& m) { return kind_of(m) == kind; });
    if (e.count > 0) fit.held_out_by_kind.push_back(std::move(e));
  }
  for (size_t model = 0; c.models.size() > 1 && model < c.models.size(); ++model) {
    fit.held_out_by_model.push_back(on_test(std::to_string(model), [&](const Measurement& m) {
      return static_cast<size_t>(m.model) == model;
    }));
  }
}

// How many measurements differ in their batch (its items in any order), model or coverage.
size_t distinct_batches(const std::vector<Measurement>& data) {
  using Shape = std::tuple<int32_t, int, std::vector<std::tuple<int64_t, int64_t, bool>>>;
  std::set<Shape> shapes;
  for (const Measurement& m : data) {
    Shape s{m.model, static_cast<int>(m.covers), {}};
    for (const RooflineModel::Item& it : m.items) {
      std::get<2>(s).emplace_back(it.new_tokens, it.context_tokens, it.emits);
    }
    std::sort(std::get<2>(s).begin(), std::get<2>(s).end());
    shapes.insert(std::move(s));
  }
  return shapes.size();
}

}  // namespace

CalibrationFit fit_hardware(const HardwareSpec& start, const ModelSpec& model,
                            const RooflineOptions& options, const std::vector<Measurement>& data,
                            const CalibrationOptions& cal) {
  return fit_hardware(start, std::vector<FitModel>{{model, options}}, data, cal);
}

CalibrationFit fit_hardware(const HardwareSpec& start, const std::vector<FitModel>& models,
                            const std::vector<Measurement>& data, const CalibrationOptions& cal) {
  assert(!data.empty());
  const std::vector<double> all = all_ones(data.size());
  int grid_evaluations = 0;
  const HardwareSpec chosen = choose_grid(start, models, data, cal, all, grid_evaluations);
  std::vector<FitKey> unfitted;
  const Context c = make_context(chosen, models, data, cal, unfitted);
  const Optimum o = minimise_from_starts(c, all, cal);

  CalibrationFit fit;
  // The point whose loss o.loss is: the additive keys are solved within their bounds, so nothing
  // is clipped after the search.
  fit.hardware = hardware_at(c, o.x.data(), o.theta);
  fit.mape_before = mape(start, c, all);
  fit.mape_after = mape(fit.hardware, c, all);
  fit.evaluations = o.evaluations + grid_evaluations;
  Convergence& v = fit.convergence;
  v.code = static_cast<int>(o.code);
  const auto code = static_cast<nlopt_result>(o.code);
  v.result = c.searched.empty() ? "SUCCESS" : nlopt_result_to_string(code);
  v.meaning = c.searched.empty() ? "solved exactly (only additive keys)" : meaning(code);
  v.converged = code == NLOPT_SUCCESS || code == NLOPT_FTOL_REACHED || code == NLOPT_XTOL_REACHED ||
                code == NLOPT_STOPVAL_REACHED || code == NLOPT_ROUNDOFF_LIMITED;
  v.evaluations = o.evaluations;
  {  // at the start's own values, before any grid key moved
    std::vector<FitKey> ignored;
    v.loss_start = start_loss(make_context(start, models, data, cal, ignored), all);
  }
  v.loss = o.loss;

  std::vector<std::vector<double>> runs, ranges;
  if (cal.bootstrap > 0) {
    runs = bootstrap(c, cal, o.x, fit.evaluations);
    ranges = by_key(runs, cal.keys.size());
    fit.bootstrap = cal.bootstrap;
    fit.samples = runs;
  }
  for (size_t k = 0; k < cal.keys.size(); ++k) {
    const KeyInfo& key = key_info(cal.keys[k]);
    ParameterFit p{key.key};
    p.start = value_of(key, start) * key.file_unit;
    p.value = value_of(key, fit.hardware) * key.file_unit;
    p.lower = key.lower * key.file_unit;
    p.upper = key.upper * key.file_unit;
    p.fitted = std::find(unfitted.begin(), unfitted.end(), key.key) == unfitted.end();
    p.additive = key.additive;
    p.grid = key.grid;
    p.low = p.high = p.value;
    if (!ranges.empty() && p.fitted && !p.grid) {
      p.low = percentile(ranges[k], 2.5) * key.file_unit;
      p.high = percentile(ranges[k], 97.5) * key.file_unit;
    }
    p.at_bound = p.fitted && !p.grid ? at_bound(key, value_of(key, fit.hardware)) : 0;
    fit.parameters.push_back(p);
  }
  if (!runs.empty()) fit.trade_offs = trade_offs(runs, fit.parameters);
  fit.distinct_batches = distinct_batches(data);
  if (cal.held_out && data.size() >= 4) held_out(c, start, cal, fit);
  fit.residuals = residuals(c, start, fit.hardware);
  return fit;
}

std::string CalibrationFit::undetermined() const {
  std::string keys;
  size_t count = 0;
  for (const ParameterFit& p : parameters) {
    if (!p.fitted) continue;
    keys += std::string(count++ == 0 ? "" : ", ") + fit_key_name(p.key);
  }
  if (distinct_batches >= count) return "";
  return "the measurements are of " + std::to_string(distinct_batches) + " distinct batch" +
         (distinct_batches == 1 ? "" : "es") + ", too few to determine the " + std::to_string(count) +
         " keys to fit (" + keys + "): any values that reproduce those batches fit them exactly. "
         "Measure batches of more sizes (prompt chunks and decodes of several lengths and counts), or "
         "fit fewer keys with --fit";
}

std::vector<std::string> CalibrationFit::warnings() const {
  std::vector<std::string> out;
  char line[200];
  if (!convergence.converged) {
    out.push_back("the optimiser did not converge (" + convergence.result + ": " +
                  convergence.meaning + ")");
  }
  for (const ParameterFit& p : parameters) {
    if (p.at_bound == 0) continue;
    const KeyInfo& k = key_info(p.key);
    std::snprintf(line, sizeof line, "%s = %.4g sits at its %s bound (%.4g): ", k.name, p.value,
                  p.at_bound < 0 ? "lower" : "upper", p.at_bound < 0 ? p.lower : p.upper);
    out.push_back(line + std::string(p.at_bound < 0 ? k.low_advice : k.high_advice));
  }
  // A trade-off matters where it leaves a key loose: a 95 % range wider than a quarter of its value.
  auto loose = [&](FitKey key) {
    for (const ParameterFit& p : parameters) {
      if (p.key == key) return p.high - p.low > 0.25 * std::fabs(p.value);
    }
    return false;
  };
  for (const TradeOff& t : trade_offs) {
    if (!loose(t.a) && !loose(t.b)) continue;
    std::snprintf(line, sizeof line,
                  "%s and %s trade against each other (correlation %+.2f over the resamples): ",
                  fit_key_name(t.a), fit_key_name(t.b), t.correlation);
    out.push_back(line + std::string("these measurements pin a combination of the two, not each "
                                     "(see their ranges); if you know one, fit without it (--fit)"));
  }
  // A fit that describes its own data much better than new data has learnt the noise.
  if (held_out_count > 0 && held_out_after > 1.5 * mape_after + 0.02) {
    std::snprintf(line, sizeof line,
                  "the error on held-out iterations (%.1f %%) is well above the fit's own "
                  "(%.1f %%): the fit does not carry over; measure more iterations",
                  100 * held_out_after, 100 * mape_after);
    out.push_back(line);
  }
  return out;
}

}  // namespace servesim
