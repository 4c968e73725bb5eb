// The recorder that writes a run into the database: one requests row per settled request, one
// iterations row per iteration, and at the end the run's metrics rows and its final status.
//
// DbRecorder borrows the Database and the MetricsAccumulator (both must outlive it) and owns its
// prepared statements. Rows are written in transactions of about 50,000 rows, so a run of a million
// requests takes seconds, not minutes; what was written before an interruption is committed at the
// end. A failed write (disk full...) stops further writes and is kept in write_error(); it never
// throws and never stops the simulation.
//
// In the background (the default), the rows are gathered in chunks and a writer thread inserts
// them while the simulation goes on; on_run_end waits for it, then writes the metrics and the
// status on the caller's thread. The connection is then the writer's until on_run_end: nothing
// else may use it meanwhile (a BatchLog on the same connection needs background = false).
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <span>
#include <string>
#include <vector>

#include "analysis/storage/database.h"
#include "analysis/metrics/metrics.h"
#include "analysis/storage/run_rows.h"
#include "analysis/storage/timeline_buckets.h"
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
             LogLevel level = LogLevel::kIterations, double resolution = 1.0, bool background = true);
  // The database and the run's row, given later: `open` is called once, on the thread that first
  // writes, before anything is written (waiting there meanwhile), and gives them; or nullopt, and
  // then nothing is ever written: the run is not to be recorded (its workload turned out bad, say).
  // In the background.
  //
  // resolution: the timeline's bucket width when it became known with the run's row (> 0; 0: the
  // one given to the constructor), a whole multiple of the constructor's: the simulation's buckets,
  // of the constructor's width, are then merged into it before they are written
  // (TimelineCoarsener), which gives the rows that bucketing at that width from the start gives.
  struct Opened {
    Database* db;
    int64_t run_id;
    double resolution = 0;
  };
  DbRecorder(std::function<std::optional<Opened>()> open, const MetricsAccumulator& metrics, LogLevel level,
             double resolution);
  // Commits what is pending if on_run_end was never called (the run row stays 'running').
  ~DbRecorder() override;
  DbRecorder(const DbRecorder&) = delete;
  DbRecorder& operator=(const DbRecorder&) = delete;

  // Adds the iteration to its replica's timeline bucket (writing the bucket before when it starts a
  // new one), and writes its iterations row: times in seconds, kv_blocks_total and predicted NULL
  // when -1.
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override;
  // A leap's iterations, as on_iteration would take them one by one (the same timeline and
  // iterations rows).
  bool accepts_grouped_decodes() const override { return true; }
  void on_decode_steps(const DecodeSteps& steps) override;

  // Writes the requests row: times NULL where the Request's are -1; status 'finished' (kDone with
  // finished >= 0), 'rejected' (with reason) or 'unfinished'.
  void on_request(const Request& r) override;
  // Writes the transfers row (log level requests or iterations).
  void on_transfer(const TransferRecord& t) override;

  // Commits the rows, writes the metrics rows from metrics.compute(), and completes the runs row:
  // status done | interrupted | failed, finished_at, wall_seconds (wall clock since construction)
  // and error (the given error, or the write error if a write failed; a run whose rows could not
  // all be written is marked failed). Later calls do nothing.
  void on_run_end(RunOutcome outcome, const std::string& error) override;

  // A split run's groups of replicas (sim/sharded.h) each gather their rows on their own thread;
  // the writer takes the groups' chunks in turn, a chunk from each, so that the rows go in in the
  // same order every run. In the background only.
  bool can_shard() const override { return background_; }
  std::unique_ptr<Recorder> shard() override;

  // Empty unless a write failed; then what failed, with sqlite's message. (Complete once
  // on_run_end returned.)
  const std::string& write_error() const { return write_error_; }
  // The metrics computed at on_run_end (empty before).
  const std::vector<Metric>& final_metrics() const { return final_metrics_; }

 private:
  // Records the first failure and stops writing.
  void fail(const std::string& what);
  // Ends a transaction a failed write left open (resetting the connection's statements first).
  void end_failed_transaction();
  // Whether there is a database to write to, calling open_ the first time.
  bool open();
  void begin();
  void commit();

  static constexpr int64_t kRowsPerTransaction = 50'000;
  static constexpr size_t kRowsPerChunk = 8192;
  static constexpr size_t kChunksAhead = 4;

  struct Chunk;
  struct Source;
  // The stages of on_run_end: the last timeline rows, the metrics rows, the run's status (with
  // the write error, if any, beside `error`).
  void store_last_timeline(Source& own);
  void store_metrics(const std::vector<QuantilePoint>& quantiles);
  void write_status(const std::string& status, const std::string& error);
  class Shard;
  // What the recorder callbacks gather, into a source: this recorder's own or a shard's.
  void add_iteration(Source& s, const IterationRecord& it);
  void add_decode_steps(Source& s, const DecodeSteps& steps);
  void add_request(Source& s, const Request& r);
  void add_transfer(Source& s, const TransferRecord& t);
  void write_chunk(Chunk& chunk);  // on the writer thread (or the caller's, without one)
  void hand_over(Source& s);       // gives its chunk to the writer, waiting while it is busy
  // Hands over its last chunk, with its timeline's buckets in progress when `last_buckets`;
  // then it gives no more.
  void close(Source& s, bool last_buckets);
  void drain();                    // writes everything gathered and stops the writer
  void writer_loop();
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // Stores the rows that rows_ shows of `table`, by one statement; counts them and commits every
  // kRowsPerTransaction. A failure is the run's write error.
  void store(RunRows::Table table);
  Database* db_ = nullptr;  // nullptr until open_ gave it
  int64_t run_id_ = -1;
  std::function<std::optional<Opened>()> open_;
  bool unrecorded_ = false;  // open_ gave nothing: nothing is written
  const MetricsAccumulator& metrics_;
  const std::chrono::steady_clock::time_point started_;
  bool in_transaction_ = false;
  bool ended_ = false;
  int64_t rows_in_transaction_ = 0;
  std::string write_error_;
  const LogLevel level_;
  const double resolution_;                   // the constructor's
  std::optional<TimelineCoarsener> coarsen_;  // Opened::resolution's, the writer's
  std::atomic<double> announced_{0};          // Opened::resolution, when the buckets are merged
  RunRows rows_;  // each table's rows go in by one statement per chunk
  std::vector<Metric> final_metrics_;

  // Rows waiting to be written, in the order they came.
  struct Chunk {
    std::vector<RunRows::RequestRow> requests;
    TimelineBuckets::Completed timeline;
    std::vector<IterationRecord> iterations;
    std::vector<RunRows::TransferRow> transfers;
    bool wide = false;  // the timeline rows are of Opened::resolution (else of the constructor's)
    size_t size() const { return requests.size() + timeline.size() + iterations.size() + transfers.size(); }
    void clear() {
      requests.clear();
      timeline.clear();
      iterations.clear();
      transfers.clear();
    }
  };
  // A simulation thread's rows.
  struct Source {
    explicit Source(double resolution) : timeline(resolution) {}
    Chunk chunk;  // gathering
    // The timeline's buckets: of the constructor's resolution, until the writer announces
    // Opened::resolution (wide) at a chunk's hand-over. The writer merges the rows of the first
    // (a chunk's `wide` says which it holds) and of the buckets then in progress.
    TimelineBuckets timeline;
    bool wide = false;
    // Given to the writer, oldest first (under mutex_): at most kChunksAhead wait, so the
    // simulation goes on while the writer catches up with a burst of rows.
    std::deque<Chunk> handed;
    bool closed = false;  // gives no more (under mutex_)
  };
  const bool background_;
  std::atomic<bool> failed_{false};
  // [0]: this recorder's own (closed once it made shards); then its shards', in their order.
  std::vector<std::unique_ptr<Source>> sources_;
  std::vector<Chunk> spare_;  // written and cleared, their buffers kept for the next chunks
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread writer_;
};

}  // namespace servesim
