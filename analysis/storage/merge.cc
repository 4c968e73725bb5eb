#include "analysis/storage/merge.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "analysis/storage/batch_log.h"
#include "analysis/storage/database.h"
#include "analysis/storage/sweep_db.h"

namespace servesim {
namespace {

// The tables whose rows name a run (run_id), copied with their run.
constexpr const char* kRunTables[] = {"requests", "iterations", "timeline", "metrics",
                                      "distributions", "transfers", "batch_items"};

std::vector<std::string> columns(Database& db, const std::string& table, const std::string& schema) {
  std::vector<std::string> out;
  sqlite3_stmt* s = nullptr;
  const std::string sql = "SELECT name FROM pragma_table_info(?, ?)";
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return out;
  sqlite3_bind_text(s, 1, table.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 2, schema.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(s) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
  sqlite3_finalize(s);
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The columns of `table` both schemas have, but `skip`: ", a, b" and ", PREFIX.a, PREFIX.b".
std::pair<std::string, std::string> shared_columns(Database& db, const std::string& table, const std::string& prefix,
                                                   const std::vector<std::string>& skip) {
  const std::vector<std::string> src = columns(db, table, "src");
  std::string names, values;
  for (const std::string& c : columns(db, table, "main")) {
    if (contains(skip, c) || !contains(src, c)) continue;
    names += ", " + quote_identifier(c);
    values += ", " + prefix + "." + quote_identifier(c);
  }
  return {names, values};
}

int64_t count(Database& db, const char* sql) {
  sqlite3_stmt* st = nullptr;
  int64_t n = 0;
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return n;
}

// temp.run_map(old, new, fresh, copy): each source run's id in the target. A run the target has
// already maps to that copy (fresh = 0): the same uid, or, for runs written before runs had one, the
// same started_at, host, pid, name and config. The others get new ids after the target's, in the
// source's order (fresh = 1). copy = 1 for the runs whose rows are copied: the fresh ones, and the
// ones the target holds as still running that have ended in the source (a merge taken while a sweep
// ran, merged again once it finished: the run is replaced by its final state under its id).
Status map_runs(Database& db) {
  const std::string uid = contains(columns(db, "runs", "src"), "uid") ? "r.uid" : "NULL";
  const std::string sql =
      "DROP TABLE IF EXISTS temp.run_map; DROP TABLE IF EXISTS temp.known; DROP TABLE IF EXISTS temp.fresh;"
      "CREATE TEMP TABLE run_map(old INTEGER PRIMARY KEY, new INTEGER, fresh INTEGER, copy INTEGER DEFAULT 0);"
      "CREATE TEMP TABLE known AS SELECT id, uid, started_at, host, pid, name, config FROM main.runs;"
      "CREATE INDEX temp.known_started ON known(started_at); CREATE INDEX temp.known_uid ON known(uid);"
      "INSERT INTO run_map(old, new, fresh) SELECT r.id, CASE WHEN " + uid + " IS NOT NULL THEN (SELECT k.id FROM known k WHERE k.uid = " +
      uid + " ORDER BY k.id LIMIT 1) ELSE (SELECT k.id FROM known k WHERE k.uid IS NULL AND k.started_at IS "
      "r.started_at AND k.host IS r.host AND k.pid IS r.pid AND k.name IS r.name AND k.config IS r.config ORDER BY "
      "k.id LIMIT 1) END, 0 FROM src.runs r;"
      "CREATE TEMP TABLE fresh(old INTEGER PRIMARY KEY, k INTEGER);"
      "INSERT INTO fresh SELECT old, row_number() OVER (ORDER BY old) FROM run_map WHERE new IS NULL;"
      "UPDATE run_map SET fresh = 1, new = (SELECT ifnull(max(id), 0) FROM main.runs) + "
      "(SELECT k FROM fresh WHERE fresh.old = run_map.old) WHERE new IS NULL;"
      "UPDATE run_map SET copy = 1 WHERE fresh = 1 OR ((SELECT status FROM main.runs WHERE id = run_map.new) = "
      "'running' AND (SELECT status FROM src.runs WHERE id = run_map.old) IS NOT 'running');";
  return db.exec(sql.c_str());
}

// Copies the runs marked copy and the rows of every table that names them; a run being replaced
// (one that was running when it was merged before) first loses the rows it had.
Status copy_runs(Database& db) {
  for (const char* table : kRunTables) {
    if (columns(db, table, "main").empty()) continue;
    const std::string drop = "DELETE FROM main." + std::string(table) +
                             " WHERE run_id IN (SELECT new FROM temp.run_map WHERE copy = 1 AND fresh = 0);";
    if (Status s = db.exec(drop.c_str()); !s.ok()) return s;
  }
  const auto [names, values] = shared_columns(db, "runs", "r", {"id"});
  const std::string sql = "DELETE FROM main.runs WHERE id IN (SELECT new FROM temp.run_map WHERE copy = 1 AND "
                          "fresh = 0); INSERT INTO main.runs(id" + names + ") SELECT m.new" + values +
                          " FROM src.runs r JOIN temp.run_map m ON m.old = r.id WHERE m.copy = 1 ORDER BY m.new;";
  if (Status s = db.exec(sql.c_str()); !s.ok()) return s;
  for (const char* table : kRunTables) {
    if (columns(db, table, "src").empty()) continue;  // the source has no such table
    if (std::string(table) == "batch_items") {
      if (Status s = create_batch_items_table(db); !s.ok()) return s;
    }
    const auto [cols, vals] = shared_columns(db, table, "t", {"run_id"});
    const std::string copy = "INSERT OR REPLACE INTO main." + std::string(table) + "(run_id" + cols +
                             ") SELECT m.new" + vals + " FROM src." + table +
                             " t JOIN temp.run_map m ON t.run_id = m.old WHERE m.copy = 1;";
    if (Status s = db.exec(copy.c_str()); !s.ok()) return s;
  }
  return Ok{};
}

// The target sweep that source sweep `old_id` joins, or 0 for a new one: the same kind, definition
// and keys, and no point that both have done with different runs.
Result<int64_t> matching_sweep(Database& db, int64_t old_id) {
  sqlite3_stmt* find = nullptr;
  const char* sql =
      "SELECT t.id FROM main.sweeps t JOIN src.sweeps s ON s.id = ?1 WHERE t.kind IS s.kind AND t.spec IS s.spec "
      "AND t.keys IS s.keys AND NOT EXISTS (SELECT 1 FROM src.sweep_points p JOIN main.sweep_points q ON "
      "q.sweep_id = t.id AND q.point = p.point LEFT JOIN temp.run_map m ON m.old = p.run_id WHERE p.sweep_id = ?1 "
      "AND p.status = 'done' AND q.status = 'done' AND q.run_id IS NOT m.new) ORDER BY t.id LIMIT 1";
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &find, nullptr) != SQLITE_OK) return Error{db.error_message()};
  sqlite3_bind_int64(find, 1, old_id);
  int64_t id = 0;
  const int rc = sqlite3_step(find);
  if (rc == SQLITE_ROW) id = sqlite3_column_int64(find, 0);
  sqlite3_finalize(find);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error{db.error_message()};
  return id;
}

// temp.sweep_map(old, new): each source sweep joined to a target sweep, or copied as a new one.
Status map_sweeps(Database& db, int64_t& added) {
  if (Status s = db.exec("DROP TABLE IF EXISTS temp.sweep_map;"
                         "CREATE TEMP TABLE sweep_map(old INTEGER PRIMARY KEY, new INTEGER);");
      !s.ok()) {
    return s;
  }
  std::vector<std::pair<int64_t, std::string>> sweeps;
  {
    sqlite3_stmt* list = nullptr;
    if (sqlite3_prepare_v2(db.handle(), "SELECT id, keys FROM src.sweeps ORDER BY id", -1, &list, nullptr) !=
        SQLITE_OK) {
      return Error{db.error_message()};
    }
    while (sqlite3_step(list) == SQLITE_ROW) {
      const unsigned char* keys = sqlite3_column_text(list, 1);
      sweeps.emplace_back(sqlite3_column_int64(list, 0), keys ? reinterpret_cast<const char*>(keys) : "");
    }
    sqlite3_finalize(list);
  }
  const auto [names, values] = shared_columns(db, "sweeps", "s", {"id"});
  for (const auto& [old_id, keys] : sweeps) {
    if (Status s = add_point_columns(db, split_sweep_keys(keys)); !s.ok()) return s;
    Result<int64_t> target = matching_sweep(db, old_id);
    if (!target.ok()) return target.error();
    const std::string old = std::to_string(old_id);
    std::string sql;
    if (target.value() == 0) {
      sql = "INSERT INTO main.sweeps(" + names.substr(2) + ") SELECT " + values.substr(2) +
            " FROM src.sweeps s WHERE s.id = " + old + "; INSERT INTO temp.sweep_map VALUES (" + old +
            ", last_insert_rowid());";
      ++added;
    } else {
      // Joined with another shard of the grid: the sweep now holds more than either shard.
      const std::string src_shard =
          contains(columns(db, "sweeps", "src"), "shard") ? "(SELECT shard FROM src.sweeps WHERE id = " + old + ")" : "NULL";
      sql = "INSERT INTO temp.sweep_map VALUES (" + old + ", " + std::to_string(target.value()) + ");" +
            "UPDATE main.sweeps SET shard = NULL WHERE id = " + std::to_string(target.value()) + " AND shard IS NOT " +
            src_shard + ";";
    }
    if (Status s = db.exec(sql.c_str()); !s.ok()) return s;
  }
  return Ok{};
}

// Points: renumbered sweep and run; a point already done in the target keeps its row. The fresh
// runs of a sweep name their sweep's new id.
Status copy_points(Database& db) {
  const auto [names, values] = shared_columns(db, "sweep_points", "p", {"sweep_id", "point", "run_id"});
  const bool answer = contains(columns(db, "sweeps", "src"), "answer");
  const std::string sql =
      "INSERT OR REPLACE INTO main.sweep_points(sweep_id, point, run_id" + names + ") SELECT s.new, p.point, m.new" +
      values +
      " FROM src.sweep_points p JOIN temp.sweep_map s ON p.sweep_id = s.old "
      "LEFT JOIN temp.run_map m ON p.run_id = m.old WHERE NOT EXISTS (SELECT 1 FROM "
      "main.sweep_points q WHERE q.sweep_id = s.new AND q.point = p.point AND q.status = 'done');"
      "UPDATE main.runs SET sweep_id = (SELECT new FROM temp.sweep_map WHERE old = runs.sweep_id) "
      "WHERE id IN (SELECT new FROM temp.run_map WHERE copy = 1) AND sweep_id IS NOT NULL;"
      // A sweep the target holds as running that has since ended in the source takes its end.
      "UPDATE main.sweeps SET (status, finished_at" + std::string(answer ? ", answer" : "") +
      ") = (SELECT s.status, s.finished_at" + (answer ? ", s.answer" : "") + " FROM src.sweeps s JOIN "
      "temp.sweep_map m ON m.old = s.id WHERE m.new = sweeps.id ORDER BY s.id LIMIT 1) WHERE status = 'running' "
      "AND id IN (SELECT m.new FROM temp.sweep_map m JOIN src.sweeps s ON s.id = m.old WHERE s.status IS NOT "
      "'running');";
  return db.exec(sql.c_str());
}

struct SourceCounts {
  int64_t runs = 0, known = 0, sweeps = 0, updated = 0, running = 0;
};

// The target ids of the source's runs, in the source's id order (temp.run_map).
std::vector<int64_t> mapped_runs(Database& db) {
  std::vector<int64_t> out;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), "SELECT new FROM temp.run_map ORDER BY old", -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) out.push_back(sqlite3_column_int64(st, 0));
  }
  sqlite3_finalize(st);
  return out;
}

Status merge_one(Database& db, SourceCounts& counts) {
  if (Status s = map_runs(db); !s.ok()) return s;
  counts.runs = count(db, "SELECT count(*) FROM temp.run_map WHERE fresh = 1");
  counts.known = count(db, "SELECT count(*) FROM temp.run_map WHERE fresh = 0 AND copy = 0");
  counts.updated = count(db, "SELECT count(*) FROM temp.run_map WHERE fresh = 0 AND copy = 1");
  counts.running = count(db, "SELECT count(*) FROM src.runs WHERE status = 'running'");
  if (Status s = copy_runs(db); !s.ok()) return s;
  if (columns(db, "sweeps", "src").empty()) return Ok{};
  if (Status s = map_sweeps(db, counts.sweeps); !s.ok()) return s;
  return copy_points(db);
}

// Why the servesim database at `path` cannot be merged from or into ("" when it can): not one, or
// damaged (SQLite's quick check, its first finding only).
std::string unusable(const std::string& path) {
  auto check = Database::open_read_only(path);  // a servesim database, of any schema version
  if (!check.ok()) return check.error().message;
  std::string first;
  sqlite3_stmt* st = nullptr;
  const bool readable = sqlite3_prepare_v2(check.value()->handle(), "PRAGMA quick_check", -1, &st, nullptr) == SQLITE_OK;
  if (readable && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
    first = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  if (readable && first == "ok") return "";
  if (first.empty()) first = check.value()->error_message();
  if (const size_t end = first.find('\n'); end != std::string::npos) first = first.substr(0, end) + " ...";
  return path + " is damaged (" + first + ")";
}

// Refuses what would merge wrongly before anything is written.
Status check_sources(const std::vector<std::string>& sources, const std::string& into) {
  if (sources.empty()) return Error{"nothing to merge: give the databases, then --into FILE"};
  namespace fs = std::filesystem;
  std::error_code ec;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string& s = sources[i];
    if (fs::exists(into, ec) && fs::equivalent(s, into, ec)) {
      return Error{"--into " + into + " is also a source; merge into a new file"};
    }
    for (size_t j = 0; j < i; ++j) {
      if (sources[j] == s || (fs::exists(s, ec) && fs::equivalent(sources[j], s, ec))) {
        return Error{s + " is given twice (as " + sources[j] + " and " + s + "); give each database once"};
      }
    }
    // A damaged source is said before anything is written, by its own name.
    if (std::string why = unusable(s); !why.empty()) {
      return Error{why + (why.find(" is damaged") != std::string::npos
                              ? ": nothing was merged; restore it, or merge the others"
                              : "")};
    }
  }
  if (fs::exists(into, ec)) {
    if (std::string why = unusable(into); !why.empty()) {
      return Error{"--into: " + why + ": nothing was merged; merge into a new file"};
    }
  }
  return Ok{};
}

// The progress handler of a merge: a nonzero return interrupts the statement (and so the source).
extern "C" int stop_requested(void* flag) {
  return static_cast<const std::atomic<bool>*>(flag)->load() ? 1 : 0;
}

}  // namespace

Result<MergeOutcome> merge_databases(const std::vector<std::string>& sources, const std::string& into,
                                     std::ostream& out, const std::atomic<bool>* stop) {
  if (Status s = check_sources(sources, into); !s.ok()) return s.error();
  Result<std::unique_ptr<Database>> opened = Database::open(into);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  if (stop != nullptr) sqlite3_progress_handler(db.handle(), 1000, stop_requested, const_cast<std::atomic<bool>*>(stop));
  MergeOutcome outcome;
  const auto done_before = [&] {
    std::string list;
    for (const std::string& m : outcome.merged) list += (list.empty() ? "" : ", ") + m;
    return list.empty() ? std::string("nothing was merged") : "merged before it: " + list;
  };
  for (const std::string& s : sources) {
    if (stop != nullptr && stop->load()) {
      outcome.interrupted = true;
      break;
    }
    sqlite3_stmt* attach = nullptr;
    sqlite3_prepare_v2(db.handle(), "ATTACH DATABASE ? AS src", -1, &attach, nullptr);
    sqlite3_bind_text(attach, 1, s.c_str(), -1, SQLITE_TRANSIENT);
    const int rc = sqlite3_step(attach);
    sqlite3_finalize(attach);
    if (rc != SQLITE_DONE) return Error{"attaching " + s + ": " + db.error_message()};
    SourceCounts counts;
    std::vector<int64_t> run_ids;
    Status merged = db.exec("BEGIN IMMEDIATE");
    if (merged.ok()) merged = merge_one(db, counts);
    if (merged.ok()) run_ids = mapped_runs(db);
    if (merged.ok()) merged = db.exec("COMMIT");
    const bool stopped = stop != nullptr && stop->load();
    if (!merged.ok()) (void)db.exec("ROLLBACK");
    (void)db.exec("DETACH DATABASE src");
    if (!merged.ok() && stopped) {
      outcome.interrupted = true;
      break;
    }
    if (!merged.ok()) {
      return storage_error(Error{"merging " + s + " failed (nothing of it was written; " + done_before() +
                                 "): " + merged.error().message});
    }
    outcome.merged.push_back(s);
    outcome.run_ids.push_back(std::move(run_ids));
    out << s << ": " << counts.runs << " runs"
        << (counts.known ? " (" + std::to_string(counts.known) + " more already there)" : "")
        << (counts.updated ? ", " + std::to_string(counts.updated) + " that were running now ended" : "")
        << (counts.running ? ", " + std::to_string(counts.running) +
                                 " still running (merge again once they end to take their results)"
                           : "")
        << (counts.sweeps ? ", " + std::to_string(counts.sweeps) + " new sweeps" : "") << " -> " << into << "\n";
  }
  return outcome;
}

}  // namespace servesim
