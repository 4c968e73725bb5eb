// Running a sweep: its points on -j workers, each recorded as it ends, and a resume of the points
// not done. The grid and its checks are runner/sweep_spec.cc's.
#include "runner/sweep.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "analysis/storage/sweep_db.h"
#include "sim/config/config.h"

namespace servesim {

namespace {

// Runs one point on a worker's connection. A point whose run could not write the database ends
// interrupted (a resume reruns it): a full disk says nothing about its configuration.
void run_point(const toml::table& table, Database* db, const std::string& db_error, int64_t sweep_id,
               WorkloadCache& cache, const std::atomic<bool>* stop, PointOutcome& o) {
  if (db == nullptr) {
    o.status = "interrupted";
    o.error = db_error;
    o.storage_failed = true;
    return;
  }
  Result<RunConfig> config = resolve_config(table);
  if (!config.ok()) {
    o.status = "failed";
    o.error = config.error().message;
    return;
  }
  RunEnvironment env;
  env.db = db;
  env.sweep_id = sweep_id;
  env.workloads = &cache;
  env.stop = stop;
  env.threads = 1;  // the workers use the cores
  Result<RunOutput> ran = run_configuration(config.value(), env);
  if (!ran.ok()) {
    o.storage_failed = ran.error().storage;
    o.status = o.storage_failed ? "interrupted" : "failed";
    o.error = ran.error().message;
    return;
  }
  RunOutput& r = ran.value();
  o.run_id = r.run_id;
  o.metrics = std::move(r.metrics);
  if (!r.write_error.empty()) {
    o.status = "interrupted";
    o.error = "writing " + db->path() + " failed: " + r.write_error;
    o.storage_failed = true;
    return;
  }
  o.status = r.run_id == 0 ? "interrupted" : r.status;
  o.error = r.error;
}

}  // namespace

std::vector<PointOutcome> run_points(const std::vector<toml::table>& tables,
                                     const std::vector<int64_t>& point_ids,
                                     const std::vector<std::vector<const toml::node*>>& values,
                                     const std::vector<std::string>& keys, int64_t sweep_id,
                                     const std::string& db_path, int jobs, WorkloadCache& cache,
                                     const std::atomic<bool>* stop,
                                     const std::function<void(const PointOutcome&)>& on_point) {
  std::vector<PointOutcome> out(tables.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> storage_failed{false};  // a write failed: the points not begun are not begun
  std::mutex mutex;
  auto worker = [&] {
    std::unique_ptr<Database> db;
    std::string db_error;
    if (auto opened = Database::open(db_path); opened.ok()) {
      db = std::move(opened).value();
    } else {
      db_error = opened.error().message;
    }
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= tables.size()) break;
      PointOutcome& o = out[i];
      o.point = point_ids[i];
      if ((stop != nullptr && stop->load()) || storage_failed.load()) {
        o.status = "interrupted";
        o.error = storage_failed.load() ? "not begun: another point could not write the database"
                                        : "interrupted before it started";
        continue;
      }
      run_point(tables[i], db.get(), db_error, sweep_id, cache, stop, o);
      if (db) {
        PointRow row{o.point, o.run_id, o.status, o.error, values[i]};
        if (Status s = record_point(*db, sweep_id, keys, row); !s.ok()) {
          // Unrecorded, the point counts as not run: a resume runs it.
          o.status = "interrupted";
          o.error = (o.error.empty() ? "" : o.error + "; ") + "recording the point failed: " + s.error().message;
          o.storage_failed = true;
        }
      }
      if (o.storage_failed) storage_failed = true;
      if (on_point) {
        std::lock_guard<std::mutex> lock(mutex);
        on_point(o);
      }
    }
  };
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(tables.size())));
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  return out;
}

namespace {

std::string shard_text(const std::pair<int64_t, int64_t>& s) {
  return std::to_string(s.first) + "/" + std::to_string(s.second);
}

// A resumed sweep: its stored shard (in `shard`), and its points not to run again, sorted (in
// `settled`); the sweep claimed by this process.
Status resume_sweep(Database& db, const std::vector<std::string>& keys, int64_t resume_id, SweepResult& result,
                    std::optional<std::pair<int64_t, int64_t>>& shard, std::vector<int64_t>& settled) {
  result.sweep_id = resume_id;
  // A shard's sweep resumes its own points only (the other shards' are other databases').
  Result<StoredSweep> stored = read_sweep(db, resume_id);
  if (!stored.ok()) return stored.error();
  if (!stored.value().shard.empty()) {
    if (shard && shard_text(*shard) != stored.value().shard) {
      return Error{"--shard " + shard_text(*shard) + ": sweep " + std::to_string(resume_id) +
                   " was run as shard " + stored.value().shard + "; resume it as that shard (or leave --shard out)"};
    }
    const size_t slash = stored.value().shard.find('/');
    shard = std::pair<int64_t, int64_t>(std::stoll(stored.value().shard.substr(0, slash)),
                                        std::stoll(stored.value().shard.substr(slash + 1)));
  }
  result.shard = stored.value().shard;
  if (Status s = add_point_columns(db, keys); !s.ok()) return s;
  // Done points stay; so do points that could not start (their configuration cannot change).
  Result<std::vector<int64_t>> done = points_with_status(db, resume_id, {"done"});
  if (!done.ok()) return done.error();
  settled = std::move(done).value();
  Result<std::vector<int64_t>> failed = points_with_status(db, resume_id, {"failed"});
  if (!failed.ok()) return failed.error();
  settled.insert(settled.end(), failed.value().begin(), failed.value().end());
  std::sort(settled.begin(), settled.end());
  return claim_sweep(db, result.sweep_id);
}

}  // namespace

Result<SweepResult> run_sweep(const SweepSpec& spec, const SweepOptions& options) {
  SweepResult result;
  result.db_path = sweep_db_path(spec);
  Result<std::unique_ptr<Database>> opened = Database::open(result.db_path);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  const std::vector<std::string> keys = spec.keys();
  const int64_t total = spec.num_points();
  std::vector<int64_t> settled;  // points not to run again
  std::optional<std::pair<int64_t, int64_t>> shard = options.shard;
  if (options.resume_id > 0) {
    if (Status s = resume_sweep(db, keys, options.resume_id, result, shard, settled); !s.ok()) return s.error();
  } else {
    SweepInfo info{spec.name, options.kind, spec.to_toml(), keys, total, shard ? shard_text(*shard) : ""};
    result.shard = info.shard;
    Result<int64_t> id = begin_sweep(db, info);
    if (!id.ok()) return id.error();
    result.sweep_id = id.value();
  }
  std::vector<toml::table> tables;
  std::vector<int64_t> ids;
  std::vector<std::vector<const toml::node*>> values;
  for (int64_t p = 0; p < total; ++p) {
    if ((shard && p % shard->second != shard->first) ||
        std::binary_search(settled.begin(), settled.end(), p)) {
      ++result.skipped;
      continue;
    }
    tables.push_back(spec.point_table(p));
    ids.push_back(p);
    values.push_back(spec.values(p));
  }
  WorkloadCache cache;
  int64_t finished = 0;
  const auto pending = static_cast<int64_t>(tables.size());
  result.points = run_points(tables, ids, values, keys, result.sweep_id, result.db_path, options.jobs,
                             cache, options.stop, [&](const PointOutcome& o) {
                               ++finished;
                               if (options.on_point) options.on_point(o, finished, pending);
                             });
  result.interrupted = options.stop != nullptr && options.stop->load();
  for (const PointOutcome& o : result.points) {
    if (o.storage_failed && result.storage_error.empty()) result.storage_error = o.error;
  }
  // Points interrupted (before they started, or midway, or by a write that failed) are rerun by a
  // resume.
  const bool complete = !result.interrupted && result.storage_error.empty();
  if (Status s = end_sweep(db, result.sweep_id, complete ? "done" : "interrupted", ""); !s.ok()) {
    if (result.storage_error.empty()) result.storage_error = "ending the sweep: " + s.error().message;
  }
  return result;
}

}  // namespace servesim
