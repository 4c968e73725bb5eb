#include "analysis/storage/database.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <random>
#include <string_view>
#include <vector>

namespace servesim {
namespace {

struct Column {
  std::string_view name;
  std::string_view type;
  int since;  // the schema version that added it (1: the first)
};

struct TableSchema {
  std::string_view name;
  std::vector<Column> columns;
  std::string_view key;  // the PRIMARY KEY clause's columns, "" for none
  int since;             // the schema version that added the table
  bool extensible;       // may have more columns after these (sweep_points: the swept keys)
  bool without_rowid = false;  // stored in its key's order (rows arrive in that order)
};

const std::array<TableSchema, 9>& schema() {
  static const std::array<TableSchema, 9> tables = {{
      {"runs",
       {{"id", "INTEGER PRIMARY KEY", 1}, {"name", "TEXT", 1}, {"started_at", "TEXT", 1},
        {"finished_at", "TEXT", 1}, {"status", "TEXT", 1}, {"policy", "TEXT", 1},
        {"backend", "TEXT", 1}, {"hardware", "TEXT", 1}, {"model", "TEXT", 1},
        {"workload", "TEXT", 1}, {"config", "TEXT", 1}, {"seed", "INTEGER", 1},
        {"version", "TEXT", 1}, {"wall_seconds", "REAL", 1}, {"error", "TEXT", 1},
        {"host", "TEXT", 2}, {"pid", "INTEGER", 2}, {"replicas", "INTEGER", 3},
        {"tp", "INTEGER", 3}, {"gpus", "INTEGER", 3}, {"overloaded", "INTEGER", 3},
        {"sweep_id", "INTEGER", 3}, {"uid", "TEXT", 7}},
       "", 1, false},
      {"requests",
       {{"run_id", "INTEGER", 1}, {"id", "TEXT", 1}, {"replica", "INTEGER", 1},
        {"arrival", "REAL", 1}, {"scheduled", "REAL", 1}, {"first_token", "REAL", 1},
        {"finished", "REAL", 1}, {"prompt_tokens", "INTEGER", 1}, {"output_tokens", "INTEGER", 1},
        {"cached_tokens", "INTEGER", 1}, {"preemptions", "INTEGER", 1}, {"status", "TEXT", 1},
        {"reason", "TEXT", 1}, {"priority", "INTEGER", 2}},
       "run_id, id", 1, false},
      {"iterations",
       {{"run_id", "INTEGER", 1}, {"replica", "INTEGER", 1}, {"step", "INTEGER", 1},
        {"start", "REAL", 1}, {"duration", "REAL", 1}, {"num_seqs", "INTEGER", 1},
        {"prefill_tokens", "INTEGER", 1}, {"decode_tokens", "INTEGER", 1},
        {"kv_blocks_used", "INTEGER", 1}, {"kv_blocks_total", "INTEGER", 1},
        {"predicted", "REAL", 1}},
       "run_id, replica, step", 1, false},
      {"metrics",
       {{"run_id", "INTEGER", 1}, {"name", "TEXT", 1}, {"value", "REAL", 1}},
       "run_id, name", 1, false},
      {"sweeps",
       {{"id", "INTEGER PRIMARY KEY", 3}, {"name", "TEXT", 3}, {"kind", "TEXT", 3},
        {"started_at", "TEXT", 3}, {"finished_at", "TEXT", 3}, {"status", "TEXT", 3},
        {"spec", "TEXT", 3}, {"keys", "TEXT", 3}, {"points", "INTEGER", 3},
        {"answer", "TEXT", 3}, {"host", "TEXT", 3}, {"pid", "INTEGER", 3},
        {"resumed_at", "TEXT", 7}, {"shard", "TEXT", 7}},
       "", 3, false},
      {"sweep_points",
       {{"sweep_id", "INTEGER", 3}, {"point", "INTEGER", 3}, {"run_id", "INTEGER", 3},
        {"status", "TEXT", 3}, {"error", "TEXT", 3}},
       "sweep_id, point", 3, true},
      {"timeline",
       {{"run_id", "INTEGER", 4}, {"replica", "INTEGER", 4}, {"bucket", "INTEGER", 4},
        {"start", "REAL", 4}, {"iterations", "INTEGER", 4}, {"busy", "REAL", 4},
        {"prefill_tokens", "INTEGER", 4}, {"decode_tokens", "INTEGER", 4}, {"emitted", "INTEGER", 4},
        {"seqs_max", "INTEGER", 4}, {"waiting_max", "INTEGER", 4}, {"kv_blocks_mean", "REAL", 4},
        {"kv_blocks_max", "INTEGER", 4}, {"kv_blocks_total", "INTEGER", 4},
        {"preemptions", "INTEGER", 4}},
       "run_id, bucket, replica", 4, false, true},
      {"distributions",
       {{"run_id", "INTEGER", 5}, {"metric", "TEXT", 5}, {"quantile", "REAL", 5}, {"value", "REAL", 5}},
       "run_id, metric, quantile", 5, false, true},
      {"transfers",
       {{"run_id", "INTEGER", 6}, {"request_id", "TEXT", 6}, {"prefill_replica", "INTEGER", 6},
        {"decode_replica", "INTEGER", 6}, {"tokens", "INTEGER", 6}, {"bytes", "REAL", 6},
        {"ready", "REAL", 6}, {"reserved", "REAL", 6}, {"started", "REAL", 6}, {"arrived", "REAL", 6}},
       "run_id, request_id", 6, false},
  }};
  return tables;
}

std::string create_sql(const TableSchema& t) {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + std::string(t.name) + "(";
  for (size_t i = 0; i < t.columns.size(); ++i) {
    sql += (i ? ", " : "") + std::string(t.columns[i].name) + " " + std::string(t.columns[i].type);
  }
  if (!t.key.empty()) sql += ", PRIMARY KEY (" + std::string(t.key) + ")";
  return sql + (t.without_rowid ? ") WITHOUT ROWID;" : ");");
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

Status check_synchronous(const std::string& mode) {
  if (mode == "off" || mode == "normal" || mode == "full") return Ok{};
  return Error{"synchronous: expected off, normal or full, got \"" + mode + "\""};
}

}  // namespace

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

std::string random_uid() {
  // The run's identity across databases, like its start time one of its own, not of its inputs.
  static std::mutex mutex;
  static std::random_device device;
  std::lock_guard<std::mutex> lock(mutex);
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(device()));
  return buf;
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

Result<std::unique_ptr<Database>> Database::open(const std::string& path,
                                                  const std::string& synchronous) {
  if (Status s = check_synchronous(synchronous); !s.ok()) return s.error();
  std::error_code ec;
  // Whether this call creates the file: decided by an exclusive create, so that of several
  // processes opening a new database at once (parallel runs into one file) exactly one owns it.
  bool created = false;
  // ":memory:" is SQLite's database that lives in this connection only (`sim validate
  // --vllm-result` without --db): no file is created.
  const bool in_memory = path == kInMemoryDatabase;
  // A device, a directory or a pipe is no database (SQLite would make PATH-journal beside it).
  if (!in_memory && std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    return Error{path + " is not a regular file (a device, a directory or a pipe): give a file for the database"};
  }
  if (const int fd = in_memory ? -1 : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644); fd >= 0) {
    ::close(fd);
    created = true;
  }
  // A database this call created and could not set up (a full disk, a read-only folder) is removed
  // with the files beside it, so that a failed open leaves nothing behind; but only while nothing
  // was written to it (another process may have taken the new file over meanwhile).
  const auto undo = [&](Error error) -> Result<std::unique_ptr<Database>> {
    const auto size = [&](const std::string& p) {
      return std::filesystem::is_regular_file(p, ec) ? std::filesystem::file_size(p, ec) : 0;
    };
    // A full disk (a storage error) stopped this call's own schema transaction: nothing else was
    // written, whatever the file's size.
    if (created && ((size(path) == 0 && size(path + "-wal") == 0) || error.storage)) {
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        if (std::filesystem::is_regular_file(path + suffix, ec)) std::filesystem::remove(path + suffix, ec);
      }
    }
    return error;
  };
  // Without SQLite's memory statistics, which lock a global mutex around every allocation (and a
  // run's writer thread allocates for every row). Only possible before SQLite initializes: the
  // first open does it, and a later call would be refused, harmlessly.
  static const bool no_memory_statistics = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)no_memory_statistics;
  sqlite3* db = nullptr;
  // No mutex on the connection: one thread at a time uses it (a run's writer thread while the run
  // goes on, the run's own thread before and after; each sweep worker has its own connection), and
  // SQLite's serialized mode would lock and unlock it around every call of every row.
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string message = "cannot open database " + path + ": " + sqlite3_errmsg(db);
    sqlite3_close(db);
    return undo(Error{message});
  }
  std::unique_ptr<Database> out(new Database(db, path));
  sqlite3_busy_timeout(db, 10000);  // other runs (a sweep) may be writing the same file
  // Changing the journal mode takes no busy handler: while another process sets the file up, wait
  // for it here, as the busy timeout would.
  // 16 KiB pages (a new file's; an existing file keeps its own): fewer, fuller B-tree pages for
  // the many small rows of a run. The connection's synchronous first: the switch to WAL (of a file
  // the last writer left in rollback mode) and a new file's schema are transactions too, which at
  // SQLite's default (full) wait for the disk four to six times before the run writes a row.
  const std::string wal = "PRAGMA synchronous=" + synchronous + "; PRAGMA journal_mode=WAL;";
  Status set_up = out->exec(("PRAGMA page_size=16384; " + wal).c_str());
  for (int tries = 0; !set_up.ok() && tries < 1000; ++tries) {
    const int code = sqlite3_errcode(db);
    if (code != SQLITE_BUSY && code != SQLITE_LOCKED) break;
    ::usleep(10'000);
    set_up = out->exec(wal.c_str());
  }
  if (set_up.ok()) set_up = out->check_schema(/*create=*/true);
  if (!set_up.ok()) {
    out.reset();
    return undo(set_up.error());
  }
  if (!in_memory) out->reserve_ = std::make_unique<DiskReserve>(path);
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

Status Database::set_synchronous(const std::string& mode) {
  if (Status s = check_synchronous(mode); !s.ok()) return s;
  return exec(("PRAGMA synchronous=" + mode + ";").c_str());
}

std::string Database::error_message() const {
  if (sqlite3_errcode(db_) == SQLITE_NOTADB) {
    return path_ + " is not an SQLite database (" + sqlite3_errmsg(db_) + "); use another --db";
  }
  return path_ + ": " + sqlite3_errmsg(db_);
}

Status Database::exec(const char* sql) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    // A full disk or a file-size limit is a fault of where the rows go, not of what was asked.
    const int code = sqlite3_errcode(db_) & 0xff;
    return Error{error_message(), code == SQLITE_FULL || code == SQLITE_IOERR};
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
  // Tables and columns added since the file was written are created (writable) or read as absent.
  std::string upgrade;
  bool incomplete = false;
  for (const TableSchema& t : schema()) {
    if (!has(t.name)) {
      if (t.since == 1) incomplete = true;
      upgrade += create_sql(t);
      continue;
    }
    std::vector<std::string> columns;
    if (!query_column(db_, "SELECT name FROM pragma_table_info('" + std::string(t.name) + "')",
                      columns)) {
      return Error{error_message()};
    }
    std::vector<std::string> expected;
    for (const Column& c : t.columns) expected.emplace_back(c.name);
    // The columns present must be the schema's first ones (extensible tables may have more after
    // them); the columns after those must be ones added by a later version.
    const bool shape =
        columns.size() <= expected.size()
            ? std::equal(columns.begin(), columns.end(), expected.begin()) &&
                  (columns.size() == expected.size() || t.columns[columns.size()].since > 1)
            : t.extensible && std::equal(expected.begin(), expected.end(), columns.begin());
    if (!shape) {
      return Error{path_ + ": table " + std::string(t.name) + " has columns (" + join(columns) +
                   "), expected (" + join(expected) +
                   "); it was not written by this version of servesim; use another --db"};
    }
    for (size_t i = columns.size(); i < t.columns.size(); ++i) {
      upgrade += "ALTER TABLE " + std::string(t.name) + " ADD COLUMN " +
                 std::string(t.columns[i].name) + " " + std::string(t.columns[i].type) + ";";
    }
  }
  if (incomplete && !create) {
    return Error{path_ + " is not a complete servesim database; use another --db"};
  }
  if (upgrade.empty() || !create) return Ok{};
  const std::string sql = "BEGIN IMMEDIATE;" + upgrade + "PRAGMA user_version = " +
                          std::to_string(kSchemaVersion) + "; COMMIT;";
  if (Status s = exec(sql.c_str()); !s.ok()) {
    (void)exec("ROLLBACK;");
    return s;
  }
  return Ok{};
}

Result<int64_t> Database::begin_run(const RunInfo& info) {
  static constexpr const char* kSql =
      "INSERT INTO runs(name, started_at, status, policy, backend, hardware, model, workload, "
      "config, seed, version, host, pid, replicas, tp, gpus, sweep_id, uid) "
      "VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
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
  sqlite3_bind_int(stmt, 13, info.replicas);
  sqlite3_bind_int(stmt, 14, info.tp);
  sqlite3_bind_int64(stmt, 15, info.gpus >= 0 ? static_cast<sqlite3_int64>(info.gpus)
                                              : static_cast<sqlite3_int64>(info.replicas) * info.tp);
  if (info.sweep_id > 0) {
    sqlite3_bind_int64(stmt, 16, info.sweep_id);
  } else {
    sqlite3_bind_null(stmt, 16);
  }
  const std::string uid = random_uid();
  bind_text_or_null(stmt, 17, uid);
  if (sqlite3_step(stmt) != SQLITE_DONE) {
    Error error{error_message()};
    sqlite3_finalize(stmt);
    return error;
  }
  sqlite3_finalize(stmt);
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

}  // namespace servesim
