#include "analysis/storage/db_recorder.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>
#include <vector>

namespace servesim {
namespace {

constexpr const char* kInsertMetric =
    "INSERT OR REPLACE INTO metrics(run_id, name, value) VALUES (?, ?, ?)";
constexpr const char* kInsertQuantile =
    "INSERT OR REPLACE INTO distributions(run_id, metric, quantile, value) VALUES (?, ?, ?, ?)";
constexpr const char* kEndRun =
    "UPDATE runs SET status = ?, finished_at = ?, wall_seconds = ?, error = ?, overloaded = ?, "
    "gpus = ? WHERE id = ?";

void bind_text(sqlite3_stmt* stmt, int index, const std::string& s) {
  sqlite3_bind_text(stmt, index, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

void bind_text_or_null(sqlite3_stmt* stmt, int index, const std::string& s) {
  if (s.empty()) {
    sqlite3_bind_null(stmt, index);
  } else {
    bind_text(stmt, index, s);
  }
}

const char* status_name(const Request& r) {
  if (r.status == RequestStatus::kDone && r.finished >= 0) return "finished";
  if (r.status == RequestStatus::kRejected) return "rejected";
  return "unfinished";
}

// The timeline table's key order, (bucket, replica) within a run. A replica's bucket completes when
// its next iteration starts, so buckets complete out of that order (an idle replica's late). Sorted
// within each chunk, they go in near the end of the table's B-tree, which SQLite inserts far more
// cheaply than rows landing between stored ones: eight replicas' writer ran 10 % fewer
// instructions (bench/replay_100k.py's chunked-prefill case, with the database on).
void in_key_order(TimelineBuckets::Completed& rows) {
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.index != b.second.index ? a.second.index < b.second.index : a.first < b.first;
  });
}

const char* outcome_name(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kDone: return "done";
    case RunOutcome::kInterrupted: return "interrupted";
    case RunOutcome::kFailed: return "failed";
  }
  return "failed";
}

}  // namespace

LogLevel parse_log_level(const std::string& name) {
  if (name == "summary") return LogLevel::kSummary;
  if (name == "requests") return LogLevel::kRequests;
  return LogLevel::kIterations;
}

DbRecorder::DbRecorder(Database& db, int64_t run_id, const MetricsAccumulator& metrics,
                       LogLevel level, double resolution, bool background)
    : db_(&db), run_id_(run_id), metrics_(metrics), started_(std::chrono::steady_clock::now()),
      level_(level), resolution_(resolution > 0 ? resolution : 1.0), rows_(resolution_),
      background_(background) {
  sources_.push_back(std::make_unique<Source>(resolution_));
  if (!rows_.prepare(db_->handle()).ok()) fail("preparing inserts");
}

DbRecorder::DbRecorder(std::function<std::optional<Opened>()> open, const MetricsAccumulator& metrics,
                       LogLevel level, double resolution)
    : open_(std::move(open)), metrics_(metrics), started_(std::chrono::steady_clock::now()), level_(level),
      resolution_(resolution > 0 ? resolution : 1.0), rows_(resolution_), background_(true) {
  sources_.push_back(std::make_unique<Source>(resolution_));
}

bool DbRecorder::open() {
  if (db_ != nullptr) return true;
  if (unrecorded_) return false;
  const std::optional<Opened> opened = open_();
  if (!opened) {
    unrecorded_ = true;
    failed_.store(true, std::memory_order_relaxed);  // the simulation gathers no more rows
    return false;
  }
  db_ = opened->db;
  run_id_ = opened->run_id;
  if (opened->resolution > 0 && opened->resolution != resolution_) {
    const double factor = std::round(opened->resolution / resolution_);
    assert(factor >= 1 && std::abs(factor * resolution_ - opened->resolution) <= 1e-9 * opened->resolution);
    coarsen_.emplace(static_cast<int64_t>(factor));
    rows_.set_resolution(opened->resolution);
    announced_.store(opened->resolution, std::memory_order_release);  // for the simulation's thread
  }
  if (!rows_.prepare(db_->handle()).ok()) fail("preparing inserts");
  return true;
}

DbRecorder::~DbRecorder() {
  drain();
  if (in_transaction_) commit();
}

void DbRecorder::fail(const std::string& what) {
  if (write_error_.empty()) write_error_ = "writing " + what + " to " + db_->error_message();
  failed_.store(true, std::memory_order_relaxed);
  in_transaction_ = false;
  end_failed_transaction();
}

void DbRecorder::end_failed_transaction() {
  sqlite3* h = db_->handle();
  // A statement that failed holds its transaction until it is reset.
  for (sqlite3_stmt* s = sqlite3_next_stmt(h, nullptr); s != nullptr; s = sqlite3_next_stmt(h, s)) sqlite3_reset(s);
  if (sqlite3_get_autocommit(h)) return;
  // Keep the rows written before the failure if the database still takes them. SQLite keeps a
  // transaction whose COMMIT failed (a full disk) open: it is rolled back, so that the run's
  // status is then written on its own (into the room the rolled-back pages leave in the log).
  if (!db_->exec("COMMIT").ok() || !sqlite3_get_autocommit(h)) (void)db_->exec("ROLLBACK");
}

void DbRecorder::begin() {
  if (in_transaction_ || !write_error_.empty() || !open()) return;
  if (!db_->exec("BEGIN IMMEDIATE").ok()) return fail("rows");
  in_transaction_ = true;
  rows_in_transaction_ = 0;
}

void DbRecorder::commit() {
  if (!in_transaction_) return;
  in_transaction_ = false;
  if (!db_->exec("COMMIT").ok()) {
    fail("rows");
    (void)db_->exec("ROLLBACK");
  }
}

void DbRecorder::store(RunRows::Table table) {
  const size_t rows = rows_.shown(table);
  if (rows == 0) return;
  begin();
  if (!in_transaction_) return;  // a write failed, or nothing is recorded
  sqlite3_stmt* insert = rows_.insert(table);
  sqlite3_bind_int64(insert, 1, run_id_);
  if (sqlite3_step(insert) != SQLITE_DONE) fail(RunRows::name(table));
  sqlite3_reset(insert);
  rows_in_transaction_ += static_cast<int64_t>(rows);
  if (write_error_.empty() && rows_in_transaction_ >= kRowsPerTransaction) {
    commit();
    // Copies what was just committed from the write-ahead log into the database file now, on the
    // writer's thread, rather than all of it when the database closes, after the run.
    (void)sqlite3_wal_checkpoint_v2(db_->handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }
}

// A shard's callbacks gather into a source of the recorder that made it.
class DbRecorder::Shard final : public Recorder {
 public:
  Shard(DbRecorder& parent, Source& source) : parent_(parent), source_(source) {}
  bool accepts_grouped_decodes() const override { return true; }
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> /*items*/) override {
    parent_.add_iteration(source_, it);
  }
  void on_decode_steps(const DecodeSteps& steps) override {
    if (parent_.level_ >= LogLevel::kIterations) return Recorder::on_decode_steps(steps);  // a row each
    parent_.add_decode_steps(source_, steps);
  }
  void on_request(const Request& r) override { parent_.add_request(source_, r); }
  void on_transfer(const TransferRecord& t) override { parent_.add_transfer(source_, t); }
  void on_run_end(RunOutcome /*outcome*/, const std::string& /*error*/) override {
    parent_.close(source_, /*last_buckets=*/true);
  }

 private:
  DbRecorder& parent_;
  Source& source_;
};

std::unique_ptr<Recorder> DbRecorder::shard() {
  assert(background_ && sources_.front()->chunk.size() == 0);
  std::lock_guard<std::mutex> lock(mutex_);
  sources_.front()->closed = true;  // the shards gather everything
  sources_.push_back(std::make_unique<Source>(resolution_));
  return std::make_unique<Shard>(*this, *sources_.back());
}

void DbRecorder::on_iteration(const IterationRecord& it, std::span<const BatchItem> /*items*/) {
  add_iteration(*sources_.front(), it);
}

void DbRecorder::on_decode_steps(const DecodeSteps& steps) {
  if (level_ >= LogLevel::kIterations) return Recorder::on_decode_steps(steps);  // a row each
  add_decode_steps(*sources_.front(), steps);
}

void DbRecorder::on_request(const Request& r) { add_request(*sources_.front(), r); }

void DbRecorder::on_transfer(const TransferRecord& t) { add_transfer(*sources_.front(), t); }

void DbRecorder::add_iteration(Source& s, const IterationRecord& it) {
  if (failed() || level_ < LogLevel::kRequests) return;
  s.timeline.add_iteration(it, s.chunk.timeline);
  if (level_ >= LogLevel::kIterations) s.chunk.iterations.push_back(it);
  if (s.chunk.size() >= kRowsPerChunk) hand_over(s);
}

void DbRecorder::add_decode_steps(Source& s, const DecodeSteps& steps) {
  if (failed() || level_ < LogLevel::kRequests) return;
  s.timeline.add_decode_steps(steps, s.chunk.timeline);
  if (s.chunk.size() >= kRowsPerChunk) hand_over(s);
}

void DbRecorder::add_request(Source& s, const Request& r) {
  if (failed() || level_ < LogLevel::kRequests) return;
  s.chunk.requests.push_back(RunRows::RequestRow{
      r.spec ? r.spec->id : default_request_id(r.index), r.replica, r.arrival, r.scheduled,
      r.first_token, r.finished, r.prompt_tokens, r.num_output, r.cached_tokens, r.preemptions,
      r.priority, status_name(r), r.reason});
  if (s.chunk.size() >= kRowsPerChunk) hand_over(s);
}

void DbRecorder::add_transfer(Source& s, const TransferRecord& t) {
  if (failed() || level_ < LogLevel::kRequests) return;
  const Request& r = *t.request;
  s.chunk.transfers.push_back(RunRows::TransferRow{r.spec ? r.spec->id : default_request_id(r.index),
                                                   t.prefill_replica, t.decode_replica, t.tokens, t.bytes,
                                                   t.ready, t.reserved, t.start, t.end});
  if (s.chunk.size() >= kRowsPerChunk) hand_over(s);
}

void DbRecorder::write_chunk(Chunk& chunk) {
  // Within a chunk, tables one after the other: the order of rows across tables means nothing.
  // The database first: it tells the timeline's resolution.
  if (!open()) {
    chunk.clear();
    return;
  }
  if (coarsen_) coarsen_->add(chunk.timeline, chunk.wide);
  in_key_order(chunk.timeline);
  rows_.show(std::span<const RunRows::RequestRow>(chunk.requests));
  rows_.show(std::span<const IterationRecord>(chunk.iterations));
  rows_.show(std::span<const RunRows::TimelineRow>(chunk.timeline));
  rows_.show(std::span<const RunRows::TransferRow>(chunk.transfers));
  for (int t = 0; t < RunRows::kTables; ++t) store(static_cast<RunRows::Table>(t));
  rows_.show_none();
  chunk.clear();
}

void DbRecorder::hand_over(Source& s) {
  if (!background_) {
    write_chunk(s.chunk);
    return;
  }
  if (!s.wide) {
    // Once the writer knows the timeline's resolution, the simulation's thread buckets by it: the
    // buckets in progress close with this chunk (the writer merges them with what follows).
    if (const double resolution = announced_.load(std::memory_order_acquire); resolution > 0) {
      s.timeline.finish(s.chunk.timeline);
      s.timeline = TimelineBuckets(resolution);
      s.wide = true;
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
  // A split run's groups share the backlog: the writer's work left at the end stays as short.
  const size_t givers = std::max<size_t>(1, sources_.size() - 1);
  const size_t ahead = std::max<size_t>(1, kChunksAhead / givers);
  changed_.wait(lock, [&s, ahead] { return s.handed.size() < ahead; });
  s.handed.push_back(std::move(s.chunk));
  s.chunk = spare_.empty() ? Chunk{} : std::move(spare_.back());  // a written chunk's buffers, back
  if (!spare_.empty()) spare_.pop_back();
  s.chunk.wide = s.wide;
  changed_.notify_all();
}

void DbRecorder::close(Source& s, bool last_buckets) {
  if (last_buckets && !failed() && level_ >= LogLevel::kRequests) s.timeline.finish(s.chunk.timeline);
  if (s.chunk.size() > 0) hand_over(s);
  std::lock_guard<std::mutex> lock(mutex_);
  s.closed = true;
  changed_.notify_all();
}

void DbRecorder::writer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  size_t turn = 0;  // the source whose chunk goes next: each in turn, for the same order every run
  while (true) {
    Source* next = nullptr;
    changed_.wait(lock, [&] {
      for (size_t tried = 0; tried < sources_.size(); ++tried, turn = (turn + 1) % sources_.size()) {
        Source& s = *sources_[turn];
        if (!s.handed.empty()) {
          next = &s;
          return true;
        }
        if (!s.closed) return false;  // its next chunk is to come
      }
      return true;  // every source closed, and everything written
    });
    if (next == nullptr) return;
    turn = (turn + 1) % sources_.size();
    Chunk chunk = std::move(next->handed.front());
    next->handed.pop_front();
    changed_.notify_all();
    lock.unlock();
    write_chunk(chunk);
    lock.lock();
    spare_.push_back(std::move(chunk));
  }
}

void DbRecorder::drain() {
  Source& own = *sources_.front();
  if (!own.closed) {
    if (own.chunk.size() > 0) hand_over(own);
    std::lock_guard<std::mutex> lock(mutex_);
    own.closed = true;
    changed_.notify_all();
  }
  if (writer_.joinable()) writer_.join();  // once every source is closed and written
}

void DbRecorder::on_run_end(RunOutcome outcome, const std::string& error) {
  if (ended_) return;
  ended_ = true;
  // The metrics rows and the final status go in one transaction with the last rows, so a reader
  // never sees a finished run without its metrics. The metrics are computed while the writer
  // writes the last rows.
  Source& own = *sources_.front();
  if (!own.closed && own.chunk.size() > 0) hand_over(own);
  std::vector<QuantilePoint> quantiles;
  final_metrics_ = metrics_.compute(&quantiles);
  drain();
  if (!open()) return;  // not recorded
  store_last_timeline(own);
  if (write_error_.empty()) {
    begin();
    store_metrics(quantiles);
  }
  if (!write_error_.empty()) {
    end_failed_transaction();
    write_status("failed", error);
    return;
  }
  write_status(outcome_name(outcome), error);
  commit();
  // The last transaction (rows, metrics, status) did not go in: the status, failed, on its own.
  if (!write_error_.empty()) write_status("failed", error);
}

void DbRecorder::store_last_timeline(Source& own) {
  TimelineBuckets::Completed last;
  own.timeline.finish(last);  // (a split run's shards wrote theirs)
  if (coarsen_) {
    coarsen_->add(last, own.wide);
    coarsen_->finish(last);
  }
  in_key_order(last);
  rows_.show(std::span<const RunRows::TimelineRow>(last));
  store(RunRows::kTimeline);
  rows_.show_none();
}

void DbRecorder::store_metrics(const std::vector<QuantilePoint>& quantiles) {
  // Each row through one prepared statement; the first failure stops the table and is reported.
  const auto insert_all = [&](const char* sql, const char* table, const auto& rows, const auto& bind) {
    sqlite3_stmt* s = nullptr;
    if (!write_error_.empty()) return;
    if (sqlite3_prepare_v2(db_->handle(), sql, -1, &s, nullptr) != SQLITE_OK) return fail(table);
    for (const auto& row : rows) {
      sqlite3_bind_int64(s, 1, run_id_);
      bind(s, row);
      if (sqlite3_step(s) != SQLITE_DONE) {
        fail(table);
        break;
      }
      sqlite3_reset(s);
    }
    sqlite3_finalize(s);
  };
  insert_all(kInsertMetric, "metrics", final_metrics_, [](sqlite3_stmt* s, const Metric& m) {
    bind_text(s, 2, m.name);
    sqlite3_bind_double(s, 3, m.value);
  });
  insert_all(kInsertQuantile, "distributions", quantiles, [](sqlite3_stmt* s, const QuantilePoint& q) {
    bind_text(s, 2, q.metric);
    sqlite3_bind_double(s, 3, q.quantile);
    sqlite3_bind_double(s, 4, q.value);
  });
}

void DbRecorder::write_status(const std::string& status, const std::string& error) {
  const bool failed = !write_error_.empty();
  if (failed) final_metrics_.clear();  // the run failed: no metrics
  const std::string message = !failed ? error : error.empty() ? write_error_ : error + "; " + write_error_;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const std::string finished_at = utc_now_iso8601();
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_->handle(), kEndRun, -1, &s, nullptr) != SQLITE_OK) return fail("the run's status");
  bind_text(s, 1, status);
  bind_text(s, 2, finished_at);
  sqlite3_bind_double(s, 3, wall);
  bind_text_or_null(s, 4, message);
  sqlite3_bind_null(s, 5);
  sqlite3_bind_null(s, 6);
  for (const Metric& m : final_metrics_) {
    if (m.name == "overloaded") sqlite3_bind_int(s, 5, m.value > 0 ? 1 : 0);
    if (m.name == "gpus") sqlite3_bind_int64(s, 6, static_cast<sqlite3_int64>(m.value));
  }
  sqlite3_bind_int64(s, 7, run_id_);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_FULL && db_->release_reserve()) {  // the room kept for this (analysis/storage/disk_reserve.h)
    sqlite3_reset(s);
    rc = sqlite3_step(s);
  }
  if (rc != SQLITE_DONE) fail("the run's status");
  sqlite3_finalize(s);
}

}  // namespace servesim
