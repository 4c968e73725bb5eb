// The search behind fit_hardware (calibrate.h), shared by its parts and by nothing else: the
// fittable keys, the loss over a weighted sample of the measurements with the additive keys solved
// exactly inside it, and NLopt's BOBYQA over the rest.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analysis/calibration/calibrate.h"

namespace servesim::calibration {

// A fittable key: where it lives in HardwareSpec, its bounds there, and how the optimiser sees it.
struct KeyInfo {
  FitKey key;
  const char* name;               // in the hardware file
  double HardwareSpec::*field;
  // Bounds, in HardwareSpec's unit: the ones load_hardware accepts (hardware_key_bounds), narrowed
  // where the search has tighter limits of its own (efficiencies from 0.01, gemm_half_rows to 8,192).
  double lower, upper;
  double file_unit;               // file unit per HardwareSpec unit (overhead_us: 1e6 per s)
  bool additive;                  // enters every prediction linearly: solved, not searched
  bool grid;                      // a whole number from kGemmTileRowsCandidates: tried, not searched
  const char* low_advice;         // what a value at `lower` means
  const char* high_advice;        // what a value at `upper` means
};

// Every fittable key, in kFitKeys order, within the reader's bounds; the row of one.
std::span<const KeyInfo> all_keys();
const KeyInfo& key_info(FitKey key);
// The key's value in hw: prefill_attention_efficiency 0 stands for attention_efficiency's.
double value_of(const KeyInfo& k, const HardwareSpec& hw);
// The optimiser's coordinate of value v, and back.
double to_x(const KeyInfo& k, double v);
double from_x(const KeyInfo& k, double x);

// splitmix64: a tiny generator whose output is the same with every standard library (the
// distributions of <random> are not), so that a seed gives the same report everywhere.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }  // bias < n / 2^64
};

// Everything a fit of some sample of the data shares.
struct Context {
  const HardwareSpec& start;
  const std::vector<FitModel>& models;
  const std::vector<Measurement>& data;
  const MeasurementPrice& price;
  std::vector<const KeyInfo*> searched;     // by BOBYQA, in its coordinates
  std::vector<const KeyInfo*> solved;       // additive keys the price depends on
  std::vector<std::vector<double>> columns; // solved[j]: d prediction / d value, per measurement
  std::vector<double> lower, upper;         // of the searched coordinates
};

// One hardware's roofline for each of a fit's models.
class Rooflines {
 public:
  Rooflines(const HardwareSpec& hw, const std::vector<FitModel>& models);
  // The prediction compared with measurement i of c.
  double price(const Context& c, size_t i) const;

 private:
  std::vector<RooflineModel> rooflines_;
};

// The keys split into searched and solved, with the solved keys' columns; the keys that move no
// prediction (not fittable from these data) go to `unfitted`.
Context make_context(const HardwareSpec& start, const std::vector<FitModel>& models,
                     const std::vector<Measurement>& data, const CalibrationOptions& cal,
                     std::vector<FitKey>& unfitted);
// The hardware at searched coordinates x and solved values theta.
HardwareSpec hardware_at(const Context& c, const double* x, const std::vector<double>& theta);
// The start's values in the optimiser's coordinates, inside the bounds.
std::vector<double> start_x(const Context& c);
// The loss at the start's values (the additive keys solved), with the weights given.
double start_loss(const Context& c, const std::vector<double>& weight);
// The weighted mean of |predicted - measured| / measured under hw (weight 0: left out).
double mape(const HardwareSpec& hw, const Context& c, const std::vector<double>& weight);

// The best point a search found.
struct Optimum {
  std::vector<double> x, theta;
  double loss_start = 0, loss = 0;
  int code = 1;           // NLopt's nlopt_result (1: NLOPT_SUCCESS)
  int evaluations = 0;
};

// Within this fraction of its range of a bound, a coordinate counts as at the bound.
constexpr double kAtBound = 1e-3;

// Minimises the loss of the sample `weight` (a count per measurement; 0 leaves it out) with BOBYQA
// from x0, initial steps of `step` in the optimiser's coordinates, within max_evaluations.
Optimum minimise(const Context& c, const std::vector<double>& weight, std::vector<double> x0,
                 double step, int max_evaluations);
// The best of minimise() from the file's values and from three points across the box.
Optimum minimise_from_starts(const Context& c, const std::vector<double>& weight,
                             const CalibrationOptions& cal);

}  // namespace servesim::calibration
