#include "analysis/storage/batch_log.h"

namespace servesim {
namespace {

constexpr const char* kCreate =
    "CREATE TABLE IF NOT EXISTS batch_items(run_id INTEGER, replica INTEGER, step INTEGER, "
    "item INTEGER, new_tokens INTEGER, context_tokens INTEGER, emits INTEGER, "
    "PRIMARY KEY (run_id, replica, step, item))";
constexpr const char* kInsert =
    "INSERT OR REPLACE INTO batch_items(run_id, replica, step, item, new_tokens, context_tokens, "
    "emits) VALUES (?, ?, ?, ?, ?, ?, ?)";

}  // namespace

Status create_batch_items_table(Database& db) { return db.exec(kCreate); }

BatchLog::BatchLog(Database& db, int64_t run_id) : db_(db), run_id_(run_id) {
  if (Status s = create_batch_items_table(db_); !s.ok()) {
    write_error_ = "creating batch_items in " + s.error().message;
  } else if (sqlite3_prepare_v2(db_.handle(), kInsert, -1, &insert_, nullptr) != SQLITE_OK) {
    write_error_ = "preparing batch_items inserts in " + db_.error_message();
  }
  pending_.reserve(1024);
}

BatchLog::~BatchLog() {
  flush();
  sqlite3_finalize(insert_);
}

void BatchLog::on_iteration(const IterationRecord& it, std::span<const BatchItem> items) {
  if (!write_error_.empty()) return;
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& b = items[i];
    pending_.push_back({it.replica, it.step, static_cast<int32_t>(i), b.new_tokens,
                        b.context_tokens, b.emitted || b.padding});
  }
  if (pending_.size() >= kRowsPerTransaction) flush();
}

void BatchLog::on_run_end(RunOutcome /*outcome*/, const std::string& /*error*/) {
  if (ended_) return;
  ended_ = true;
  flush();
}

void BatchLog::flush() {
  if (pending_.empty() || !write_error_.empty()) {
    pending_.clear();
    return;
  }
  // A transaction already open on the shared connection (a DbRecorder's) takes the rows and is
  // committed by its owner; otherwise one of our own, closed before returning, so that the other
  // writer's BEGIN never meets ours.
  const bool own = sqlite3_get_autocommit(db_.handle()) != 0;
  if (own && !db_.exec("BEGIN IMMEDIATE").ok()) {
    write_error_ = "writing batch_items to " + db_.error_message();
    pending_.clear();
    return;
  }
  for (const Row& r : pending_) {
    sqlite3_bind_int64(insert_, 1, run_id_);
    sqlite3_bind_int(insert_, 2, r.replica);
    sqlite3_bind_int64(insert_, 3, r.step);
    sqlite3_bind_int(insert_, 4, r.item);
    sqlite3_bind_int(insert_, 5, r.new_tokens);
    sqlite3_bind_int(insert_, 6, r.context_tokens);
    sqlite3_bind_int(insert_, 7, r.emits ? 1 : 0);
    const int rc = sqlite3_step(insert_);
    sqlite3_reset(insert_);
    if (rc != SQLITE_DONE) {
      write_error_ = "writing batch_items to " + db_.error_message();
      break;
    }
  }
  pending_.clear();
  if (own && !db_.exec("COMMIT").ok()) {
    if (write_error_.empty()) write_error_ = "writing batch_items to " + db_.error_message();
    (void)db_.exec("ROLLBACK");
  }
}

}  // namespace servesim
