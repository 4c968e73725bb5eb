// The library entry point: run one configuration, get its metrics and status. `sim run`, `sim
// sweep`, `sim search` and the Ray workers all call run_configuration(); the command line is a thin
// layer over it.
//
// Everything that reads user input (presets, hardware, model, policy options, the workload) is
// checked before the run's row is written: a bad configuration is an Error and writes nothing. Once
// the row exists the run is recorded whatever happens, and the outcome says how it ended.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "analysis/storage/database.h"
#include "analysis/metrics/metrics.h"
#include "analysis/reports/report.h"
#include "sim/config/config.h"
#include "sim/result.h"
#include "workloads/workload.h"

namespace servesim {

// Workloads shared by the runs of one process (a sweep's points that differ only in the
// deployment replay the same requests): keyed by file, seed and load controls. Thread-safe.
class WorkloadCache {
 public:
  // The workload of `path` (resolved) under `seed` and `load`, loaded once.
  Result<std::shared_ptr<const Workload>> get(const std::string& path, std::optional<uint64_t> seed,
                                              const LoadControls& load);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Workload>> loaded_;
};

struct RunEnvironment {
  Database* db = nullptr;            // the database to append to; nullptr: open config.db
  int64_t sweep_id = 0;              // runs.sweep_id (0: none)
  WorkloadCache* workloads = nullptr;  // nullptr: load the workload for this run only
  const std::atomic<bool>* stop = nullptr;  // set (by a signal) to stop the run; it ends interrupted
  std::ostream* notes = nullptr;     // where notes about ignored settings go; nullptr: none
  std::ostream* progress = nullptr;  // where a progress line is drawn (a terminal); nullptr: none
  // The requests to run, built in memory (`sim validate --vllm-result`), in place of loading
  // config.trace, which then only names them in the record; nullptr: load config.trace. The load
  // controls of the configuration other than max_concurrency do not apply to it. Must outlive the call.
  const Workload* workload = nullptr;
  // More observers of the run, called after the run's own; they must outlive the call.
  std::vector<Recorder*> recorders{};
  // A csv, vidur or azure trace given as it is is read on a thread of its own while the run takes its
  // rows (workloads/trace_beside.h), when the run is the only user of the workload, has no
  // observers, load controls or disaggregation, and its backend prices the batches. false: read
  // first.
  bool read_trace_beside = true;
  // The threads a run of config.threads = 0 (auto) may simulate on (SimOptions::threads); 0: as
  // many as the machine runs at once, less one for the writer's when rows are written. A sweep's
  // points take 1: its workers use the cores.
  int32_t threads = 0;
};

struct RunOutput {
  int64_t run_id = 0;
  std::string status;                // done | interrupted | failed
  std::string error;                 // why it failed ("" when done)
  bool bad_input = false;            // failed because of the inputs (a time past the horizon)
  std::string write_error;           // a database write that failed ("" when none)
  std::vector<Metric> metrics;
  SummaryHeader header;              // for print_summary
  std::string db_path;
  double wall_seconds = 0;

  // The value of metric `name`, if the run has it.
  std::optional<double> metric(std::string_view name) const;
};

// The load controls of a configuration (rate_scale F as time_scale 1/F).
LoadControls load_controls(const RunConfig& config);

// Runs `config`. Errors (nothing written): a preset, file, option or workload that cannot be used.
Result<RunOutput> run_configuration(const RunConfig& config, const RunEnvironment& env = {});

}  // namespace servesim
