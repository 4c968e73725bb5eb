#include "analysis/storage/sweep_db.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "analysis/storage/run_status.h"

namespace servesim {
namespace {

struct Statement {
  sqlite3_stmt* s = nullptr;
  ~Statement() { sqlite3_finalize(s); }
};

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ",") + k;
  return out;
}

}  // namespace

std::vector<std::string> split_sweep_keys(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

void bind_text(sqlite3_stmt* s, int i, const std::string& v) {
  if (v.empty()) {
    sqlite3_bind_null(s, i);
  } else {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
}

void bind_node(sqlite3_stmt* s, int i, const toml::node* n) {
  if (n == nullptr) {
    sqlite3_bind_null(s, i);
  } else if (const auto* x = n->as_integer()) {
    sqlite3_bind_int64(s, i, x->get());
  } else if (const auto* f = n->as_floating_point()) {
    sqlite3_bind_double(s, i, f->get());
  } else if (const auto* b = n->as_boolean()) {
    sqlite3_bind_int(s, i, b->get() ? 1 : 0);
  } else if (const auto* t = n->as_string()) {
    sqlite3_bind_text(s, i, t->get().data(), static_cast<int>(t->get().size()), SQLITE_TRANSIENT);
  } else {
    std::ostringstream text;
    n->visit([&](const auto& v) { text << v; });
    const std::string str = text.str();
    sqlite3_bind_text(s, i, str.data(), static_cast<int>(str.size()), SQLITE_TRANSIENT);
  }
}

std::string column_text(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t != nullptr ? reinterpret_cast<const char*>(t) : "";
}

// Steps a write; on a full disk, once more after giving back the room the connection keeps for
// this (analysis/storage/disk_reserve.h): a sweep's point and end are what a resume needs.
Status step_with_room(Database& db, sqlite3_stmt* st) {
  int rc = sqlite3_step(st);
  if ((rc & 0xff) == SQLITE_FULL && db.release_reserve()) {
    sqlite3_reset(st);
    rc = sqlite3_step(st);
  }
  if (rc == SQLITE_DONE) return Ok{};
  const int code = sqlite3_errcode(db.handle()) & 0xff;
  return Error{db.error_message(), code == SQLITE_FULL || code == SQLITE_IOERR};
}

// Whether `table` has `column` (a database of an older schema, read as it is, may not).
bool has_column(Database& db, const char* table, const char* column) {
  Statement st;
  if (sqlite3_prepare_v2(db.handle(), "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", -1, &st.s, nullptr) !=
      SQLITE_OK) {
    return false;
  }
  sqlite3_bind_text(st.s, 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st.s, 2, column, -1, SQLITE_STATIC);
  return sqlite3_step(st.s) == SQLITE_ROW;
}

}  // namespace

std::string quote_identifier(const std::string& key) {
  std::string out = "\"";
  for (char c : key) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

Status add_point_columns(Database& db, const std::vector<std::string>& keys) {
  std::set<std::string> have;
  {
    Statement st;
    if (sqlite3_prepare_v2(db.handle(), "SELECT name FROM pragma_table_info('sweep_points')", -1,
                           &st.s, nullptr) != SQLITE_OK) {
      return Error{db.error_message()};
    }
    while (sqlite3_step(st.s) == SQLITE_ROW) have.insert(column_text(st.s, 0));
  }
  for (const std::string& k : keys) {
    if (have.count(k) != 0) continue;
    const std::string sql = "ALTER TABLE sweep_points ADD COLUMN " + quote_identifier(k) + ";";
    if (Status s = db.exec(sql.c_str()); !s.ok()) {
      // Another process may have added it meanwhile.
      std::set<std::string> again;
      Statement st;
      if (sqlite3_prepare_v2(db.handle(), "SELECT name FROM pragma_table_info('sweep_points')", -1,
                             &st.s, nullptr) == SQLITE_OK) {
        while (sqlite3_step(st.s) == SQLITE_ROW) again.insert(column_text(st.s, 0));
      }
      if (again.count(k) == 0) return s;
    }
    have.insert(k);
  }
  return Ok{};
}

Result<int64_t> begin_sweep(Database& db, const SweepInfo& info) {
  if (Status s = add_point_columns(db, info.keys); !s.ok()) return s.error();
  Statement st;
  static constexpr const char* kSql =
      "INSERT INTO sweeps(name, kind, started_at, status, spec, keys, points, host, pid, shard) "
      "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)";
  if (sqlite3_prepare_v2(db.handle(), kSql, -1, &st.s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  bind_text(st.s, 1, info.name);
  bind_text(st.s, 2, info.kind);
  bind_text(st.s, 3, utc_now_iso8601());
  bind_text(st.s, 4, info.spec);
  bind_text(st.s, 5, join_keys(info.keys));
  sqlite3_bind_int64(st.s, 6, info.points);
  bind_text(st.s, 7, this_host());
  sqlite3_bind_int64(st.s, 8, static_cast<sqlite3_int64>(::getpid()));
  bind_text(st.s, 9, info.shard);
  if (sqlite3_step(st.s) != SQLITE_DONE) return Error{db.error_message()};
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db.handle()));
}

Status record_point(Database& db, int64_t sweep_id, const std::vector<std::string>& keys,
                    const PointRow& row) {
  std::string sql = "INSERT OR REPLACE INTO sweep_points(sweep_id, point, run_id, status, error";
  for (const std::string& k : keys) sql += ", " + quote_identifier(k);
  sql += ") VALUES (?, ?, ?, ?, ?";
  for (size_t i = 0; i < keys.size(); ++i) sql += ", ?";
  sql += ")";
  Statement st;
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  sqlite3_bind_int64(st.s, 1, sweep_id);
  sqlite3_bind_int64(st.s, 2, row.point);
  if (row.run_id > 0) {
    sqlite3_bind_int64(st.s, 3, row.run_id);
  } else {
    sqlite3_bind_null(st.s, 3);
  }
  bind_text(st.s, 4, row.status);
  bind_text(st.s, 5, row.error);
  for (size_t i = 0; i < keys.size(); ++i) {
    bind_node(st.s, static_cast<int>(6 + i), i < row.values.size() ? row.values[i] : nullptr);
  }
  return step_with_room(db, st.s);
}

Status end_sweep(Database& db, int64_t sweep_id, const std::string& status, const std::string& answer) {
  Statement st;
  static constexpr const char* kSql =
      "UPDATE sweeps SET status = ?, finished_at = ?, answer = ? WHERE id = ?";
  if (sqlite3_prepare_v2(db.handle(), kSql, -1, &st.s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  bind_text(st.s, 1, status);
  bind_text(st.s, 2, utc_now_iso8601());
  bind_text(st.s, 3, answer);
  sqlite3_bind_int64(st.s, 4, sweep_id);
  return step_with_room(db, st.s);
}

Result<StoredSweep> read_sweep(Database& db, std::optional<int64_t> id) {
  Statement st;
  const std::string sql =
      "SELECT id, name, kind, status, spec, answer, keys, points, host, pid, started_at, " +
      std::string(has_column(db, "sweeps", "resumed_at") ? "resumed_at, shard" : "NULL, NULL") + " FROM sweeps " +
      std::string(id ? "WHERE id = ?" : "ORDER BY id DESC LIMIT 1");
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  if (id) sqlite3_bind_int64(st.s, 1, *id);
  if (sqlite3_step(st.s) != SQLITE_ROW) {
    std::string ids;
    Statement all;
    if (sqlite3_prepare_v2(db.handle(), "SELECT id FROM sweeps ORDER BY id", -1, &all.s, nullptr) ==
        SQLITE_OK) {
      while (sqlite3_step(all.s) == SQLITE_ROW) ids += (ids.empty() ? "" : ", ") + column_text(all.s, 0);
    }
    if (ids.empty()) return Error{db.path() + " has no sweeps; run `sim sweep` first"};
    return Error{db.path() + " has no sweep " + std::to_string(id.value_or(0)) + " (sweeps: " + ids + ")"};
  }
  StoredSweep s;
  s.id = sqlite3_column_int64(st.s, 0);
  s.name = column_text(st.s, 1);
  s.kind = column_text(st.s, 2);
  s.status = column_text(st.s, 3);
  s.spec = column_text(st.s, 4);
  s.answer = column_text(st.s, 5);
  s.keys = split_sweep_keys(column_text(st.s, 6));
  s.points = sqlite3_column_int64(st.s, 7);
  s.host = column_text(st.s, 8);
  s.pid = sqlite3_column_int64(st.s, 9);
  s.started_at = column_text(st.s, 10);
  s.resumed_at = column_text(st.s, 11);
  s.shard = column_text(st.s, 12);
  return s;
}

namespace {

// The runs of sweep `id` still recorded as running whose process is gone (a full disk, a kill)
// end failed, saying so: the points they stood for are run again.
Status settle_abandoned_runs(Database& db, int64_t id) {
  std::vector<std::pair<int64_t, std::string>> gone;
  {
    Statement st;
    if (sqlite3_prepare_v2(db.handle(),
                           "SELECT id, host, pid, started_at FROM runs WHERE sweep_id = ? AND status = 'running'", -1,
                           &st.s, nullptr) != SQLITE_OK) {
      return Error{db.error_message()};
    }
    sqlite3_bind_int64(st.s, 1, id);
    while (sqlite3_step(st.s) == SQLITE_ROW) {
      const std::string why = abandoned_reason(column_text(st.s, 1), sqlite3_column_int64(st.s, 2), column_text(st.s, 3));
      if (!why.empty()) gone.emplace_back(sqlite3_column_int64(st.s, 0), why);
    }
  }
  for (const auto& [run, why] : gone) {
    Statement st;
    if (sqlite3_prepare_v2(db.handle(), "UPDATE runs SET status = 'failed', error = ? WHERE id = ?", -1, &st.s,
                           nullptr) != SQLITE_OK) {
      return Error{db.error_message()};
    }
    bind_text(st.s, 1, "abandoned: " + why + " before the run ended");
    sqlite3_bind_int64(st.s, 2, run);
    if (Status s = step_with_room(db, st.s); !s.ok()) return s;
  }
  return Ok{};
}

}  // namespace

Status claim_sweep(Database& db, int64_t id) {
  if (Status s = db.exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  const auto claim = [&]() -> Status {
    Result<StoredSweep> stored = read_sweep(db, id);
    if (!stored.ok()) return stored.error();
    const StoredSweep& w = stored.value();
    const std::string since = w.resumed_at.empty() ? w.started_at : w.resumed_at;
    if (w.status == "running" && w.host == this_host() && abandoned_reason(w.host, w.pid, since).empty()) {
      return Error{"sweep " + std::to_string(id) + " is still running: process " + std::to_string(w.pid) +
                   " on " + w.host + " (since " + since + ") runs its points; resume it once that process " +
                   "has ended (stop it with kill -INT " + std::to_string(w.pid) + ")"};
    }
    if (Status s = settle_abandoned_runs(db, id); !s.ok()) return s;
    Statement st;
    static constexpr const char* kSql =
        "UPDATE sweeps SET status = 'running', finished_at = NULL, host = ?, pid = ?, resumed_at = ? WHERE id = ?";
    if (sqlite3_prepare_v2(db.handle(), kSql, -1, &st.s, nullptr) != SQLITE_OK) return Error{db.error_message()};
    bind_text(st.s, 1, this_host());
    sqlite3_bind_int64(st.s, 2, static_cast<sqlite3_int64>(::getpid()));
    bind_text(st.s, 3, utc_now_iso8601());
    sqlite3_bind_int64(st.s, 4, id);
    if (sqlite3_step(st.s) != SQLITE_DONE) return Error{db.error_message()};
    return Ok{};
  };
  Status claimed = claim();
  if (claimed.ok()) claimed = db.exec("COMMIT");
  if (!claimed.ok()) (void)db.exec("ROLLBACK");
  return claimed;
}

Result<std::vector<int64_t>> points_with_status(Database& db, int64_t sweep_id,
                                                const std::vector<std::string>& statuses) {
  Statement st;
  if (sqlite3_prepare_v2(db.handle(), "SELECT point, status FROM sweep_points WHERE sweep_id = ? ORDER BY point",
                         -1, &st.s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  sqlite3_bind_int64(st.s, 1, sweep_id);
  std::vector<int64_t> out;
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    const std::string status = column_text(st.s, 1);
    if (std::find(statuses.begin(), statuses.end(), status) != statuses.end()) {
      out.push_back(sqlite3_column_int64(st.s, 0));
    }
  }
  return out;
}

}  // namespace servesim
