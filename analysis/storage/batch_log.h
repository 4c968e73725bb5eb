// The per-item log of a measured run's batches, so that a cost model can re-price every iteration
// later (`sim validate --hardware`, `sim calibrate`): one `batch_items` row per item of each batch,
//
//   batch_items(run_id, replica, step, item, new_tokens, context_tokens, emits)
//               PRIMARY KEY (run_id, replica, step, item)
//
// where (replica, step) is the iterations row, item the position in the batch, and emits 1 when the
// item sampled a token at the LM head (padding rows compute one too). BatchLog writes it;
// analysis/calibration/logged_batches.h reads it back with the run's measured durations.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analysis/storage/database.h"
#include "sim/recorder.h"
#include "sim/result.h"

namespace servesim {

// Creates the batch_items table when absent (any database Database::open accepts).
Status create_batch_items_table(Database& db);

// The recorder that writes batch_items. It borrows the Database (which must outlive it) and may
// share its connection with a DbRecorder: rows are buffered and written in transactions of about
// 50,000 rows, or inside a transaction already open on the connection, never holding one of its
// own between calls. A failed write stops further writes and is kept in write_error(); it never
// throws and never stops the simulation.
class BatchLog : public Recorder {
 public:
  // REQUIRES: run_id is a runs row of db. Creates the table if absent (a failure: write_error()).
  BatchLog(Database& db, int64_t run_id);
  // Writes what is buffered if on_run_end was never called.
  ~BatchLog() override;
  BatchLog(const BatchLog&) = delete;
  BatchLog& operator=(const BatchLog&) = delete;

  // Buffers one row per item: emits = item.emitted || item.padding.
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override;
  // Writes the buffered rows. Later calls do nothing.
  void on_run_end(RunOutcome outcome, const std::string& error) override;

  const std::string& write_error() const { return write_error_; }

 private:
  struct Row {
    int32_t replica;
    int64_t step;
    int32_t item, new_tokens, context_tokens;
    bool emits;
  };
  void flush();

  static constexpr size_t kRowsPerTransaction = 50'000;

  Database& db_;
  const int64_t run_id_;
  sqlite3_stmt* insert_ = nullptr;
  std::vector<Row> pending_;
  bool ended_ = false;
  std::string write_error_;
};

}  // namespace servesim
