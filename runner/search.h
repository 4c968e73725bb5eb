// `sim search`: the planner's two questions, answered by running the simulator as few times as the
// answer needs, every probe recorded as a point of one `search` sweep (analysis/storage/sweep_db.h).
//
//   max rate    the largest request_rate a configuration carries under the SLOs: the rate doubles
//               from `start_rate` until a probe misses (halves while the start misses), then a k-ary
//               search (k - 1 = jobs probes per round) narrows [pass, miss] until miss / pass - 1 <=
//               precision. The answer is the largest rate that passed.
//   cheapest    the configuration of a grid (any keys but request_rate) that carries the workload at
//               its rate (or --request-rate) for the least GPUs, $ per hour or $ per million output
//               tokens. The replicas axis is searched, not enumerated: serving gets no worse with
//               more replicas, so for each combination of the other keys a binary search finds the
//               fewest replicas that pass, and counts whose cost could not beat the best found so far
//               are never run.
//
// A probe passes when its run is done, it is not overloaded (analysis/metrics/metrics.h), it rejected no
// request (unless a `rejected` SLO allows a share), and every SLO holds (analysis/metrics/slo.h).
//
// A write to the database that fails (a full disk) stops the search: its answer would rest on
// probes it could not record. The search ends interrupted, with the error.
//
// Who runs a round's probes is pluggable (SearchOptions::execute): by default threads of this
// process (run_points of runner/sweep.h); runner/external_probes.h hands them to a parent process
// (scripts/ray_search.py runs them on a Ray cluster). The search itself, which probes and what they
// answer, is the same either way.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "analysis/metrics/slo.h"
#include "runner/sweep.h"
#include "sim/result.h"

namespace servesim {

// Why a probe misses ("" when it passes): slo_miss of analysis/metrics/slo.h on its outcome.
inline std::string slo_miss(const std::vector<Slo>& slos, const PointOutcome& probe) {
  return slo_miss(slos, probe.status, probe.error, probe.metrics);
}

struct SearchSpec {
  std::string name;
  toml::table fixed;            // the base configuration (request_rate is set per probe)
  std::vector<SweepAxis> grid;  // cheapest mode only; empty: max-rate mode
  std::vector<Slo> slos;
  std::string minimize = "gpus";  // gpus | cost_per_hour | cost_per_million_output_tokens
  double start_rate = 1.0;        // max rate: the first probe (req/s)
  double precision = 0.01;        // max rate: relative width of the final interval
  double max_rate = 1e6;          // max rate: give up above this
  std::string to_toml() const;    // the definition, for sweeps.spec
};

struct SearchProbe {
  int64_t point = 0;
  std::vector<const toml::node*> values;  // grid values (cheapest) and request_rate
  PointOutcome outcome;
  std::string miss;  // "" when it passed
};

struct SearchResult {
  int64_t sweep_id = 0;
  std::string db_path;
  bool found = false;
  std::string answer;               // one line
  double rate = 0;                  // max rate mode: the answer
  int64_t best_point = -1;          // the probe that answers (-1: none)
  std::vector<std::string> keys;    // of the probes' values
  std::vector<SearchProbe> probes;  // in the order run
  // Cheapest mode: for each combination of the non-replica keys, in grid order, the probe with the
  // fewest replicas that passed (-1: none passed, or pruned: its fewest replicas would cost at
  // least the best found before it; note says which).
  struct FrontierRow {
    std::string label;  // "hardware=h100-sxm tp=4"
    int64_t probe = -1;
    std::string note;
    // Replica counts below the probe's that were not run because they could not beat the best
    // found before ("5-7"), or because the search stopped first (note says so): the probe's count
    // is then an upper bound, not the fewest that pass.
    std::string untried;
  };
  std::vector<FrontierRow> frontier;
  bool interrupted = false;
  std::string storage_error;  // the first write that failed ("" when none): the search stopped
  std::string executor_error;  // why the executor could not run a round ("" when it could): stopped
  // What the probes' values point into.
  std::vector<std::shared_ptr<toml::array>> owned_rates;
  std::shared_ptr<SweepSpec> owned_grid;
};

// One round of probes, as the search hands it to whoever runs them.
struct ProbeRound {
  int64_t round = 0;                     // 0, 1, ... in the order the search runs them
  const std::vector<toml::table>& tables;  // each probe's configuration (named, its log set)
  const std::vector<int64_t>& points;      // the probes' point numbers in the search
  const std::vector<std::vector<const toml::node*>>& values;  // their swept values, one per key
  const std::vector<std::string>& keys;    // of the values (sweeps.keys)
  int64_t sweep_id = 0;                    // the search's sweeps row
  const std::string& db_path;              // the search's database
};

// Runs a round: one PointOutcome per probe, in the order given, each probe's run in the search's
// database with runs.sweep_id set and its sweep_points row written (record_point), as run_points
// does. A probe that fails is an outcome (failed, with its error), not an Error; an Error means
// that no more probes can run (the process that runs them went away): the search stops, unanswered.
using ProbeExecutor = std::function<Result<std::vector<PointOutcome>>(const ProbeRound&)>;

struct SearchOptions {
  int jobs = 1;  // probes per round (and the threads that run them locally)
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const SearchProbe&)> on_probe = {};  // serialized
  ProbeExecutor execute = {};  // empty: run_points on `jobs` threads of this process
};

// Checks the spec (the configuration resolves, SLO metrics exist, the grid has no request_rate).
Status check_search(const SearchSpec& spec);

Result<SearchResult> run_search(const SearchSpec& spec, const SearchOptions& options);

}  // namespace servesim
