// The recorder that writes a run into the database: one requests row per settled request, one
// iterations row per iteration, and at the end the run's metrics rows and its final status.
//
// DbRecorder borrows the Database and the MetricsAccumulator (both must outlive it) and owns its
// prepared statements. Rows are written in transactions of about 50,000 rows, so a run of a million
// requests takes seconds, not minutes; what was written before an interruption is committed at the
// end. A failed write (disk full...) stops further writes and is kept in write_error(); it never
// throws and never stops the simulation.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/database.h"
#include "analysis/metrics.h"
#include "sim/recorder.h"

namespace servesim {

// What a run logs beyond its runs and metrics rows: kRequests adds a requests row per request and
// a timeline row per replica and time bucket; kIterations adds an iterations row per iteration.
enum class LogLevel { kSummary, kRequests, kIterations };

// "summary" | "requests" | "iterations" (RunConfig::log).
LogLevel parse_log_level(const std::string& name);

class DbRecorder : public Recorder {
 public:
  // REQUIRES: run_id is a runs row of db (from Database::begin_run).
  // resolution: the timeline's bucket width in seconds (> 0).
  DbRecorder(Database& db, int64_t run_id, const MetricsAccumulator& metrics,
             LogLevel level = LogLevel::kIterations, double resolution = 1.0);
  // Commits what is pending if on_run_end was never called (the run row stays 'running').
  ~DbRecorder() override;
  DbRecorder(const DbRecorder&) = delete;
  DbRecorder& operator=(const DbRecorder&) = delete;

  // Adds the iteration to its replica's timeline bucket (writing the bucket before when it starts a
  // new one), and writes its iterations row: times in seconds, kv_blocks_total and predicted NULL
  // when -1.
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override;
  // A leap's iterations go through on_iteration one by one (the timeline and iterations rows are
  // those of running them one by one).
  bool accepts_decode_steps() const override { return true; }

  // Writes the requests row: times NULL where the Request's are -1; status 'finished' (kDone with
  // finished >= 0), 'rejected' (with reason) or 'unfinished'.
  void on_request(const Request& r) override;

  // Commits the rows, writes the metrics rows from metrics.compute(), and completes the runs row:
  // status done | interrupted | failed, finished_at, wall_seconds (wall clock since construction)
  // and error (the given error, or the write error if a write failed; a run whose rows could not
  // all be written is marked failed). Later calls do nothing.
  void on_run_end(RunOutcome outcome, const std::string& error) override;

  // Empty unless a write failed; then what failed, with sqlite's message.
  const std::string& write_error() const { return write_error_; }
  // The metrics computed at on_run_end (empty before).
  const std::vector<Metric>& final_metrics() const { return final_metrics_; }

 private:
  // Steps a bound statement and resets it; counts the row and commits every kRowsPerTransaction.
  void write_row(sqlite3_stmt* stmt);
  // Records the first failure and stops writing.
  void fail(const std::string& what);
  void begin();
  void commit();

  static constexpr int64_t kRowsPerTransaction = 50'000;

  Database& db_;
  const int64_t run_id_;
  const MetricsAccumulator& metrics_;
  const std::chrono::steady_clock::time_point started_;
  sqlite3_stmt* insert_request_ = nullptr;
  sqlite3_stmt* insert_iteration_ = nullptr;
  bool in_transaction_ = false;
  bool ended_ = false;
  int64_t rows_in_transaction_ = 0;
  std::string write_error_;
  const LogLevel level_;
  const double resolution_;
  // The timeline bucket in progress, per replica.
  struct Bucket {
    int64_t index = -1;  // -1: none yet
    int64_t iterations = 0, prefill = 0, decode = 0, emitted = 0, preemptions = 0;
    int64_t seqs_max = 0, waiting_max = 0, kv_max = 0, kv_total = -1;
    double busy = 0, kv_weighted = 0;
  };
  std::vector<Bucket> buckets_;
  sqlite3_stmt* insert_timeline_ = nullptr;
  void write_bucket(int32_t replica, const Bucket& b);
  std::vector<Metric> final_metrics_;
};

}  // namespace servesim
