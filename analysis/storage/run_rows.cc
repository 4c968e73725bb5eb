#include "analysis/storage/run_rows.h"

namespace servesim {
namespace {

// Each table's columns after run_id, in the order its values are numbered, and how its rows go in.
struct TableRows {
  const char* name;
  const char* columns;
  const char* insert;
};
constexpr TableRows kTableRows[RunRows::kTables] = {
    {"requests",
     "id, replica, arrival, scheduled, first_token, finished, prompt_tokens, output_tokens, "
     "cached_tokens, preemptions, status, reason, priority",
     "INSERT OR FAIL INTO "},
    {"iterations",
     "replica, step, start, duration, num_seqs, prefill_tokens, decode_tokens, kv_blocks_used, "
     "kv_blocks_total, predicted",
     "INSERT OR FAIL INTO "},
    {"timeline",
     "replica, bucket, start, iterations, busy, prefill_tokens, decode_tokens, emitted, seqs_max, "
     "waiting_max, kv_blocks_mean, kv_blocks_max, kv_blocks_total, preemptions",
     "INSERT OR REPLACE INTO "},
    {"transfers",
     "request_id, prefill_replica, decode_replica, tokens, bytes, ready, reserved, started, arrived",
     "INSERT OR FAIL INTO "},
};

// The name of a table's row source: the table SQLite reads the rows from.
std::string source_name(RunRows::Table table) {
  return std::string("servesim_rows_") + kTableRows[table].name;
}

// A time in seconds, or NULL for -1 (not happened) and kNever (beyond the horizon).
void result_time(sqlite3_context* c, Time t) {
  if (t < 0 || t == kNever) {
    sqlite3_result_null(c);
  } else {
    sqlite3_result_double(c, to_seconds(t));
  }
}

// A count, or NULL for -1 (unlimited, unknown).
void result_count(sqlite3_context* c, int64_t n) {
  if (n < 0) {
    sqlite3_result_null(c);
  } else {
    sqlite3_result_int64(c, n);
  }
}

void result_text(sqlite3_context* c, const std::string& s) {
  sqlite3_result_text(c, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

}  // namespace

RunRows::~RunRows() {
  if (db_ == nullptr) return;
  for (int t = 0; t < kTables; ++t) {
    sqlite3_finalize(insert_[t]);
    remove_row_source(db_, source_name(static_cast<Table>(t)));
  }
}

Status RunRows::prepare(sqlite3* db) {
  db_ = db;
  for (int t = 0; t < kTables; ++t) {
    const auto table = static_cast<Table>(t);
    const TableRows& rows = kTableRows[t];
    if (Status s = add_row_source(db, source_name(table), rows.columns, &source(table)); !s.ok()) return s;
    const std::string sql = std::string(rows.insert) + rows.name + "(run_id, " + rows.columns +
                            ") SELECT ?1, * FROM " + source_name(table);
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &insert_[t], nullptr) != SQLITE_OK) {
      return Error{std::string("preparing the insert into ") + rows.name};
    }
  }
  return Ok{};
}

const char* RunRows::name(Table table) { return kTableRows[table].name; }

const RowSource& RunRows::source(Table table) const {
  switch (table) {
    case kRequests: return requests_;
    case kIterations: return iterations_;
    case kTimeline: return timeline_;
    case kTransfers: break;
  }
  return transfers_;
}

void RunRows::request_values(sqlite3_context* c, const RequestRow& r, int column) {
  switch (column) {
    case 0: return result_text(c, r.id);
    case 1: return result_count(c, r.replica);
    case 2: return result_time(c, r.arrival);
    case 3: return result_time(c, r.scheduled);
    case 4: return result_time(c, r.first_token);
    case 5: return result_time(c, r.finished);
    case 6: return sqlite3_result_int(c, r.prompt_tokens);
    case 7: return sqlite3_result_int(c, r.output_tokens);
    case 8: return sqlite3_result_int(c, r.cached_tokens);
    case 9: return sqlite3_result_int(c, r.preemptions);
    case 10: return sqlite3_result_text(c, r.status, -1, SQLITE_STATIC);
    case 11: return r.reason.empty() ? sqlite3_result_null(c) : result_text(c, r.reason);
    default: return sqlite3_result_int(c, r.priority);
  }
}

void RunRows::iteration_values(sqlite3_context* c, const IterationRecord& it, int column) {
  switch (column) {
    case 0: return sqlite3_result_int(c, it.replica);
    case 1: return sqlite3_result_int64(c, it.step);
    case 2: return sqlite3_result_double(c, to_seconds(it.start));
    case 3: return sqlite3_result_double(c, to_seconds(it.duration));
    case 4: return sqlite3_result_int(c, it.num_seqs);
    case 5: return sqlite3_result_int64(c, it.prefill_tokens);
    case 6: return sqlite3_result_int64(c, it.decode_tokens);
    case 7: return sqlite3_result_int64(c, it.kv_blocks_used);
    case 8: return result_count(c, it.kv_blocks_total);
    default: return result_time(c, it.predicted);
  }
}

void RunRows::TimelineValues::operator()(sqlite3_context* c, const TimelineRow& row, int column) const {
  const auto& [replica, b] = row;
  switch (column) {
    case 0: return sqlite3_result_int(c, replica);
    case 1: return sqlite3_result_int64(c, b.index);
    case 2: return sqlite3_result_double(c, static_cast<double>(b.index) * resolution);  // start
    case 3: return sqlite3_result_int64(c, b.iterations);
    case 4: return sqlite3_result_double(c, to_seconds(b.busy));
    case 5: return sqlite3_result_int64(c, b.prefill);
    case 6: return sqlite3_result_int64(c, b.decode);
    case 7: return sqlite3_result_int64(c, b.emitted);
    case 8: return sqlite3_result_int64(c, b.seqs_max);
    case 9: return sqlite3_result_int64(c, b.waiting_max);
    case 10: return sqlite3_result_double(c, b.kv_mean());
    case 11: return sqlite3_result_int64(c, b.kv_max);
    case 12: return result_count(c, b.kv_total);
    default: return sqlite3_result_int64(c, b.preemptions);
  }
}

void RunRows::transfer_values(sqlite3_context* c, const TransferRow& t, int column) {
  switch (column) {
    case 0: return result_text(c, t.request_id);
    case 1: return sqlite3_result_int(c, t.prefill_replica);
    case 2: return sqlite3_result_int(c, t.decode_replica);
    case 3: return sqlite3_result_int64(c, t.tokens);
    case 4: return sqlite3_result_double(c, t.bytes);
    case 5: return result_time(c, t.ready);
    case 6: return result_time(c, t.reserved);
    case 7: return result_time(c, t.started);
    default: return result_time(c, t.arrived);
  }
}

}  // namespace servesim
