// The SQLite database that a run writes and `sim report` reads: servesim's main output.
//
// Database owns one sqlite3 connection to one file. open() creates the schema below when it is
// absent and refuses a file that is not SQLite or whose tables have another shape, so nothing is
// ever written into someone else's database. Each run appends one `runs` row (begin_run) and its
// requests, iterations and metrics rows (DbRecorder). All times stored are seconds (REAL).
//
//   runs(id INTEGER PRIMARY KEY, name, started_at, finished_at, status, policy, backend, hardware,
//        model, workload, config, seed, version, wall_seconds, error)
//   requests(run_id, id, replica, arrival, scheduled, first_token, finished, prompt_tokens,
//            output_tokens, cached_tokens, preemptions, status, reason)
//            PRIMARY KEY (run_id, id)
//   iterations(run_id, replica, step, start, duration, num_seqs, prefill_tokens, decode_tokens,
//              kv_blocks_used, kv_blocks_total, predicted)
//              PRIMARY KEY (run_id, replica, step)
//   metrics(run_id, name, value)  PRIMARY KEY (run_id, name)
// Times are seconds (NULL: did not happen); started_at and finished_at are ISO-8601 UTC text;
// status is running | done | interrupted | failed for runs, finished | rejected | unfinished for
// requests. The exact column types are in database.cc.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "analysis/storage/disk_reserve.h"
#include "sim/result.h"

namespace servesim {

// PRAGMA user_version of databases this code writes. 2: requests.priority, and runs.host and
// runs.pid (the process that writes the run, so that a reader can tell a run whose process is gone
// from one still running). A version-1 database is upgraded in place when opened for writing, its
// old rows' new columns NULL; read-only opens read it as it is.
// 3: runs.replicas, tp, gpus, overloaded and sweep_id; the sweeps and sweep_points tables (the
// latter with one more column per swept key). Older databases are upgraded the same way.
// 4: the timeline table: per replica and time bucket (log_resolution seconds), the iterations that
// started in it, summed (iterations, busy seconds, tokens) or their extremes (running, waiting, KV).
// PRIMARY KEY (run_id, bucket, replica): rows come in about time order, so each goes in at the end
// of the table. (Databases made before this was so have the key (run_id, replica, bucket): the same
// rows, unique the same way, only stored in another order.)
// 5: the distributions table: distributions(run_id, metric, quantile, value), PRIMARY KEY (run_id,
// metric, quantile): each latency's value (seconds) at the quantiles of quantile_grid()
// (analysis/metrics/metrics.h), written with the metrics, so that CDFs can be drawn at every log level.
// 6: the transfers table (disaggregated serving): transfers(run_id, request_id, prefill_replica,
// decode_replica, tokens, bytes, ready, reserved, started, arrived), PRIMARY KEY (run_id,
// request_id): each request's prompt KV moving from its prefill replica to its decode replica, with
// when the KV was ready (first token), when the decode replica took blocks for it, when its bytes
// started moving and when they arrived (seconds).
// 7: sweeps.resumed_at: when `sim sweep --resume` last took the sweep over (its host and pid then
// name the resuming process), so that a resume is refused while another process still runs it;
// sweeps.shard: "I/N" for a sweep run with --shard I/N (NULL: every point), which a resume keeps;
// runs.uid: a random 128-bit id of the run, which identifies it across databases (sim merge).
inline constexpr int kSchemaVersion = 7;

// This machine's host name (gethostname), for runs.host.
std::string this_host();

struct RunInfo {
  // Every field has a default, so designated initializers may name only some (-Wextra is quiet).
  std::string name{}, policy{}, backend{}, hardware{}, model{}, workload{};
  std::string config_toml{};  // the fully resolved run configuration, as TOML text
  uint64_t seed = 0;          // stored as a 64-bit signed integer (the same bits)
  std::string version{};      // servesim version
  std::string host{};         // the machine that runs it ("" = NULL)
  int64_t pid = 0;            // the process that writes it (0 = NULL)
  int32_t replicas = 1, tp = 1;
  int64_t gpus = -1;          // -1: replicas x tp (mixed hardware: the groups' sum)
  int64_t sweep_id = 0;       // the sweep or search it is a point of (0 = NULL)
};

// The path that names SQLite's in-memory database: nothing is written to disk.
inline constexpr std::string_view kInMemoryDatabase = ":memory:";

class Database {
 public:
  // Opens or creates the file at path, sets `synchronous` (off | normal | full, as
  // set_synchronous) and then WAL journaling, and creates the schema if absent: so that with "off"
  // neither the switch to WAL (a file the last writer left in rollback mode) nor a new file's
  // schema waits for the disk. A file that is not SQLite, a database of another program (tables
  // but no `runs`), tables of another shape, or a newer schema version is an Error that says so.
  // kInMemoryDatabase opens a database held in memory by this connection alone.
  static Result<std::unique_ptr<Database>> open(const std::string& path,
                                                const std::string& synchronous = "normal");

  // Opens an existing database for reading only; never creates a file or the schema, and works on a
  // database another user wrote in a folder or file system this one cannot write (a writer leaves
  // the file in rollback-journal mode when it is the last; one left in WAL mode is read as an
  // immutable file). Errors: no file at path, not SQLite, not a servesim database.
  static Result<std::unique_ptr<Database>> open_read_only(const std::string& path);

  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() { return db_; }
  const std::string& path() const { return path_; }

  // Inserts the runs row with status 'running' and started_at now, committed at once.
  // Returns the new run's id. Empty strings are stored as NULL.
  Result<int64_t> begin_run(const RunInfo& info);

  // How long a write waits for the disk on this connection (PRAGMA synchronous; open() sets what
  // it is given): "off" hands the pages to the operating system and goes on, which a crash of the
  // program cannot hurt but a crash of the operating system or a power cut before they reach the
  // disk may (the newest rows lost, or the file damaged); "normal" waits at each checkpoint; "full"
  // at every commit too. Any other mode is an Error.
  Status set_synchronous(const std::string& mode);

  // Runs sql (one or more statements without parameters). Errors carry sqlite's message.
  Status exec(const char* sql);

  // "PATH: sqlite's latest error message", for Errors.
  std::string error_message() const;

  // Gives back the room a writer keeps beside the file (analysis/storage/disk_reserve.h), for the writes
  // that record a failure when the disk is full; false when there was none.
  bool release_reserve() { return reserve_ != nullptr && reserve_->release(); }

 private:
  Database(sqlite3* db, std::string path, bool read_only = false)
      : db_(db), path_(std::move(path)), read_only_(read_only) {}
  // Checks that the tables present have the schema's columns; creates what is absent if writable.
  Status check_schema(bool create);

  sqlite3* db_;
  std::string path_;
  bool read_only_;
  std::unique_ptr<DiskReserve> reserve_;  // writable files only
};

// 32 random hex digits: a run's uid.
std::string random_uid();

// The current UTC time as ISO-8601 text with milliseconds, e.g. "2025-01-31T14:03:07.250Z".
std::string utc_now_iso8601();

}  // namespace servesim
