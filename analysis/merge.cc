#include "analysis/merge.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "analysis/batch_log.h"
#include "analysis/database.h"
#include "analysis/sweep_db.h"

namespace servesim {
namespace {

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

// Copies the rows of `table` whose run is mapped, renumbering run_id.
Status copy_run_rows(Database& db, const std::string& table) {
  const std::vector<std::string> src = columns(db, table, "src");
  if (src.empty()) return Ok{};  // the source has no such table
  if (table == "batch_items") {
    if (Status s = create_batch_items_table(db); !s.ok()) return s;
  }
  const std::vector<std::string> dst = columns(db, table, "main");
  std::string names = "run_id", values = "m.new";
  for (const std::string& c : dst) {
    if (c == "run_id" || !contains(src, c)) continue;
    names += ", " + quote_identifier(c);
    values += ", t." + quote_identifier(c);
  }
  const std::string sql = "INSERT OR REPLACE INTO main." + table + "(" + names + ") SELECT " + values +
                          " FROM src." + table + " t JOIN temp.run_map m ON t.run_id = m.old;";
  return db.exec(sql.c_str());
}

Status merge_one(Database& db, int64_t& runs, int64_t& sweeps) {
  if (Status s = db.exec("DROP TABLE IF EXISTS temp.run_map; DROP TABLE IF EXISTS temp.sweep_map;"
                         "CREATE TEMP TABLE run_map(old INTEGER PRIMARY KEY, new INTEGER);"
                         "CREATE TEMP TABLE sweep_map(old INTEGER PRIMARY KEY, new INTEGER);");
      !s.ok()) {
    return s;
  }
  // Runs: new ids after the target's, in the source's order.
  const std::vector<std::string> src_runs = columns(db, "runs", "src");
  std::string names, values;
  for (const std::string& c : columns(db, "runs", "main")) {
    if (c == "id" || !contains(src_runs, c)) continue;
    names += ", " + quote_identifier(c);
    values += ", r." + quote_identifier(c);
  }
  std::string sql =
      "INSERT INTO temp.run_map(old, new) SELECT id, (SELECT ifnull(max(id), 0) FROM main.runs) + "
      "row_number() OVER (ORDER BY id) FROM src.runs;"
      "INSERT INTO main.runs(id" + names + ") SELECT m.new" + values +
      " FROM src.runs r JOIN temp.run_map m ON m.old = r.id ORDER BY m.new;";
  if (Status s = db.exec(sql.c_str()); !s.ok()) return s;
  for (const char* table : {"requests", "iterations", "timeline", "metrics", "distributions", "batch_items"}) {
    if (Status s = copy_run_rows(db, table); !s.ok()) return s;
  }
  runs = sqlite3_changes(db.handle());
  {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db.handle(), "SELECT count(*) FROM temp.run_map", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      runs = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  // Sweeps: the same definition is the same sweep.
  if (columns(db, "sweeps", "src").empty()) return Ok{};
  sqlite3_stmt* list = nullptr;
  if (sqlite3_prepare_v2(db.handle(), "SELECT id, kind, spec, keys FROM src.sweeps ORDER BY id", -1, &list,
                         nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  Status status = Ok{};
  while (status.ok() && sqlite3_step(list) == SQLITE_ROW) {
    const int64_t old_id = sqlite3_column_int64(list, 0);
    auto text = [&](int i) {
      const unsigned char* t = sqlite3_column_text(list, i);
      return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
    };
    const std::string kind = text(1), spec = text(2);
    const std::vector<std::string> keys = split_sweep_keys(text(3));
    if (Status s = add_point_columns(db, keys); !s.ok()) {
      status = s;
      break;
    }
    int64_t new_id = 0;
    sqlite3_stmt* find = nullptr;
    sqlite3_prepare_v2(db.handle(), "SELECT id FROM main.sweeps WHERE kind IS ? AND spec IS ? ORDER BY id LIMIT 1",
                       -1, &find, nullptr);
    sqlite3_bind_text(find, 1, kind.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(find, 2, spec.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(find) == SQLITE_ROW) new_id = sqlite3_column_int64(find, 0);
    sqlite3_finalize(find);
    std::string map_sql;
    if (new_id == 0) {
      map_sql = "INSERT INTO main.sweeps(name, kind, started_at, finished_at, status, spec, keys, points, "
                "answer, host, pid) SELECT name, kind, started_at, finished_at, status, spec, keys, points, "
                "answer, host, pid FROM src.sweeps WHERE id = " + std::to_string(old_id) + ";"
                "INSERT INTO temp.sweep_map VALUES (" + std::to_string(old_id) + ", last_insert_rowid());";
      ++sweeps;
    } else {
      map_sql = "INSERT INTO temp.sweep_map VALUES (" + std::to_string(old_id) + ", " + std::to_string(new_id) + ");";
    }
    if (Status s = db.exec(map_sql.c_str()); !s.ok()) {
      status = s;
      break;
    }
  }
  sqlite3_finalize(list);
  if (!status.ok()) return status;
  // Points: renumbered sweep and run; a point already done in the target keeps its row.
  const std::vector<std::string> src_points = columns(db, "sweep_points", "src");
  std::string pnames = "sweep_id, point, run_id", pvalues = "s.new, p.point, m.new";
  for (const std::string& c : columns(db, "sweep_points", "main")) {
    if (c == "sweep_id" || c == "point" || c == "run_id" || !contains(src_points, c)) continue;
    pnames += ", " + quote_identifier(c);
    pvalues += ", p." + quote_identifier(c);
  }
  sql = "INSERT OR REPLACE INTO main.sweep_points(" + pnames + ") SELECT " + pvalues +
        " FROM src.sweep_points p JOIN temp.sweep_map s ON p.sweep_id = s.old "
        "LEFT JOIN temp.run_map m ON p.run_id = m.old WHERE NOT EXISTS (SELECT 1 FROM "
        "main.sweep_points q WHERE q.sweep_id = s.new AND q.point = p.point AND q.status = 'done');"
        "UPDATE main.runs SET sweep_id = (SELECT new FROM temp.sweep_map WHERE old = runs.sweep_id) "
        "WHERE id IN (SELECT new FROM temp.run_map) AND sweep_id IS NOT NULL;";
  return db.exec(sql.c_str());
}

}  // namespace

Status merge_databases(const std::vector<std::string>& sources, const std::string& into,
                       std::ostream& out) {
  if (sources.empty()) return Error{"nothing to merge: give the databases, then --into FILE"};
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const std::string& s : sources) {
    if (fs::exists(into, ec) && fs::equivalent(s, into, ec)) {
      return Error{"--into " + into + " is also a source; merge into a new file"};
    }
    auto check = Database::open_read_only(s);  // a servesim database, of any schema version
    if (!check.ok()) return check.error();
  }
  Result<std::unique_ptr<Database>> opened = Database::open(into);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  for (const std::string& s : sources) {
    sqlite3_stmt* attach = nullptr;
    sqlite3_prepare_v2(db.handle(), "ATTACH DATABASE ? AS src", -1, &attach, nullptr);
    sqlite3_bind_text(attach, 1, s.c_str(), -1, SQLITE_TRANSIENT);
    const int rc = sqlite3_step(attach);
    sqlite3_finalize(attach);
    if (rc != SQLITE_DONE) return Error{"attaching " + s + ": " + db.error_message()};
    int64_t runs = 0, sweeps = 0;
    Status merged = db.exec("BEGIN IMMEDIATE");
    if (merged.ok()) merged = merge_one(db, runs, sweeps);
    if (merged.ok()) {
      merged = db.exec("COMMIT");
    } else {
      (void)db.exec("ROLLBACK");
    }
    (void)db.exec("DETACH DATABASE src");
    if (!merged.ok()) return Error{"merging " + s + ": " + merged.error().message};
    out << s << ": " << runs << " runs" << (sweeps ? ", " + std::to_string(sweeps) + " new sweeps" : "")
        << " -> " << into << "\n";
  }
  return Ok{};
}

}  // namespace servesim
