// Sweeps: a grid over any configuration keys, every point run through run_configuration() into one
// database (analysis/sweep_db.h), in parallel on threads of this process.
//
// A sweep is defined by a base configuration (`fixed`: every key a --config file takes) and a grid
// of keys, each with a list of values; the points are the grid's Cartesian product, numbered from 0
// with the last key varying fastest. In a sweep file:
//
//   name = "replicas x rate"       # optional
//   log = "summary"                # optional: rows each point logs (summary | requests | iterations)
//   [fixed]                        # the base configuration
//   trace = "pareto.toml"
//   hardware = "h100-sxm"
//   [grid]                         # each key a non-empty list; dotted keys reach into tables
//   replicas = [1, 2, 4, 8]
//   request_rate = [2, 4, 8]
//   "policy.long_prefill_token_threshold" = [0, 512]
//
// A point that cannot run (the model does not fit, tp does not divide the heads) is recorded as
// failed with its reason and the sweep goes on; a key or value that no point could take (an unknown
// key, a value of the wrong type, a preset that does not exist) is an Error before anything runs.
// Points log summaries (the runs and metrics rows) unless `log` says otherwise, so a 1,000-point
// sweep stays small.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "runner/run.h"
#include "sim/result.h"

namespace servesim {

struct SweepAxis {
  std::string key;        // dotted configuration key
  toml::array values;     // non-empty
};

struct SweepSpec {
  std::string name;
  std::string log = "summary";
  toml::table fixed;
  std::vector<SweepAxis> grid;

  int64_t num_points() const;
  std::vector<std::string> keys() const;
  // The values of point `point`, one per axis (pointers into grid).
  std::vector<const toml::node*> values(int64_t point) const;
  // "replicas=2 tp=4": the point's values for messages.
  std::string describe(int64_t point) const;
  // The configuration table of point `point`: fixed, with the point's values set.
  toml::table point_table(int64_t point) const;
  // The definition as TOML, as a sweep file (what sweeps.spec stores), without fixed.db.
  std::string to_toml() const;
};

// Reads a sweep file (above). Errors name the file, line and key.
Result<SweepSpec> load_sweep_file(const std::string& path);
// Parses a stored sweeps.spec.
Result<SweepSpec> parse_sweep_spec(const std::string& text, const std::string& where);

// Parses --grid KEY=V1,V2,... (each value read as a TOML value, else as a string). Errors name the
// token: an empty list or an empty value.
Result<SweepAxis> parse_grid_flag(const std::string& token);

// Adds or replaces an axis.
void set_axis(SweepSpec& spec, SweepAxis axis);

// Every point's configuration resolves, and its policy, workload and preset names exist: the first
// error, prefixed with the point ("point 3 (replicas=2 tp=4): ..."). Also refuses an empty grid,
// a grid over `db`, and more than kMaxSweepPoints points.
inline constexpr int64_t kMaxSweepPoints = 1'000'000;
Status check_sweep(const SweepSpec& spec);

struct PointOutcome {
  int64_t point = 0;
  int64_t run_id = 0;       // 0: the point could not start
  std::string status;       // done | failed | interrupted
  std::string error;
  std::vector<Metric> metrics;
};

struct SweepOptions {
  int jobs = 1;                              // threads
  std::optional<std::pair<int64_t, int64_t>> shard = {};  // (i, n): only points with point % n == i
  int64_t resume_id = 0;                     // rerun the points of this sweep not yet done
  std::string kind = "sweep";                // sweeps.kind (sweep | search | seeds)
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const PointOutcome&, int64_t done, int64_t total)> on_point = {};  // serialized
};

struct SweepResult {
  int64_t sweep_id = 0;
  std::string db_path;
  std::vector<PointOutcome> points;  // the points run now, in point order
  int64_t skipped = 0;               // points already done (resume) or in other shards
  bool interrupted = false;
};

// Runs the sweep's pending points with `jobs` threads into the database its base configuration
// names (db, default sim.db). REQUIRES: check_sweep(spec) is ok.
Result<SweepResult> run_sweep(const SweepSpec& spec, const SweepOptions& options);

// The database path of the sweep's points.
std::string sweep_db_path(const SweepSpec& spec);

// Runs a list of configurations (given as tables) in parallel into one sweep, for search: like
// run_sweep over explicit points. `point_ids` number them in the sweep. Used by search.
std::vector<PointOutcome> run_points(const std::vector<toml::table>& tables,
                                     const std::vector<int64_t>& point_ids,
                                     const std::vector<std::vector<const toml::node*>>& values,
                                     const std::vector<std::string>& keys, int64_t sweep_id,
                                     const std::string& db_path, int jobs, WorkloadCache& cache,
                                     const std::atomic<bool>* stop,
                                     const std::function<void(const PointOutcome&)>& on_point = {});

}  // namespace servesim
