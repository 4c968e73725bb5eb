// The readers behind `sim report --html`: each turns what the database holds about some runs (or a
// sweep) into a section of the Page (html_report_page.h). They only read. A chart whose data the
// database lacks (a run logged with `--log summary`, a failed run) becomes a note that says which
// `--log` level would have recorded it, never an error and never an empty chart.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/reports/bootstrap.h"
#include "analysis/storage/database.h"
#include "analysis/reports/html_report_page.h"
#include "analysis/metrics/metrics.h"
#include "sim/result.h"

namespace servesim::html {

// One runs row and its metrics.
struct ReportRun {
  int64_t id = 0;
  std::string name, status, error, policy, backend, hardware, model, workload;
  int32_t replicas = 1, tp = 1;
  std::vector<Metric> metrics;  // metric_names() order, then the others by name

  bool unit() const { return backend == "unit"; }  // times in iterations ("steps")
  bool measuring() const { return backend == "cpu" || backend == "cuda"; }
  std::optional<double> metric(std::string_view metric_name) const;
  std::string label() const;  // "run 3", or "run 3 (name)"
  // Latencies are shown in milliseconds, or in steps for the unit backend.
  std::string latency_unit() const { return unit() ? "steps" : "ms"; }
  double latency_scale() const { return unit() ? 1.0 : 1000.0; }
  std::string time_unit() const { return unit() ? "steps" : "s"; }
};

// The runs `ids` of the database in the order given (empty: the latest run). Errors: no runs, or an
// id that does not exist (the message names the ids that do).
Result<std::vector<ReportRun>> read_report_runs(Database& db, const std::vector<int64_t>& ids);

// The page of one run or several compared: the summary table, banners for failed runs and for
// comparisons across workloads, then the sections below.
Result<Page> runs_page(Database& db, const std::vector<ReportRun>& runs);

// The summary tables, a column per run: what ran (policy, backend, hardware, model, workload,
// deployment, KV cache), every stored metric, and the latencies (for one run, as a table of kinds
// by statistic) (html_report_summary.cc).
std::vector<Table> summary_tables(const std::vector<ReportRun>& runs);
// A run's bootstrap over its requests: each statistic with its 95 % interval
// (html_report_summary.cc).
Table bootstrap_table(const ReportRun& run, const BootstrapResult& bootstrap);
// Banners for runs that failed, were interrupted or served nothing (with runs.error), and for
// comparisons of runs of different workloads or time units (html_report_summary.cc).
std::vector<Banner> run_banners(const std::vector<ReportRun>& runs);

// CDFs of TTFT, TPOT, ITL, E2E latency and queueing delay (html_report_latency.cc).
Result<Section> latency_section(Database& db, const std::vector<ReportRun>& runs);
// Per-replica time series from the timeline table (html_report_timeline.cc).
Result<Section> timeline_section(Database& db, const std::vector<ReportRun>& runs);
// Iteration durations by kind; for measuring backends, predicted against measured
// (html_report_iterations.cc).
Result<Section> iterations_section(Database& db, const std::vector<ReportRun>& runs);

// The page of a sweep (or search): a search's answer, the best row per configuration, every point
// with its verdict, each key metric against the swept value with the SLO lines, and the cost/latency
// Pareto frontier (html_report_sweep.h). sweep_id 0 or none: the latest sweep.
Result<Page> sweep_page(Database& db, std::optional<int64_t> sweep_id);

// A prepared statement, finalized when it goes out of scope. Column readers take the column index.
class Query {
 public:
  Query(Database& db, const std::string& sql);
  ~Query() { sqlite3_finalize(stmt_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  // Whether it prepared; if not, error() says why (naming the database).
  bool ok() const { return stmt_ != nullptr; }
  Error error() const { return Error{message_}; }
  Query& bind(int index, int64_t value);
  Query& bind(int index, const std::string& value);
  // The next row; false at the end (or on an error).
  bool step() { return sqlite3_step(stmt_) == SQLITE_ROW; }
  bool null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  bool number(int c) const {
    const int type = sqlite3_column_type(stmt_, c);
    return type == SQLITE_INTEGER || type == SQLITE_FLOAT;
  }
  double real(int c) const { return sqlite3_column_double(stmt_, c); }
  int64_t integer(int c) const { return sqlite3_column_int64(stmt_, c); }
  std::string text(int c) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
  std::string message_;
};

// Whether the database has a table of that name (tables added by later versions may be absent).
bool has_table(Database& db, const std::string& name);

// How many rows `table` has for the run (tables keyed by run_id).
int64_t count_rows(Database& db, const std::string& table, int64_t run_id);

// Formats a value for a table cell: integers as such, others with 4 significant digits.
std::string format_number(double v);

}  // namespace servesim::html
