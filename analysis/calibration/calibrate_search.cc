// The search of `sim calibrate` (calibrate_search.h).
//
// Why BOBYQA: the loss is a smooth function of a handful of bounded parameters (the efficiencies
// and gemm_half_rows) with kinks where an operator changes from compute- to memory-bound (the
// roofline's max()), and it has no derivatives we could write down. BOBYQA (Powell) is a
// derivative-free trust-region method that models the loss by quadratics and honours bounds by
// construction, with a few dozen evaluations per dimension. A gradient method (or Ceres) would need
// numeric derivatives through those kinks, and Ceres is a large dependency for a five-parameter fit.
#include "analysis/calibration/calibrate_search.h"

#include <nlopt.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

namespace servesim::calibration {
namespace {

constexpr const char* kTooSlow =
    "the roofline is too slow for these batches even at peak: the peak figure is too low for "
    "them (data that stays in cache, a probe taken on a loaded machine) or the model counts work "
    "the engine does not do; raise the peak in the hardware file or add the missing term";
constexpr const char* kTooFast =
    "the roofline is far too fast for these batches: a cost it does not model (per sequence, per "
    "token, an unmodelled kernel) is being absorbed here; look at the residuals by kind and size";

// The search's own limits, narrower than the reader's where those are wider than any real value
// (an efficiency of 0.001, a ramp of 10^9 rows); -inf / inf: the reader's bound (all_keys() takes
// the tighter of the two, so a fitted value always loads).
constexpr double kReaders = std::numeric_limits<double>::infinity();
constexpr KeyInfo kSearchLimits[] = {
    {FitKey::kGemmEfficiency, "gemm_efficiency", &HardwareSpec::gemm_efficiency, 0.01, kReaders, 1, false,
     false, kTooFast, kTooSlow},
    {FitKey::kMemoryEfficiency, "memory_efficiency", &HardwareSpec::memory_efficiency, 0.01, kReaders, 1,
     false, false, kTooFast, kTooSlow},
    {FitKey::kAttentionEfficiency, "attention_efficiency", &HardwareSpec::attention_efficiency,
     0.01, kReaders, 1, false, false, kTooFast, kTooSlow},
    {FitKey::kPrefillAttentionEfficiency, "prefill_attention_efficiency",
     &HardwareSpec::prefill_attention_efficiency, 0.01, kReaders, 1, false, false, kTooFast, kTooSlow},
    {FitKey::kPrefillSelfAttentionEfficiency, "prefill_self_attention_efficiency",
     &HardwareSpec::prefill_self_attention_efficiency, 0.01, kReaders, 1, false, false, kTooFast, kTooSlow},
    // Past 8,192 rows (a whole vLLM token budget) the ramp no longer shapes any real batch.
    {FitKey::kGemmHalfRows, "gemm_half_rows", &HardwareSpec::gemm_half_rows, -kReaders, 8192, 1, false, false,
     "GEMM efficiency shows no growth with rows in these batches (flat, as on a CPU); if you "
     "expected a ramp, the batches may not cover small row counts",
     "the efficiency keeps growing with rows past any real batch: the GEMM peak or "
     "gemm_efficiency is wrong"},
    // The largest of kGemmTileRowsCandidates.
    {FitKey::kGemmTileRows, "gemm_tile_rows", &HardwareSpec::gemm_tile_rows, -kReaders, 256, 1, false, true,
     "no tile rounding fits better: the GEMM times grow smoothly with rows",
     "the times step at 256 rows or more: a coarser rounding than any GPU's tiles; look at the "
     "residuals of large batches"},
    // The reader's: 0 to a second per iteration.
    {FitKey::kOverhead, "overhead_us", &HardwareSpec::overhead, -kReaders, kReaders, 1e6, true, false,
     "the best fixed cost per iteration is 0 or less: the other terms already make small batches "
     "as slow as measured (at one row the read of the weights acts as a fixed cost); if the "
     "engine has a fixed cost of its own, the roofline is too slow for small batches",
     "a second per iteration or more: the measurements are not of this model"},
    // The reader's: 0 to a millisecond per sequence and layer, past which no attention kernel is
    // still running.
    {FitKey::kAttentionSequence, "attention_sequence_us", &HardwareSpec::attention_sequence_overhead,
     -kReaders, kReaders, 1e6, true, false,
     "attention costs nothing per sequence beyond its bytes and FLOPs in these batches",
     "a millisecond per sequence and layer or more: the measurements are not of this model"},
};

// kSearchLimits within the bounds load_hardware accepts (backends/hardware.h): one source of truth
// for what a hardware file may say, whatever the search prefers.
std::vector<KeyInfo> with_readers_bounds() {
  std::vector<KeyInfo> keys(std::begin(kSearchLimits), std::end(kSearchLimits));
  for (KeyInfo& k : keys) {
    const Result<HardwareKeyBounds> reader = hardware_key_bounds(k.name);
    assert(reader.ok() && reader.value().min_inclusive);
    k.lower = std::max(k.lower, reader.value().min);
    k.upper = std::min(k.upper, reader.value().max);
    assert(k.lower < k.upper);
  }
  return keys;
}

// Solves the k x k system g t = b in place (Gaussian elimination with partial pivoting); false when
// it is singular to working precision (a column that is a multiple of another).
bool solve(std::vector<double>& g, std::vector<double>& b, size_t k) {
  for (size_t col = 0; col < k; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < k; ++r) {
      if (std::fabs(g[r * k + col]) > std::fabs(g[pivot * k + col])) pivot = r;
    }
    if (std::fabs(g[pivot * k + col]) <= 1e-12 * std::fabs(g[col * k + col]) ||
        g[pivot * k + col] == 0) {
      return false;
    }
    for (size_t c = 0; c < k; ++c) std::swap(g[col * k + c], g[pivot * k + c]);
    std::swap(b[col], b[pivot]);
    for (size_t r = col + 1; r < k; ++r) {
      const double f = g[r * k + col] / g[col * k + col];
      for (size_t c = col; c < k; ++c) g[r * k + c] -= f * g[col * k + c];
      b[r] -= f * b[col];
    }
  }
  for (size_t r = k; r-- > 0;) {
    for (size_t c = r + 1; c < k; ++c) b[r] -= g[r * k + c] * b[c];
    b[r] /= g[r * k + r];
  }
  return true;
}

// The t in the box 0 <= t <= upper that minimises the convex quadratic t'G t - 2 b't (G: n x n, row
// by row). Its minimum is the unconstrained minimum over the free coordinates of one face of the
// box (each other coordinate at 0 or at its upper bound) that lies inside the box; with at most a
// few coordinates (the additive keys), every face is tried.
std::vector<double> box_minimum(const std::vector<double>& g, const std::vector<double>& b,
                                const std::vector<double>& upper) {
  const size_t n = b.size();
  const auto value_at = [&](const std::vector<double>& t) {
    double f = 0;
    for (size_t a = 0; a < n; ++a) {
      f -= 2 * b[a] * t[a];
      for (size_t e = 0; e < n; ++e) f += t[a] * g[a * n + e] * t[e];
    }
    return f;
  };
  std::vector<double> best(n, 0.0);
  double best_value = 0;  // of t = 0
  size_t faces = 1;
  for (size_t j = 0; j < n; ++j) faces *= 3;
  for (size_t face = 1; face < faces; ++face) {
    // Coordinate j is at 0 (state 0), at its upper bound (1) or free (2).
    std::vector<int> state(n);
    std::vector<double> t(n, 0.0);
    std::vector<size_t> free;
    for (size_t j = 0, f = face; j < n; ++j, f /= 3) {
      state[j] = static_cast<int>(f % 3);
      if (state[j] == 1) t[j] = upper[j];
      if (state[j] == 2) free.push_back(j);
    }
    const size_t k = free.size();
    // The free coordinates' equations, the fixed ones moved to the right: G_ff t_f = b_f - G_fF t_F.
    std::vector<double> gf(k * k), rhs(k);
    for (size_t a = 0; a < k; ++a) {
      rhs[a] = b[free[a]];
      for (size_t j = 0; j < n; ++j) rhs[a] -= state[j] == 1 ? g[free[a] * n + j] * t[j] : 0;
      for (size_t e = 0; e < k; ++e) gf[a * k + e] = g[free[a] * n + free[e]];
    }
    if (k > 0 && !solve(gf, rhs, k)) continue;
    bool inside = true;
    for (size_t a = 0; a < k; ++a) {
      inside = inside && rhs[a] >= 0 && rhs[a] <= upper[free[a]];
      t[free[a]] = rhs[a];
    }
    if (!inside) continue;
    if (const double value = value_at(t); value < best_value) {
      best_value = value;
      best = t;
    }
  }
  return best;
}

// The sample's loss at x, with the solved keys at their best values within bounds (into theta).
class Objective {
 public:
  Objective(const Context& c, const std::vector<double>& weight) : c_(c), weight_(weight) {
    for (double w : weight) total_ += w;
  }

  double operator()(const double* x, std::vector<double>& theta) const {
    ++evaluations;
    const std::vector<double> zero(c_.solved.size(), 0.0);
    const Rooflines rooflines(hardware_at(c_, x, zero), c_.models);
    std::vector<double> q(c_.data.size(), 0.0);
    for (size_t i = 0; i < c_.data.size(); ++i) {
      if (weight_[i] > 0) q[i] = rooflines.price(c_, i);
    }
    theta = best_additive(q);
    double loss = 0;
    for (size_t i = 0; i < c_.data.size(); ++i) {
      if (weight_[i] == 0) continue;
      double p = q[i];
      for (size_t j = 0; j < theta.size(); ++j) p += theta[j] * c_.columns[j][i];
      const double r = (p - c_.data[i].measured) / c_.data[i].measured;
      loss += weight_[i] * r * r;
    }
    return loss / total_;
  }

  mutable int evaluations = 0;

 private:
  // The additive values within their bounds [0, upper] that minimise sum w ((q + A theta - m) / m)^2
  // (box_minimum of its normal equations). Bounded here, not clipped afterwards, so that the loss
  // the search reports is the loss of the values written into the file.
  std::vector<double> best_additive(const std::vector<double>& q) const {
    const size_t n = c_.solved.size();
    std::vector<double> g(n * n, 0.0), b(n, 0.0), upper(n);
    for (size_t j = 0; j < n; ++j) upper[j] = c_.solved[j]->upper;
    for (size_t i = 0; i < c_.data.size(); ++i) {
      if (weight_[i] == 0) continue;
      const double m = c_.data[i].measured, v = weight_[i] / (m * m);
      for (size_t a = 0; a < n; ++a) {
        const double ca = c_.columns[a][i];
        b[a] += v * ca * (m - q[i]);
        for (size_t e = 0; e < n; ++e) g[a * n + e] += v * ca * c_.columns[e][i];
      }
    }
    return box_minimum(g, b, upper);
  }

  const Context& c_;
  const std::vector<double>& weight_;
  double total_ = 0;
};

struct SearchState {
  const Objective* objective;
  Optimum* best;
  std::vector<double> theta;
};

double nlopt_objective(unsigned /*n*/, const double* x, double* /*grad*/, void* data) {
  auto* s = static_cast<SearchState*>(data);
  const double loss = (*s->objective)(x, s->theta);
  // Kept here rather than trusted from nlopt_optimize: a failure code still leaves the best point.
  if (loss < s->best->loss) {
    s->best->loss = loss;
    s->best->x.assign(x, x + s->best->x.size());
    s->best->theta = s->theta;
  }
  return loss;
}

// BOBYQA stops when its trust region shrinks below kXtol in every coordinate: a relative change of
// 1e-6 in each value, far below the bootstrap's ranges. (No tolerance on the loss: NLopt's fires
// when two evaluations happen to agree, as they do where a key stops mattering, far from the end.)
constexpr double kXtol = 1e-6;

// BOBYQA stops within its tolerance of a bound, not on it: coordinates that close are put on their
// bound when the loss there is as low (to 1e-6 of itself), so that the file says 1 or 0 rather than
// 0.9999996 or 3e-22.
void snap_to_bounds(const Context& c, const Objective& objective, Optimum& best) {
  std::vector<double> x = best.x;
  for (size_t k = 0; k < x.size(); ++k) {
    const double tolerance = kAtBound * (c.upper[k] - c.lower[k]);
    if (x[k] - c.lower[k] < tolerance) x[k] = c.lower[k];
    if (c.upper[k] - x[k] < tolerance) x[k] = c.upper[k];
  }
  if (x == best.x) return;
  std::vector<double> theta;
  const double loss = objective(x.data(), theta);
  if (loss <= best.loss * (1 + 1e-6)) {
    best.x = x;
    best.theta = theta;
    best.loss = loss;
  }
}

// Whether some prediction changes when key k does (halved, or from 0 rows to 64): a key that moves
// none (the prefill efficiency without prompt chunks) cannot be fitted from these data.
bool moves_a_prediction(const KeyInfo& k, const HardwareSpec& base, const Context& c,
                        const std::vector<double>& q) {
  HardwareSpec moved = base;
  const double v = value_of(k, base);
  moved.*(k.field) = k.key == FitKey::kGemmHalfRows ? (v > 0 ? v / 2 : 64) : v / 2;
  const Rooflines rooflines(moved, c.models);
  for (size_t i = 0; i < c.data.size(); ++i) {
    if (std::fabs(rooflines.price(c, i) - q[i]) > 1e-9 * std::fabs(q[i])) return true;
  }
  return false;
}

}  // namespace

std::span<const KeyInfo> all_keys() {
  static const std::vector<KeyInfo> keys = with_readers_bounds();
  return keys;
}

const KeyInfo& key_info(FitKey key) {
  for (const KeyInfo& k : all_keys()) {
    if (k.key == key) return k;
  }
  assert(false && "every FitKey has a kSearchLimits row");
  return all_keys()[0];
}

double value_of(const KeyInfo& k, const HardwareSpec& hw) {
  const double v = hw.*(k.field);
  if (k.key == FitKey::kPrefillSelfAttentionEfficiency && v == 0) {
    return hw.prefill_attention_efficiency > 0 ? hw.prefill_attention_efficiency : hw.attention_efficiency;
  }
  return k.key == FitKey::kPrefillAttentionEfficiency && v == 0 ? hw.attention_efficiency : v;
}

// The optimiser's coordinate: logarithms, so that a step is a factor (0.01 to 1 is as wide as
// 0.1 to 1 twice over) and the loss is about as curved at 0.02 as at 0.8; 1 + rows for
// gemm_half_rows, whose natural value 0 has no logarithm.
double to_x(const KeyInfo& k, double v) {
  return k.key == FitKey::kGemmHalfRows ? std::log1p(v) : std::log(v);
}
double from_x(const KeyInfo& k, double x) {
  return k.key == FitKey::kGemmHalfRows ? std::expm1(x) : std::exp(x);
}

HardwareSpec hardware_at(const Context& c, const double* x, const std::vector<double>& theta) {
  HardwareSpec hw = c.start;
  // Clamped: exp(log(v)) may land a rounding error outside a bound the optimiser kept.
  for (size_t k = 0; k < c.searched.size(); ++k) {
    const KeyInfo& key = *c.searched[k];
    hw.*(key.field) = std::clamp(from_x(key, x[k]), key.lower, key.upper);
  }
  for (size_t j = 0; j < c.solved.size(); ++j) {
    hw.*(c.solved[j]->field) = std::clamp(theta[j], c.solved[j]->lower, c.solved[j]->upper);
  }
  return hw;
}

Rooflines::Rooflines(const HardwareSpec& hw, const std::vector<FitModel>& models) {
  for (const FitModel& m : models) rooflines_.emplace_back(hw, m.model, m.options);
}

double Rooflines::price(const Context& c, size_t i) const {
  const Measurement& m = c.data[i];
  assert(m.model >= 0 && static_cast<size_t>(m.model) < rooflines_.size());
  return c.price(rooflines_[static_cast<size_t>(m.model)], m);
}

double mape(const HardwareSpec& hw, const Context& c, const std::vector<double>& weight) {
  const Rooflines rooflines(hw, c.models);
  double sum = 0, total = 0;
  for (size_t i = 0; i < c.data.size(); ++i) {
    if (weight[i] == 0) continue;
    const Measurement& m = c.data[i];
    sum += weight[i] * std::fabs(rooflines.price(c, i) - m.measured) / m.measured;
    total += weight[i];
  }
  return total > 0 ? sum / total : 0;
}

// The keys split into searched and solved, and the additive keys' columns: the change of each
// prediction per unit of the key, from the start (exact: the key only adds to the prediction).
Context make_context(const HardwareSpec& start, const std::vector<FitModel>& models,
                     const std::vector<Measurement>& data, const CalibrationOptions& cal,
                     std::vector<FitKey>& unfitted) {
  Context c{start, models, data, cal.price, {}, {}, {}, {}, {}};
  HardwareSpec base = start;
  for (FitKey key : cal.keys) {
    const KeyInfo& k = key_info(key);
    if (k.additive) base.*(k.field) = 0;
  }
  const Rooflines at_zero(base, models);
  std::vector<double> q(data.size());
  for (size_t i = 0; i < data.size(); ++i) q[i] = at_zero.price(c, i);
  for (FitKey key : cal.keys) {
    const KeyInfo& k = key_info(key);
    if (k.grid) continue;  // chosen around the search (fit_hardware), at the start's value here
    if (!k.additive) {
      if (!moves_a_prediction(k, base, c, q)) {
        unfitted.push_back(key);
        continue;
      }
      c.searched.push_back(&k);
      c.lower.push_back(to_x(k, k.lower));
      c.upper.push_back(to_x(k, k.upper));
      continue;
    }
    constexpr double kUnit = 1e-3;  // 1 ms: large enough to stand out of rounding
    HardwareSpec one = base;
    one.*(k.field) = kUnit;
    const Rooflines at_one(one, models);
    std::vector<double> column(data.size());
    double largest = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      column[i] = (at_one.price(c, i) - q[i]) / kUnit;
      largest = std::max(largest, std::fabs(column[i]));
    }
    if (largest < 1e-6) {  // the price does not depend on it
      unfitted.push_back(key);
      continue;
    }
    c.solved.push_back(&k);
    c.columns.push_back(std::move(column));
  }
  return c;
}

std::vector<double> start_x(const Context& c) {
  std::vector<double> x;
  for (size_t k = 0; k < c.searched.size(); ++k) {
    const KeyInfo& key = *c.searched[k];
    const double v = std::clamp(value_of(key, c.start), key.lower, key.upper);
    x.push_back(std::clamp(to_x(key, v), c.lower[k], c.upper[k]));
  }
  return x;
}

double start_loss(const Context& c, const std::vector<double>& weight) {
  const Objective objective(c, weight);
  std::vector<double> theta;
  return objective(start_x(c).data(), theta);
}

// Minimises the sample's loss from x0 with BOBYQA, with initial steps of `step` in the optimiser's
// coordinates (a factor e^step), within max_evaluations.
Optimum minimise(const Context& c, const std::vector<double>& weight, std::vector<double> x0,
                 double step, int max_evaluations) {
  const Objective objective(c, weight);
  const size_t n = c.searched.size();
  Optimum best;
  best.x = x0;
  best.loss = objective(x0.data(), best.theta);
  best.loss_start = best.loss;
  if (n > 0) {
    nlopt_opt opt = nlopt_create(NLOPT_LN_BOBYQA, static_cast<unsigned>(n));
    nlopt_set_lower_bounds(opt, c.lower.data());
    nlopt_set_upper_bounds(opt, c.upper.data());
    std::vector<double> steps(n);
    for (size_t k = 0; k < n; ++k) steps[k] = std::min(step, (c.upper[k] - c.lower[k]) / 4);
    nlopt_set_initial_step(opt, steps.data());
    nlopt_set_xtol_abs1(opt, kXtol);
    nlopt_set_maxeval(opt, std::max(1, max_evaluations - 1));
    SearchState state{&objective, &best, {}};
    nlopt_set_min_objective(opt, nlopt_objective, &state);
    double f = 0;
    best.code = static_cast<int>(nlopt_optimize(opt, x0.data(), &f));
    nlopt_destroy(opt);
    snap_to_bounds(c, objective, best);
  }
  best.evaluations = objective.evaluations;
  return best;
}

// The best of BOBYQA runs from the file's values and from three points across the box (every
// coordinate a quarter, half and three quarters of the way up its range): the loss has kinks where
// operators change from memory- to compute-bound, and local minima where keys trade against each
// other (the overhead, the weights' read at one row and the GEMM ramp all add a fixed cost).
Optimum minimise_from_starts(const Context& c, const std::vector<double>& weight,
                             const CalibrationOptions& cal) {
  std::vector<std::vector<double>> starts = {start_x(c)};
  for (double f : {0.25, 0.5, 0.75}) {
    std::vector<double> x(c.searched.size());
    for (size_t k = 0; k < x.size(); ++k) x[k] = c.lower[k] + f * (c.upper[k] - c.lower[k]);
    if (!x.empty()) starts.push_back(x);
  }
  Optimum best;
  int evaluations = 0;
  for (size_t s = 0; s < starts.size(); ++s) {
    Optimum o = minimise(c, weight, starts[s], 0.5, cal.max_evaluations);
    evaluations += o.evaluations;
    if (s == 0) {
      best = std::move(o);
    } else if (o.loss < best.loss) {
      o.loss_start = best.loss_start;  // the loss at the file's values
      best = std::move(o);
    }
  }
  best.evaluations = evaluations;
  return best;
}

}  // namespace servesim::calibration
