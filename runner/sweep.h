// Sweeps: a grid over any configuration keys, every point run through run_configuration() into one
// database (analysis/storage/sweep_db.h), in parallel on threads of this process.
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
//   "hardware,tp" = [["a100-80gb", 8], ["h100-sxm", 4]]   # a tuple axis: these pairs only
//   "replicas[1].count" = [2, 4]   # a key of the second [[replicas]] group
//
// The axes keep the order they are written in (the file's, then the --grid flags'), and that
// order numbers the points; a stored sweep keeps it (sweeps.keys), so that a resumed sweep maps
// every point to the configuration it had. A key may appear in one axis only.
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

// One axis of a grid: a key and its values, or a tuple of keys ("hardware,tp") whose values are
// arrays with one element per key (["h100-sxm", 4]): the axis takes those combinations only.
struct SweepAxis {
  std::string key;        // dotted configuration key, or several joined by ","
  toml::array values;     // non-empty
  std::string origin{};   // where it was given, for messages: "plan.toml:7:1", "--grid"

  // The axis's keys: key split at ",".
  std::vector<std::string> keys() const;
  // Value `i`'s element for key `j` (the value itself on a single-key axis). REQUIRES: i < size.
  const toml::node* value(size_t i, size_t j) const;
};

struct SweepSpec {
  std::string name;
  std::string log = "summary";
  toml::table fixed;
  std::vector<SweepAxis> grid;

  int64_t num_points() const;
  // Every axis's keys, in axis order (a tuple axis gives several).
  std::vector<std::string> keys() const;
  // The values of point `point`, one per key of keys() (pointers into grid).
  std::vector<const toml::node*> values(int64_t point) const;
  // "replicas=2 tp=4": the point's values for messages.
  std::string describe(int64_t point) const;
  // Sets the point's values into `table`; errors name the key (a [[replicas]] group that does not
  // exist, a key whose parent is a value).
  Status set_point(toml::table& table, int64_t point) const;
  // The configuration table of point `point`: fixed, with the point's values set.
  // REQUIRES: check_sweep(*this) is ok.
  toml::table point_table(int64_t point) const;
  // The definition as TOML, as a sweep file (what sweeps.spec stores), without fixed.db.
  std::string to_toml() const;
};

// Reads a sweep file (above). Errors name the file, line and key.
Result<SweepSpec> load_sweep_file(const std::string& path);
// Makes the paths of files a spec names (trace, hardware, model, engine.weights, a group's
// hardware, in `fixed` and in the grid) absolute when they name a file under `base_dir` ("": the
// working directory); preset names stay as they are. A stored sweep then runs the same files
// wherever it is resumed from. load_sweep_file does it with the file's own folder.
void absolutize_paths(SweepSpec& spec, const std::string& base_dir);
// Refuses a stored sweep's preset name that a file in the working folder would shadow (a resume
// would run that file, not the preset the sweep was defined with).
Status check_no_shadowed_presets(SweepSpec& spec);

// The keys the grid sets that the fixed configuration gives too ("tp = 8"): the grid's values win.
std::vector<std::string> overridden_keys(const SweepSpec& spec);

// Parses a stored sweeps.spec; `keys` (sweeps.keys, in the order the sweep numbered its points)
// orders the axes, which the spec's [grid] table holds sorted by name.
Result<SweepSpec> parse_sweep_spec(const std::string& text, const std::string& where,
                                   const std::vector<std::string>& keys);

// Parses --grid KEY=V1,V2,... (each value read as a TOML value, else as a string), or a tuple axis
// --grid KEY1,KEY2=(A1,A2),(B1,B2). Errors name the token: an empty list or value, a tuple of the
// wrong length.
Result<SweepAxis> parse_grid_flag(const std::string& token);

// Adds a --grid axis after the file's: it replaces a file's axis over the same keys; a key that
// another --grid gave, or that a file's axis shares with other keys, is an error naming both.
Status add_grid_flag(SweepSpec& spec, SweepAxis axis);

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
  bool storage_failed = false;  // the database could not be written (the point is interrupted)
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
  std::string shard;                 // "I/N" when it ran one shard's points (a resume keeps it)
  bool interrupted = false;
  // The first write to the database that failed ("" when none): the points not written are
  // interrupted, the others not begun, and the sweep ends interrupted, to be resumed.
  std::string storage_error;
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
