// The rows that a run's recorder (analysis/storage/db_recorder.h) stores in the requests, iterations,
// timeline and transfers tables, and how they go in: each table has a row source
// (analysis/storage/row_source.h) that shows SQLite a batch of rows, and one prepared statement,
// INSERT ... SELECT ?1 (the run's id), * FROM that source, stores the whole batch. Times are in
// seconds, NULL where they did not happen (-1) or lie beyond the horizon; counts are NULL where
// unknown or unlimited (-1).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "analysis/storage/row_source.h"
#include "analysis/storage/timeline_buckets.h"
#include "sim/recorder.h"
#include "sim/time.h"

namespace servesim {

class RunRows {
 public:
  // A requests row, as the request was when it settled.
  struct RequestRow {
    std::string id;
    int32_t replica;
    Time arrival, scheduled, first_token, finished;
    int32_t prompt_tokens, output_tokens, cached_tokens, preemptions, priority;
    const char* status;  // finished | rejected | unfinished
    std::string reason;  // "": NULL
  };

  // A transfers row (disaggregated serving).
  struct TransferRow {
    std::string request_id;
    int32_t prefill_replica, decode_replica;
    int64_t tokens;
    double bytes;
    Time ready, reserved, started, arrived;
  };

  // A timeline row: (replica, its bucket).
  using TimelineRow = std::pair<int32_t, TimelineBucket>;

  enum Table { kRequests, kIterations, kTimeline, kTransfers };
  static constexpr int kTables = 4;

  // resolution: the timeline's bucket width in seconds (a bucket's start is its index times it).
  explicit RunRows(double resolution)
      : requests_(request_values), iterations_(iteration_values), timeline_(TimelineValues{resolution}),
        transfers_(transfer_values) {}
  ~RunRows();
  RunRows(const RunRows&) = delete;
  RunRows& operator=(const RunRows&) = delete;

  // The timeline's bucket width, before prepare().
  void set_resolution(double resolution) {
    timeline_ = SpanRowSource<TimelineRow, TimelineValues>(TimelineValues{resolution});
  }

  // Adds the row sources to `db` and prepares the statements. Error: which failed; sqlite3_errmsg
  // says why. The destructor finalizes them and removes the sources: `db` must outlive this.
  Status prepare(sqlite3* db);

  // What each table's source shows (until shown another batch). The rows must stay put while
  // insert(table) runs.
  void show(std::span<const RequestRow> rows) { requests_.show(rows); }
  void show(std::span<const IterationRecord> rows) { iterations_.show(rows); }
  void show(std::span<const TimelineRow> rows) { timeline_.show(rows); }
  void show(std::span<const TransferRow> rows) { transfers_.show(rows); }
  // Shows no rows of any table (before the rows shown go away).
  void show_none() {
    requests_.show({});
    iterations_.show({});
    timeline_.show({});
    transfers_.show({});
  }
  // How many rows the table's source shows now.
  size_t shown(Table table) const { return source(table).size(); }
  // The statement that stores them (?1: the run's id). A row that cannot go in stops it, and the
  // rows before it stay (OR FAIL), as they would inserted one by one; a timeline row replaces one
  // of the same replica and bucket.
  sqlite3_stmt* insert(Table table) const { return insert_[table]; }
  static const char* name(Table table);

 private:
  struct TimelineValues {
    double resolution;
    void operator()(sqlite3_context* c, const TimelineRow& row, int column) const;
  };
  static void request_values(sqlite3_context* c, const RequestRow& r, int column);
  static void iteration_values(sqlite3_context* c, const IterationRecord& it, int column);
  static void transfer_values(sqlite3_context* c, const TransferRow& t, int column);
  template <typename Row>
  using Rows = SpanRowSource<Row, void (*)(sqlite3_context*, const Row&, int)>;
  const RowSource& source(Table table) const;

  Rows<RequestRow> requests_;
  Rows<IterationRecord> iterations_;
  SpanRowSource<TimelineRow, TimelineValues> timeline_;
  Rows<TransferRow> transfers_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_[kTables] = {};
};

}  // namespace servesim
