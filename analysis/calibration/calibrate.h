// `sim calibrate`: fits a hardware file's efficiencies and fixed costs to measured iterations.
// From measurements (a run's measured iterations with their logged batches, see batch_log.h, or a
// profile read by another tool), it finds the hardware keys of kFitKeys that minimise the mean
// squared relative error of the roofline's predictions,
//     mean over iterations of ((predicted - measured) / measured)^2,
// (relative, so that a 100 us decode counts as much as a 100 ms prefill, as in the MAPE that
// `sim validate` reports; squared, so that the loss is smooth for the optimiser's quadratic models
// and the overhead, which adds to every prediction, has an exact least-squares value),
// starting from a hardware file, and reports what a user needs to trust the result: whether the
// optimiser converged, each value with a bootstrap range and a flag when it sits at a bound, the
// error on measurements held out of the fit, and the signed residuals by kind and size of batch.
// The peaks, memory and interconnect figures are never fitted: they are datasheet (or probe) values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backends/hardware.h"
#include "backends/roofline.h"
#include "sim/io/output_file.h"
#include "sim/result.h"

namespace servesim {

// One measured iteration to fit: its items and measured duration (s, > 0).
// The parts of an iteration a measured time covers (analysis/calibration/measured.h prices each comparably).
enum class Coverage {
  kIteration,     // the whole iteration, as an engine logs it: RooflineBreakdown::total()
  kLayers,        // the transformer layers (Vidur): gemm + attention + other - embedding
  kLinearLayers,  // the layers without attention (Vidur's mlp.csv): gemm + other - embedding
};

struct Measurement {
  std::vector<RooflineModel::Item> items;
  double measured = 0;
  Coverage covers = Coverage::kIteration;
  int32_t model = 0;  // the index of the model it ran (fit_hardware's `models`)
};

// A model measurements were taken of, with the precision and tensor parallelism it ran at: one fit
// may span several (Vidur's profiles of Llama-2-7B, Llama-3-8B and Llama-3-70B on one GPU), so that
// the hardware's keys are pinned by every shape at once.
struct FitModel {
  ModelSpec model;
  RooflineOptions options;
};

// The hardware keys a fit may change. The efficiencies and gemm_half_rows are searched by the
// optimiser; the overhead and the per-sequence attention cost add to predictions linearly, so they
// are solved exactly (within their bounds) for every candidate of the others; gemm_tile_rows is
// chosen from a grid.
enum class FitKey {
  kGemmEfficiency,
  kMemoryEfficiency,
  kAttentionEfficiency,
  kPrefillAttentionEfficiency,
  kPrefillSelfAttentionEfficiency,
  kGemmHalfRows,
  kGemmTileRows,
  kOverhead,
  kAttentionSequence,
};
inline constexpr FitKey kFitKeys[] = {
    FitKey::kGemmEfficiency,  FitKey::kMemoryEfficiency, FitKey::kAttentionEfficiency,
    FitKey::kPrefillAttentionEfficiency, FitKey::kPrefillSelfAttentionEfficiency,
    FitKey::kGemmHalfRows, FitKey::kGemmTileRows,
    FitKey::kOverhead, FitKey::kAttentionSequence};
// gemm_tile_rows is a whole number of rows from a short list: chosen by fitting the other keys at
// each of kGemmTileRowsCandidates (and the start's value) and keeping the lowest loss.
inline constexpr double kGemmTileRowsCandidates[] = {0, 16, 32, 64, 128, 256};
// The key's name in a hardware file ("gemm_efficiency", "overhead_us").
const char* fit_key_name(FitKey key);
// The key's file unit per HardwareSpec unit (overhead_us: 1e6 per second; 1 for the efficiencies).
double fit_key_file_unit(FitKey key);
// The key named `name` (as fit_key_name), or an error listing the names.
Result<FitKey> parse_fit_key(const std::string& name);

// What a fit compares with a measurement: the prediction (s) of `roofline` for it. The default
// prices the whole iteration; a profile that times only some operators passes a price of those
// parts. Called from several threads at once: it must not modify shared state. A key the price
// does not depend on for any measurement (overhead, for a price without it; the prefill attention
// efficiency, for data without prompt chunks) is left as it was and reported as not fitted.
using MeasurementPrice = std::function<double(const RooflineModel& roofline, const Measurement& m)>;
// roofline.price(m.items).total(): the default.
double total_price(const RooflineModel& roofline, const Measurement& m);

struct CalibrationOptions {
  std::vector<FitKey> keys{std::begin(kFitKeys), std::end(kFitKeys)};  // the keys to fit
  MeasurementPrice price = total_price;
  int bootstrap = 100;         // resamples of the measurements for the ranges; 0 = none
  uint64_t seed = 1;           // the bootstrap's resamples and the held-out split
  bool held_out = true;        // also fit a random half and report the error on the other half
  int max_evaluations = 2000;  // pricings of the data per fit, at most
  int threads = 0;             // for the bootstrap; 0 = one per core (the same result on any number)
};

// One fitted key, in the hardware file's unit (overhead_us: microseconds).
struct ParameterFit {
  FitKey key;
  double start = 0, value = 0;
  double lower = 0, upper = 0;  // the bounds of the search
  // The 2.5 % and 97.5 % points of the value over the bootstrap's resamples (value, value when
  // there was no bootstrap). Local: each resample's fit starts at this optimum, so a second
  // optimum elsewhere in the bounds is not counted; trade_offs point at the valleys where the
  // data leave keys free.
  double low = 0, high = 0;
  int at_bound = 0;             // -1 at the lower bound, +1 at the upper, 0 inside
  bool fitted = true;           // false: the price does not depend on the key; kept at start
  bool additive = false;        // solved exactly at every step rather than searched
  bool grid = false;            // chosen from kGemmTileRowsCandidates: no range (low = high = value)
};

// How the optimiser (NLopt's BOBYQA) ended.
struct Convergence {
  int code = 0;           // NLopt's nlopt_result: > 0 success, < 0 failure
  std::string result;     // its name, "XTOL_REACHED"
  std::string meaning;    // what it means for this fit
  bool converged = false; // stopped by a tolerance, not by the evaluation limit or a failure
  int evaluations = 0;    // pricings of the data
  double loss_start = 0, loss = 0;  // mean squared relative error at the start and the end
};

// The signed error of one group of measurements: mean of (predicted - measured) / measured.
struct ResidualGroup {
  std::string kind;  // "prefill", "decode" or "mixed"
  std::string band;  // "small" or "large": at most / more than the kind's median size
  std::string size;  // the band in words: "<= 12 seqs", "> 96 tokens"
  size_t count = 0;
  double before = 0, after = 0;  // with the start and the fitted hardware
};

struct CalibrationFit {
  HardwareSpec hardware;  // the start with the fitted keys replaced
  double mape_before = 0, mape_after = 0;  // mean |predicted - measured| / measured
  int evaluations = 0;    // pricings of the data, the bootstrap's and the held-out fit's included
  Convergence convergence;
  std::vector<ParameterFit> parameters;  // in options.keys order
  int bootstrap = 0;      // resamples behind the ranges
  // Each resample's fitted values, in parameters' order and HardwareSpec units (empty without a
  // bootstrap): written into the hardware file's [calibration] table for the model-uncertainty band.
  std::vector<std::vector<double>> samples;
  // The error of a fit of a random half on the other half; held_out_count == 0: not computed
  // (held_out off, or fewer than 4 measurements).
  size_t held_out_count = 0;
  double held_out_before = 0, held_out_after = 0;
  // The same by kind of measurement ("prefill", "decode", "mixed", "linear-only"), kinds present only.
  struct KindError {
    std::string kind;
    size_t count = 0;
    double before = 0, after = 0;
  };
  std::vector<KindError> held_out_by_kind;
  // The same by model (Measurement::model), when the fit spans more than one: kind is the index.
  std::vector<KindError> held_out_by_model;
  std::vector<ResidualGroup> residuals;  // by kind (prefill, decode, mixed), then small, large
  // Pairs of keys whose values move together over the resamples (|correlation| >= 0.9): the
  // measurements pin a combination of them, not each (the overhead, the weights' read at one row
  // and the GEMM ramp all add a fixed cost to an iteration).
  struct TradeOff {
    FitKey a, b;
    double correlation;
  };
  std::vector<TradeOff> trade_offs;
  // How many of the measurements differ in what was measured (the batch's items, the model, the
  // parts covered): identical batches pin one value between them, whatever their number.
  size_t distinct_batches = 0;

  // Why the measurements cannot determine the keys fitted, or "" when they can: fewer distinct
  // batches than keys fitted (each resample then fits the same few batches exactly, so the ranges
  // would be 0 wide while the keys are free). sim calibrate refuses such a fit.
  std::string undetermined() const;

  // One line per thing to distrust, each saying what it means and what to do: no convergence, a
  // key at a bound, a trade-off that leaves a key loose (a range wider than a quarter of its value),
  // a held-out error well above the fit's own.
  std::vector<std::string> warnings() const;
};

// The fit, deterministic for a given seed (whatever the threads). Minimises the loss with NLopt's
// BOBYQA over the logarithms of the efficiencies and of 1 + gemm_half_rows, from the start's values
// and from three points across the bounds, keeping the best; for every candidate the additive keys
// take their exact least-squares values within their bounds. Then the bootstrap (each resample's fit
// warm-started at the optimum), the held-out fit and the residuals. At most (8 + bootstrap) x
// max_evaluations pricings of the data; a few seconds for 10,000 measured iterations.
// REQUIRES: !data.empty(), every measured > 0, options.keys without repeats.
CalibrationFit fit_hardware(const HardwareSpec& start, const ModelSpec& model,
                            const RooflineOptions& options, const std::vector<Measurement>& data,
                            const CalibrationOptions& calibration = {});
// The same over measurements of several models (each Measurement::model < models.size()).
CalibrationFit fit_hardware(const HardwareSpec& start, const std::vector<FitModel>& models,
                            const std::vector<Measurement>& data, const CalibrationOptions& calibration = {});

// The hardware TOML text of hw, every key of data/hardware/README.md in its unit, after `header`
// (comment lines, each starting with "# ").
std::string hardware_toml(const HardwareSpec& hw, const std::string& header);
// hw (the fit's hardware) with the [calibration] table of `fit`: the keys fitted by search or solved
// (not the grid's, which do not vary) and each bootstrap resample's values, in the file's units.
HardwareSpec with_calibration_table(HardwareSpec hw, const CalibrationFit& fit);

// Measured timings to fit: `path` a Vidur profile folder or a CSV of ours (analysis/calibration/measured.h), of
// the model in model_path at tensor-parallel degree tp.
struct MeasuredProfile {
  std::string path;
  std::string model_path;
  int32_t tp = 1;
};
// The fit to measured timings (of one GPU, several models and degrees at once): priced with
// `hardware_path`, each measurement only over the parts it covers (comparable_price; so the
// overhead, which no profile covers, is not fitted). Writes out_file and prints the report of
// calibrate_run, with the error of each source before and after (on the held-out half too).
Status calibrate_measured(const std::vector<MeasuredProfile>& sources, const std::string& hardware_path,
                          OutputFile& out_file, std::ostream& out, const CalibrationOptions& calibration = {});

// Reads the run (default: the latest) from db_path, fits its hardware file, writes the result to
// out_file (sim/io/output_file.h; loadable with load_hardware; its header comment names the run, the
// errors, the convergence and any warning), prints the report of the fit, and stores its summary as
// the run's calibrate_* metrics (when the database takes writes). Errors: out_file.check()'s, before
// anything is read; no database, no such run, no measured iterations, no batch_items, an unreadable
// hardware or model file; a failed write (out_file.write_failed(); nothing printed but the error).
Status calibrate_run(const std::string& db_path, std::optional<int64_t> run_id, OutputFile& out_file,
                     std::ostream& out, const CalibrationOptions& calibration = {});

}  // namespace servesim
