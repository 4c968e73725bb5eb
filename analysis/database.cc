#include "analysis/database.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <vector>

namespace servesim {
namespace {

struct TableSchema {
  std::string_view name;
  std::vector<std::string_view> columns;
  std::string_view create;
};

const std::array<TableSchema, 4>& schema() {
  static const std::array<TableSchema, 4> tables = {{
      {"runs",
       {"id", "name", "started_at", "finished_at", "status", "policy", "backend", "hardware",
        "model", "workload", "config", "seed", "version", "wall_seconds", "error", "host", "pid"},
       "CREATE TABLE IF NOT EXISTS runs(id INTEGER PRIMARY KEY, name TEXT, started_at TEXT, "
       "finished_at TEXT, status TEXT, policy TEXT, backend TEXT, hardware TEXT, model TEXT, "
       "workload TEXT, config TEXT, seed INTEGER, version TEXT, wall_seconds REAL, error TEXT, "
       "host TEXT, pid INTEGER);"},
      {"requests",
       {"run_id", "id", "replica", "arrival", "scheduled", "first_token", "finished",
        "prompt_tokens", "output_tokens", "cached_tokens", "preemptions", "status", "reason",
        "priority"},
       "CREATE TABLE IF NOT EXISTS requests(run_id INTEGER, id TEXT, replica INTEGER, "
       "arrival REAL, scheduled REAL, first_token REAL, finished REAL, prompt_tokens INTEGER, "
       "output_tokens INTEGER, cached_tokens INTEGER, preemptions INTEGER, status TEXT, "
       "reason TEXT, priority INTEGER, PRIMARY KEY (run_id, id));"},
      {"iterations",
       {"run_id", "replica", "step", "start", "duration", "num_seqs", "prefill_tokens",
        "decode_tokens", "kv_blocks_used", "kv_blocks_total", "predicted"},
       "CREATE TABLE IF NOT EXISTS iterations(run_id INTEGER, replica INTEGER, step INTEGER, "
       "start REAL, duration REAL, num_seqs INTEGER, prefill_tokens INTEGER, "
       "decode_tokens INTEGER, kv_blocks_used INTEGER, kv_blocks_total INTEGER, predicted REAL, "
       "PRIMARY KEY (run_id, replica, step));"},
      {"metrics",
       {"run_id", "name", "value"},
       "CREATE TABLE IF NOT EXISTS metrics(run_id INTEGER, name TEXT, value REAL, "
       "PRIMARY KEY (run_id, name));"},
  }};
  return tables;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// Every value of the first column of a parameterless query; false on error.
bool query_column(sqlite3* db, const std::string& sql, std::vector<std::string>& out) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) return false;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    out.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
  }
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE;
}

void bind_text_or_null(sqlite3_stmt* stmt, int index, const std::string& s) {
  if (s.empty()) {
    sqlite3_bind_null(stmt, index);
  } else {
    sqlite3_bind_text(stmt, index, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
}

// `path` for a file: URI (percent-encoding the characters a URI reserves).
std::string uri_path(const std::string& path) {
  std::string out;
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#' || static_cast<unsigned char>(c) < 0x20) {
      static const char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[static_cast<unsigned char>(c) >> 4];
      out += kHex[static_cast<unsigned char>(c) & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

std::string utc_now_iso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms.count()));
  return buf;
}

Result<std::unique_ptr<Database>> Database::open(const std::string& path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  // A database this call created and could not set up (a full disk, a read-only folder) is removed
  // with the files beside it, so that a failed open leaves nothing behind.
  const auto undo = [&](Error error) -> Result<std::unique_ptr<Database>> {
    if (!existed) {
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        if (std::filesystem::is_regular_file(path + suffix, ec)) std::filesystem::remove(path + suffix, ec);
      }
    }
    return error;
  };
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string message = "cannot open database " + path + ": " + sqlite3_errmsg(db);
    sqlite3_close(db);
    return undo(Error{message});
  }
  std::unique_ptr<Database> out(new Database(db, path));
  sqlite3_busy_timeout(db, 10000);  // other runs (a sweep) may be writing the same file
  Status set_up = out->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  if (set_up.ok()) set_up = out->check_schema(/*create=*/true);
  if (!set_up.ok()) {
    out.reset();
    return undo(set_up.error());
  }
  return out;
}

Result<std::unique_ptr<Database>> Database::open_read_only(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Error{"no database at " + path + "; run `sim --trace ...` first"};
  }
  // Read-only, and if that cannot start (a database left in WAL mode in a folder or file system
  // this user cannot write: SQLite cannot create its -shm file), as an immutable file, which needs
  // no lock and no file beside it.
  Error first{""};
  for (const bool immutable : {false, true}) {
    sqlite3* db = nullptr;
    const std::string name = immutable ? "file:" + uri_path(path) + "?immutable=1" : path;
    const int flags = SQLITE_OPEN_READONLY | (immutable ? SQLITE_OPEN_URI : 0);
    if (sqlite3_open_v2(name.c_str(), &db, flags, nullptr) != SQLITE_OK) {
      if (first.message.empty()) first = Error{"cannot open database " + path + ": " + sqlite3_errmsg(db)};
      sqlite3_close(db);
      continue;
    }
    std::unique_ptr<Database> out(new Database(db, path, /*read_only=*/true));
    sqlite3_busy_timeout(db, 10000);
    if (Status s = out->check_schema(/*create=*/false); !s.ok()) {
      if (first.message.empty()) first = s.error();
      const int code = sqlite3_errcode(db);
      if (code != SQLITE_CANTOPEN && code != SQLITE_READONLY && code != SQLITE_IOERR) return first;
      continue;  // try again as immutable
    }
    return out;
  }
  return first;
}

Database::~Database() {
  // Leave the file in rollback-journal mode when this is its last writer, so that a reader on a
  // read-only mount or folder can open it with no -wal or -shm file; with other writers still on it
  // the switch fails quietly and the last of them makes it.
  if (!read_only_) {
    sqlite3_busy_timeout(db_, 0);  // never wait for other writers here
    (void)exec("PRAGMA journal_mode=DELETE;");
  }
  sqlite3_close_v2(db_);
}

std::string Database::error_message() const {
  if (sqlite3_errcode(db_) == SQLITE_NOTADB) {
    return path_ + " is not an SQLite database (" + sqlite3_errmsg(db_) + "); use another --db";
  }
  return path_ + ": " + sqlite3_errmsg(db_);
}

Status Database::exec(const char* sql) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error{error_message()};
  }
  return Ok{};
}

Status Database::check_schema(bool create) {
  std::vector<std::string> version;
  if (!query_column(db_, "PRAGMA user_version", version)) return Error{error_message()};
  if (!version.empty() && std::stoi(version[0]) > kSchemaVersion) {
    return Error{path_ + " was written by a newer servesim (schema version " + version[0] +
                 "; this one knows " + std::to_string(kSchemaVersion) + "); use another --db"};
  }
  std::vector<std::string> tables;
  if (!query_column(db_, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
                    tables)) {
    return Error{error_message()};
  }
  auto has = [&](std::string_view t) {
    return std::find(tables.begin(), tables.end(), t) != tables.end();
  };
  if (!has("runs") && (!tables.empty() || !create)) {
    return Error{
        path_ + " is not a servesim database (" +
        (tables.empty() ? std::string("it has no tables") : "its tables: " + join(tables)) +
        "); use another --db"};
  }
  bool missing = false;
  bool upgrade = false;
  for (const TableSchema& t : schema()) {
    if (!has(t.name)) {
      missing = true;
      continue;
    }
    std::vector<std::string> columns;
    if (!query_column(db_, "SELECT name FROM pragma_table_info('" + std::string(t.name) + "')",
                      columns)) {
      return Error{error_message()};
    }
    std::vector<std::string> expected(t.columns.begin(), t.columns.end());
    // Schema version 1 lacks the columns added since (they come last): readable as it is,
    // upgraded in place to be written to.
    const size_t added = t.name == "requests" ? 1 : t.name == "runs" ? 2 : 0;
    if (added > 0 && columns.size() + added == expected.size() &&
        std::equal(columns.begin(), columns.end(), expected.begin())) {
      if (!create) continue;
      upgrade = true;
      continue;
    }
    if (columns != expected) {
      return Error{path_ + ": table " + std::string(t.name) + " has columns (" + join(columns) +
                   "), expected (" + join(expected) +
                   "); it was not written by this version of servesim; use another --db"};
    }
  }
  if (upgrade) {
    if (Status s = exec("BEGIN IMMEDIATE; ALTER TABLE requests ADD COLUMN priority INTEGER; "
                        "ALTER TABLE runs ADD COLUMN host TEXT; ALTER TABLE runs ADD COLUMN pid "
                        "INTEGER; PRAGMA user_version = 2; COMMIT;");
        !s.ok()) {
      (void)exec("ROLLBACK;");
      return s;
    }
    return Ok{};
  }
  if (!missing) return Ok{};
  if (!create) return Error{path_ + " is not a complete servesim database; use another --db"};
  std::string sql = "BEGIN IMMEDIATE;";
  for (const TableSchema& t : schema()) sql += t.create;
  sql += "PRAGMA user_version = " + std::to_string(kSchemaVersion) + "; COMMIT;";
  if (Status s = exec(sql.c_str()); !s.ok()) {
    (void)exec("ROLLBACK;");
    return s;
  }
  return Ok{};
}

Result<int64_t> Database::begin_run(const RunInfo& info) {
  static constexpr const char* kSql =
      "INSERT INTO runs(name, started_at, status, policy, backend, hardware, model, workload, "
      "config, seed, version, host, pid) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, kSql, -1, &stmt, nullptr) != SQLITE_OK) {
    return Error{error_message()};
  }
  const std::string started = utc_now_iso8601();
  bind_text_or_null(stmt, 1, info.name);
  bind_text_or_null(stmt, 2, started);
  bind_text_or_null(stmt, 3, info.policy);
  bind_text_or_null(stmt, 4, info.backend);
  bind_text_or_null(stmt, 5, info.hardware);
  bind_text_or_null(stmt, 6, info.model);
  bind_text_or_null(stmt, 7, info.workload);
  bind_text_or_null(stmt, 8, info.config_toml);
  sqlite3_bind_int64(stmt, 9, static_cast<sqlite3_int64>(info.seed));
  bind_text_or_null(stmt, 10, info.version);
  bind_text_or_null(stmt, 11, info.host);
  if (info.pid > 0) {
    sqlite3_bind_int64(stmt, 12, info.pid);
  } else {
    sqlite3_bind_null(stmt, 12);
  }
  if (sqlite3_step(stmt) != SQLITE_DONE) {
    Error error{error_message()};
    sqlite3_finalize(stmt);
    return error;
  }
  sqlite3_finalize(stmt);
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

}  // namespace servesim
