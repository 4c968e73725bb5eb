// The sweeps and sweep_points tables: a sweep (or a search) is one `sweeps` row, and each of its
// points one `sweep_points` row with the point's swept values as columns named by their keys, so one
// query gives the table:
//
//   SELECT p.replicas, p.tp, m.value AS ttft_p99 FROM sweep_points p
//     JOIN metrics m ON m.run_id = p.run_id AND m.name = 'ttft_p99' WHERE p.sweep_id = 1;
//
//   sweeps(id, name, kind, started_at, finished_at, status, spec, keys, points, answer, host, pid,
//          resumed_at, shard)
//     kind: sweep | search | seeds (`sim --seeds N`: a grid over seed alone); status: running |
//     done | interrupted | failed; spec: the sweep's
//     definition as TOML (what --resume reruns); keys: the swept keys, comma-separated, in order;
//     points: how many points the grid has; answer: a search's answer in one line; host, pid: the
//     process that runs it (the last to resume it, at resumed_at); shard: "I/N" when it runs the
//     points p with p % N == I only (sim sweep --shard), NULL for all (a merge of every shard)
//   sweep_points(sweep_id, point, run_id, status, error, <one column per swept key>)
//     point: the index in the grid (0-based, the last key varying fastest); run_id: NULL when the
//     point could not start (its error says why); status: done | failed | interrupted
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "analysis/storage/database.h"
#include "sim/result.h"

namespace servesim {

struct SweepInfo {
  std::string name{}, kind = "sweep", spec{};
  std::vector<std::string> keys{};
  int64_t points = 0;
  std::string shard{};  // "I/N" for a sweep of the points p with p % N == I; "": every point
};

// Inserts the sweeps row (status running) and adds a sweep_points column for each key that has none.
Result<int64_t> begin_sweep(Database& db, const SweepInfo& info);

// Adds the columns for `keys` to sweep_points where missing (a resumed or merged sweep).
Status add_point_columns(Database& db, const std::vector<std::string>& keys);

struct PointRow {
  int64_t point = 0;
  int64_t run_id = 0;  // 0: NULL
  std::string status, error;
  std::vector<const toml::node*> values;  // one per key, in the sweep's key order
};

// Writes (or replaces) the point's row.
Status record_point(Database& db, int64_t sweep_id, const std::vector<std::string>& keys,
                    const PointRow& row);

// Completes the sweeps row.
Status end_sweep(Database& db, int64_t sweep_id, const std::string& status, const std::string& answer);

struct StoredSweep {
  int64_t id = 0;
  std::string name, kind, status, spec, answer;
  std::vector<std::string> keys;
  int64_t points = 0;
  std::string host, started_at, resumed_at;
  int64_t pid = 0;
  std::string shard;  // "I/N", or "" for every point
};

// The sweeps row `id` (nullopt: the latest); errors name the ids that exist.
Result<StoredSweep> read_sweep(Database& db, std::optional<int64_t> id);

// Takes sweep `id` over for a resume, in one transaction: refused while the sweep is recorded as
// running and its process is alive on this host ("sweep 3 is still running: process 4242 on
// node7 ..."); else it becomes running, owned by this process from now.
Status claim_sweep(Database& db, int64_t id);

// Points of sweep `id` whose status is in `statuses`.
Result<std::vector<int64_t>> points_with_status(Database& db, int64_t sweep_id,
                                                const std::vector<std::string>& statuses);

// The keys of sweeps.keys ("replicas,tp"), in order.
std::vector<std::string> split_sweep_keys(const std::string& text);

// SQL identifier for a key: "replicas", "policy.max_wait" (double-quoted, quotes doubled).
std::string quote_identifier(const std::string& key);

}  // namespace servesim
