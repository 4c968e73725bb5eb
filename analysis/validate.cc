#include "analysis/validate.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "analysis/database.h"
#include "analysis/metrics.h"

namespace servesim {
namespace {

struct Group {
  std::vector<double> errors;  // |predicted - measured| / measured
  double measured = 0, predicted = 0;
};

const char* size_bucket(int64_t seqs) {
  if (seqs <= 1) return "1";
  if (seqs <= 4) return "2-4";
  if (seqs <= 16) return "5-16";
  if (seqs <= 64) return "17-64";
  return "65+";
}

struct Summary {
  double mape, p50, p90;
};

Summary summarise(std::vector<double> e) {
  std::sort(e.begin(), e.end());
  double sum = 0;
  for (double x : e) sum += x;
  return {sum / static_cast<double>(e.size()), percentile(e, 50), percentile(e, 90)};
}

}  // namespace

Status validate_run(const std::string& db_path, std::optional<int64_t> run_id, std::ostream& out) {
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  sqlite3* db = opened.value()->handle();
  int64_t run = 0;
  {
    sqlite3_stmt* st = nullptr;
    const char* sql = run_id ? "SELECT id FROM runs WHERE id = ?1" : "SELECT max(id) FROM runs";
    sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
    if (run_id) sqlite3_bind_int64(st, 1, *run_id);
    const bool found = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL;
    if (found) run = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (!found) {
      return Error{run_id ? "no run " + std::to_string(*run_id) + " in " + db_path
                          : "no runs in " + db_path + "; run `sim --backend cpu ...` first"};
    }
  }
  std::map<std::string, Group> by_kind, by_size;
  Group all;
  {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT duration, predicted, num_seqs, prefill_tokens, decode_tokens FROM "
                       "iterations WHERE run_id = ?1 AND predicted IS NOT NULL AND duration > 0",
                       -1, &st, nullptr);
    sqlite3_bind_int64(st, 1, run);
    while (sqlite3_step(st) == SQLITE_ROW) {
      const double measured = sqlite3_column_double(st, 0);
      const double predicted = sqlite3_column_double(st, 1);
      const int64_t seqs = sqlite3_column_int64(st, 2);
      const int64_t prefill = sqlite3_column_int64(st, 3), decode = sqlite3_column_int64(st, 4);
      const double err = std::fabs(predicted - measured) / measured;
      const char* kind = decode == 0 ? "prefill-only" : prefill == 0 ? "decode-only" : "mixed";
      for (Group* g : {&all, &by_kind[kind], &by_size[size_bucket(seqs)]}) {
        g->errors.push_back(err);
        g->measured += measured;
        g->predicted += predicted;
      }
    }
    sqlite3_finalize(st);
  }
  if (all.errors.empty()) {
    return Error{"run " + std::to_string(run) + " has no predictions beside measured durations: "
                 "validate runs of a measuring backend (--backend cpu or cuda)"};
  }

  char line[160];
  out << "Prediction error of run " << run << " (" << db_path << "): |predicted - measured| / measured\n";
  std::snprintf(line, sizeof line, "%-16s %10s %8s %8s %8s %14s %14s\n", "iterations", "count",
                "MAPE", "p50", "p90", "measured (s)", "predicted (s)");
  out << line;
  auto row = [&](const std::string& name, const Group& g) {
    const Summary s = summarise(g.errors);
    std::snprintf(line, sizeof line, "%-16s %10zu %7.1f%% %7.1f%% %7.1f%% %14.4f %14.4f\n",
                  name.c_str(), g.errors.size(), 100 * s.mape, 100 * s.p50, 100 * s.p90,
                  g.measured, g.predicted);
    out << line;
  };
  row("all", all);
  for (const auto& [k, g] : by_kind) row(k, g);
  for (const char* b : {"1", "2-4", "5-16", "17-64", "65+"}) {
    if (by_size.count(b) != 0) row(std::string("batch ") + b, by_size[b]);
  }

  // The summary as metrics rows of the run (read-write now).
  Result<std::unique_ptr<Database>> rw = Database::open(db_path);
  if (!rw.ok()) return rw.error();
  sqlite3* w = rw.value()->handle();
  sqlite3_stmt* ins = nullptr;
  sqlite3_prepare_v2(w, "INSERT OR REPLACE INTO metrics (run_id, name, value) VALUES (?1, ?2, ?3)", -1,
                     &ins, nullptr);
  auto put = [&](const std::string& name, double v) {
    sqlite3_bind_int64(ins, 1, run);
    sqlite3_bind_text(ins, 2, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(ins, 3, v);
    sqlite3_step(ins);
    sqlite3_reset(ins);
  };
  const Summary s = summarise(all.errors);
  put("validate_mape", s.mape);
  put("validate_p50", s.p50);
  put("validate_p90", s.p90);
  for (const auto& [k, g] : by_kind) {
    std::string name = k.substr(0, k.find('-'));  // prefill, decode, mixed
    put("validate_" + name + "_mape", summarise(g.errors).mape);
  }
  sqlite3_finalize(ins);
  return Ok{};
}

}  // namespace servesim
