// A measured run's batches read back (the batch_items rows analysis/storage/batch_log.h writes,
// with the iterations' measured durations) and re-priced by a roofline: what `sim validate
// --hardware` and `sim calibrate` compare and fit.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/roofline.h"
#include "sim/result.h"

namespace servesim {

// One measured iteration with its items, as logged.
struct LoggedIteration {
  int32_t replica = 0;
  int64_t step = 0;
  double measured = 0;    // duration (s), > 0
  double predicted = -1;  // the prediction logged beside it (s), or -1
  int64_t num_seqs = 0, prefill_tokens = 0, decode_tokens = 0;
  std::vector<RooflineModel::Item> items;  // empty when the run logged no batch_items
};

// The run's files and backend, from its runs row.
struct RunSources {
  int64_t id = 0;
  std::string backend, hardware, model;
};

// The runs row `run_id` (default: the latest). Errors: no such run, no runs.
Result<RunSources> read_run_sources(sqlite3* db, const std::string& db_path,
                                    std::optional<int64_t> run_id);

// The run's iterations with duration > 0 in (replica, step) order, with their items when
// with_items. Errors: with_items and the run has no batch_items rows ("run N logged no batches").
Result<std::vector<LoggedIteration>> read_logged_iterations(sqlite3* db, int64_t run,
                                                            bool with_items);

// The precisions a run's engine computed in: fp32 throughout for the cpu backend, else the
// model's dtype for weights, KV and activations.
RooflineOptions replay_options(const std::string& backend, const ModelSpec& model);

// A roofline for re-pricing the run's batches: the hardware file at hardware_path, the run's model
// file, replay_options. Errors: either file unreadable (the message names it and the run).
Result<RooflineModel> replay_roofline(const RunSources& run, const std::string& hardware_path);

}  // namespace servesim
