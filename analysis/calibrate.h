// `sim calibrate`: fits a hardware file's efficiencies and per-iteration overhead to a measured
// run.
// From the run's measured iterations and their logged batches (batch_items, see batch_log.h), it
// finds the gemm_efficiency, memory_efficiency, attention_efficiency (each in [0.01, 1]) and
// overhead (>= 0) that minimise the mean squared relative error of the roofline's predictions,
//     sum over iterations of ((predicted - measured) / measured)^2,
// starting from the run's hardware file, and writes a copy of that file with the fitted values.
// The peaks, memory and interconnect figures are copied unchanged: they are datasheet values.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backends/hardware.h"
#include "backends/roofline.h"
#include "sim/result.h"

namespace servesim {

// One measured iteration to fit: its items and measured duration (s, > 0).
struct Measurement {
  std::vector<RooflineModel::Item> items;
  double measured = 0;
};

struct CalibrationFit {
  HardwareSpec hardware;  // the start with the four values fitted
  double mape_before = 0, mape_after = 0;  // mean |predicted - measured| / measured
  int evaluations = 0;    // times every measurement was priced
};

// The fit itself, deterministic and bounded (a few thousand pricings of the data at most):
// coordinate descent on the logarithms of the three efficiencies, with halving steps, where for
// every candidate the overhead is the exact least-squares value (it adds to every prediction).
// REQUIRES: !data.empty(), every measured > 0.
CalibrationFit fit_hardware(const HardwareSpec& start, const ModelSpec& model,
                            const RooflineOptions& options, const std::vector<Measurement>& data);

// The hardware TOML text of hw, every key of data/hardware/README.md in its unit, after `header`
// (comment lines, each starting with "# ").
std::string hardware_toml(const HardwareSpec& hw, const std::string& header);

// Reads the run (default: the latest) from db_path, fits its hardware file, writes the result to
// out_path (loadable with load_hardware; its header comment names the run and the MAPE before and
// after) and prints a before/after table. Errors: no database, no such run, no measured
// iterations, no batch_items, an unreadable hardware or model file, an unwritable out_path.
Status calibrate_run(const std::string& db_path, std::optional<int64_t> run_id,
                     const std::string& out_path, std::ostream& out);

}  // namespace servesim
