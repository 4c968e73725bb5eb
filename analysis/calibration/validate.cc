#include "analysis/calibration/validate.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "analysis/calibration/logged_batches.h"
#include "analysis/storage/batch_log.h"
#include "analysis/storage/database.h"
#include "analysis/metrics/metrics.h"

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

// The prediction errors: of every iteration, by kind (prefill-only, decode-only, mixed), by batch size.
struct Errors {
  Group all;
  std::map<std::string, Group> by_kind, by_size;
};

// Each logged iteration's error, priced again by `roofline` when given.
Errors prediction_errors(const std::vector<LoggedIteration>& logged, const std::optional<RooflineModel>& roofline) {
  Errors e;
  for (const LoggedIteration& it : logged) {
    double predicted = it.predicted;
    if (roofline) {
      if (it.items.empty()) continue;
      predicted = roofline->price(it.items.data(), it.items.size()).total();
    }
    if (predicted < 0) continue;
    const double measured = it.measured;
    const double err = std::fabs(predicted - measured) / measured;
    const char* kind = it.decode_tokens == 0  ? "prefill-only"
                       : it.prefill_tokens == 0 ? "decode-only"
                                                : "mixed";
    for (Group* g : {&e.all, &e.by_kind[kind], &e.by_size[size_bucket(it.num_seqs)]}) {
      g->errors.push_back(err);
      g->measured += measured;
      g->predicted += predicted;
    }
  }
  return e;
}

// A cell that keeps its column however large the value (a wildly wrong prediction): fixed
// decimals while they fit the width, else as many significant digits (3 to 1) as fit.
std::string error_cell(double v, int width, int decimals, const char* suffix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v, suffix);
  for (int digits = 3; digits >= 1 && static_cast<int>(std::strlen(buf)) > width; --digits) {
    std::snprintf(buf, sizeof buf, "%.*g%s", digits, v, suffix);
  }
  char padded[80];
  std::snprintf(padded, sizeof padded, "%*s", width, buf);
  return std::string(padded);
}

void print_errors(std::ostream& out, int64_t run, const std::string& db_path,
                  const std::optional<std::string>& hardware_path, Errors& e) {
  char line[160];
  out << "Prediction error of run " << run << " (" << db_path << ")";
  if (hardware_path) out << " re-priced with " << *hardware_path;
  out << ": |predicted - measured| / measured\n";
  std::snprintf(line, sizeof line, "%-16s %10s %8s %8s %8s %14s %14s\n", "iterations", "count",
                "MAPE", "p50", "p90", "measured (s)", "predicted (s)");
  out << line;
  auto row = [&](const std::string& name, const Group& g) {
    const Summary s = summarise(g.errors);
    std::snprintf(line, sizeof line, "%-16s %10zu ", name.c_str(), g.errors.size());
    out << line << error_cell(100 * s.mape, 8, 1, "%") << ' ' << error_cell(100 * s.p50, 8, 1, "%") << ' '
        << error_cell(100 * s.p90, 8, 1, "%") << ' ' << error_cell(g.measured, 14, 4, "") << ' '
        << error_cell(g.predicted, 14, 4, "") << '\n';
  };
  row("all", e.all);
  for (const auto& [k, g] : e.by_kind) row(k, g);
  for (const char* b : {"1", "2-4", "5-16", "17-64", "65+"}) {
    if (e.by_size.count(b) != 0) row(std::string("batch ") + b, e.by_size[b]);
  }
}

// The summary as metrics rows of the run (read-write now).
Status store_errors(const std::string& db_path, int64_t run, const Errors& e) {
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
  const Summary s = summarise(e.all.errors);
  put("validate_mape", s.mape);
  put("validate_p50", s.p50);
  put("validate_p90", s.p90);
  for (const auto& [k, g] : e.by_kind) {
    std::string name = k.substr(0, k.find('-'));  // prefill, decode, mixed
    put("validate_" + name + "_mape", summarise(g.errors).mape);
  }
  sqlite3_finalize(ins);
  return Ok{};
}

}  // namespace

Status validate_run(const std::string& db_path, std::optional<int64_t> run_id, std::ostream& out,
                    std::optional<std::string> hardware_path) {
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  sqlite3* db = opened.value()->handle();
  Result<RunSources> source = read_run_sources(db, db_path, run_id);
  if (!source.ok()) return source.error();
  const int64_t run = source.value().id;
  Result<std::vector<LoggedIteration>> logged =
      read_logged_iterations(db, run, hardware_path.has_value());
  if (!logged.ok()) return logged.error();
  std::optional<RooflineModel> roofline;
  if (hardware_path) {
    Result<RooflineModel> r = replay_roofline(source.value(), *hardware_path);
    if (!r.ok()) return r.error();
    roofline.emplace(std::move(r).value());
  }
  Errors errors = prediction_errors(logged.value(), roofline);
  if (errors.all.errors.empty()) {
    return Error{"run " + std::to_string(run) + " has no predictions beside measured durations: "
                 "validate runs of a measuring backend (--backend cpu or cuda)"};
  }
  print_errors(out, run, db_path, hardware_path, errors);
  // Stored for the run's own predictions only.
  if (hardware_path) return Ok{};
  return store_errors(db_path, run, errors);
}

}  // namespace servesim
