#include "analysis/reports/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "analysis/storage/database.h"
#include "analysis/storage/run_status.h"
#include "analysis/reports/text_table.h"
#include "sim/config/presets.h"

namespace servesim {
namespace {

std::string text_of(const nlohmann::ordered_json& row, const char* column) {
  const auto it = row.find(column);
  if (it == row.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The run's status as a reader should see it: a running run whose process is gone is abandoned.
std::string status_of(const nlohmann::ordered_json& row) {
  const std::string status = text_of(row, "status");
  if (status != "running") return status;
  const auto pid = row.contains("pid") && row["pid"].is_number_integer() ? row["pid"].get<int64_t>() : int64_t{0};
  return abandoned_reason(text_of(row, "host"), pid, text_of(row, "started_at")).empty() ? status : "abandoned";
}

// Whether a metric is a latency in seconds (shown in milliseconds).
bool is_latency(const std::string& name) {
  for (std::string_view l : latency_metrics()) {
    if (name.size() > l.size() && name.starts_with(l) && name[l.size()] == '_') return true;
  }
  return false;
}

std::string number(double v, bool latency_ms) {
  char buf[64];
  if (latency_ms) {
    std::snprintf(buf, sizeof buf, "%.2f", v);
  } else if (v == std::floor(v) && std::abs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

std::string shortest(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::optional<double> value_of(const StoredRun& r, const std::string& name) { return find_metric(r.metrics, name); }

// The runs compared, the first the baseline.
struct Comparison {
  std::string db_path;
  std::vector<int64_t> run_ids;
  std::vector<StoredRun> runs;
  std::vector<std::string> names;  // their metrics
  std::vector<std::string> warnings;
};

// The columns of the runs' rows shown above their metrics.
constexpr const char* kHeaderColumns[] = {"name", "status", "policy", "backend", "hardware", "model", "workload", "replicas", "tp"};

std::string header_value(const StoredRun& r, const std::string& c) {
  if (c == "status") return status_of(r.row);
  if (c == "hardware") return preset_display_name(text_of(r.row, "hardware"), PresetKind::kHardware);
  if (c == "model") return preset_display_name(text_of(r.row, "model"), PresetKind::kModel);
  if (c == "workload") return preset_display_name(text_of(r.row, "workload"), PresetKind::kWorkload);
  return text_of(r.row, c.c_str());
}

// Every metric of any run, in metric_names() order (each run's are), the first run's first.
std::vector<std::string> metrics_of(const std::vector<StoredRun>& runs) {
  std::vector<std::string> names;
  for (const StoredRun& r : runs) {
    for (const Metric& m : r.metrics) {
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    }
  }
  const auto rank = [&](const std::string& n) {
    const auto all = metric_names();
    const auto at = std::find(all.begin(), all.end(), n);
    return at == all.end() ? all.size() : static_cast<size_t>(at - all.begin());
  };
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  return names;
}

// Why the runs' metrics may not compare: different workloads or backends, runs not done.
std::vector<std::string> comparison_warnings(const std::vector<StoredRun>& runs) {
  std::vector<std::string> warnings;
  for (const char* column : {"workload", "backend"}) {
    std::set<std::string> seen;
    for (const StoredRun& r : runs) seen.insert(text_of(r.row, column));
    if (seen.size() > 1) {
      warnings.push_back(std::string("the runs have different ") + column + "s; their metrics may not be comparable");
    }
  }
  for (const StoredRun& r : runs) {
    const std::string status = status_of(r.row);
    if (status != "done") {
      warnings.push_back("run " + text_of(r.row, "id") + " is " + status + (text_of(r.row, "error").empty() ? "" : ": " + text_of(r.row, "error")));
    }
  }
  return warnings;
}

Result<Comparison> read_comparison(const std::string& db_path, const std::vector<int64_t>& run_ids) {
  Result<std::unique_ptr<Database>> db = Database::open_read_only(db_path);
  if (!db.ok()) return db.error();
  Comparison c{db_path, run_ids, {}, {}, {}};
  for (int64_t id : run_ids) {
    Result<StoredRun> r = read_stored_run(*db.value(), id);
    if (!r.ok()) return r.error();
    c.runs.push_back(std::move(r.value()));
  }
  c.names = metrics_of(c.runs);
  c.warnings = comparison_warnings(c.runs);
  return c;
}

void print_json(const Comparison& c, std::ostream& out) {
  nlohmann::ordered_json j;
  j["db"] = c.db_path;
  j["baseline"] = c.run_ids.front();
  j["runs"] = nlohmann::ordered_json::array();
  for (const StoredRun& r : c.runs) {
    nlohmann::ordered_json h;
    h["id"] = r.row.value("id", int64_t{0});
    for (const char* column : kHeaderColumns) h[column] = header_value(r, column);
    j["runs"].push_back(h);
  }
  j["warnings"] = c.warnings;
  j["metrics"] = nlohmann::ordered_json::array();
  for (const std::string& n : c.names) {
    nlohmann::ordered_json m;
    m["name"] = n;
    const std::optional<double> a = value_of(c.runs[0], n);
    for (const StoredRun& r : c.runs) {
      const std::optional<double> b = value_of(r, n);
      m["values"].push_back(b ? nlohmann::ordered_json(*b) : nlohmann::ordered_json(nullptr));
      const bool both = a && b;
      m["diff"].push_back(both ? nlohmann::ordered_json(*b - *a) : nlohmann::ordered_json(nullptr));
      m["relative"].push_back(both && *a != 0 ? nlohmann::ordered_json((*b - *a) / *a) : nlohmann::ordered_json(nullptr));
    }
    j["metrics"].push_back(m);
  }
  out << j.dump(2) << '\n';
}

void print_csv(const Comparison& c, std::ostream& out) {
  out << "metric";
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const std::string id = std::to_string(c.run_ids[i]);
    out << ",run_" << id;
    if (i > 0) out << ",diff_" << id << ",relative_" << id;
  }
  out << '\n';
  for (const std::string& n : c.names) {
    out << csv_field(n);
    const std::optional<double> a = value_of(c.runs[0], n);
    for (size_t i = 0; i < c.runs.size(); ++i) {
      const std::optional<double> b = value_of(c.runs[i], n);
      out << ',' << (b ? shortest(*b) : "");
      if (i == 0) continue;
      out << ',' << (a && b ? shortest(*b - *a) : "") << ',' << (a && b && *a != 0 ? shortest((*b - *a) / *a) : "");
    }
    out << '\n';
  }
}

// The text table's rows of metric `n`: its value in each run, and each run's difference from the
// first (latencies in milliseconds when `ms`).
std::vector<std::string> metric_row(const Comparison& c, const std::string& n, bool ms) {
  const double scale = ms ? 1000 : 1;
  std::vector<std::string> row = {n + (ms ? " (ms)" : "")};
  const std::optional<double> a = value_of(c.runs[0], n);
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const std::optional<double> b = value_of(c.runs[i], n);
    row.push_back(b ? number(*b * scale, ms) : "-");
    if (i == 0) continue;
    row.push_back(a && b ? (*b >= *a ? "+" : "") + number((*b - *a) * scale, ms) : "-");
    char rel[32] = "-";
    if (a && b && *a != 0) std::snprintf(rel, sizeof rel, "%+.2f%%", 100 * (*b - *a) / *a);
    row.push_back(rel);
  }
  return row;
}

// Text: latencies in milliseconds (steps with the unit backend).
void print_text(const Comparison& c, std::ostream& out) {
  bool all_unit = true;
  for (const StoredRun& r : c.runs) all_unit = all_unit && text_of(r.row, "backend") == "unit";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {""};
  for (size_t i = 0; i < c.runs.size(); ++i) {
    head.push_back("run " + std::to_string(c.run_ids[i]));
    if (i > 0) {
      head.push_back("diff");
      head.push_back("rel");
    }
  }
  rows.push_back(head);
  for (const char* column : kHeaderColumns) {
    std::vector<std::string> row = {column};
    bool any = false;
    for (size_t i = 0; i < c.runs.size(); ++i) {
      row.push_back(header_value(c.runs[i], column));
      any = any || !row.back().empty();
      if (i > 0) row.insert(row.end(), {"", ""});
    }
    if (any) rows.push_back(row);
  }
  for (const std::string& n : c.names) rows.push_back(metric_row(c, n, is_latency(n) && !all_unit));
  out << "Runs " << c.run_ids.front();
  for (size_t i = 1; i < c.run_ids.size(); ++i) out << (i + 1 == c.run_ids.size() ? " and " : ", ") << c.run_ids[i];
  out << " of " << c.db_path << "; differences are from run " << c.run_ids.front() << "\n";
  for (const std::string& w : c.warnings) out << "Warning: " << w << "\n";
  print_aligned(out, rows, [](size_t i) { return i == 0; });
}

}  // namespace

Status print_comparison(const std::string& db_path, const std::vector<int64_t>& run_ids, ReportFormat format,
                        std::ostream& out) {
  if (run_ids.size() < 2) return Error{"give at least two runs to compare (sim compare 3 7); `sim list runs` lists them"};
  if (format == ReportFormat::kVllmJson) return Error{"--format: compare prints text, csv or json"};
  for (size_t i = 0; i < run_ids.size(); ++i) {
    if (std::count(run_ids.begin(), run_ids.end(), run_ids[i]) > 1) {
      return Error{"run " + std::to_string(run_ids[i]) + " is given twice"};
    }
  }
  Result<Comparison> c = read_comparison(db_path, run_ids);
  if (!c.ok()) return c.error();
  if (format == ReportFormat::kJson) {
    print_json(c.value(), out);
  } else if (format == ReportFormat::kCsv) {
    print_csv(c.value(), out);
  } else {
    print_text(c.value(), out);
  }
  return Ok{};
}

namespace {

constexpr const char* kRunListSql =
    "SELECT r.id, r.name, r.status, r.policy, r.backend, r.hardware, r.model, r.gpus, r.started_at, r.host, "
    "r.pid, r.error, "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'completed'), "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'rejected'), "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'request_throughput'), "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'ttft_p99'), "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'tpot_p99') "
    "FROM runs r ORDER BY r.id";

// NULL as NaN (std::optional here trips GCC 12's -Wmaybe-uninitialized once inlined).
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

std::string column_text(sqlite3_stmt* s, int c) {
  const unsigned char* t = sqlite3_column_text(s, c);
  return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
}

double column_number(sqlite3_stmt* s, int c) {
  return sqlite3_column_type(s, c) == SQLITE_NULL ? kNone : sqlite3_column_double(s, c);
}

nlohmann::ordered_json json_number(double v) {
  return std::isnan(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v);
}

std::string list_cell(double v, double scale, bool fixed) {
  if (std::isnan(v)) return std::string("-");
  char buf[64];
  std::snprintf(buf, sizeof buf, fixed ? "%.2f" : "%.0f", v * scale);
  return std::string(buf);
}

// The run of kRunListSql's current row: its JSON, and its table's cells in `cells`.
nlohmann::ordered_json listed_run(sqlite3_stmt* s, std::vector<std::string>& cells) {
  const auto text = [&](int c) { return column_text(s, c); };
  const auto num = [&](int c) { return column_number(s, c); };
  nlohmann::ordered_json row;
  row["id"] = sqlite3_column_int64(s, 0);
  row["name"] = text(1);
  row["status"] = text(2);
  row["host"] = text(9);
  row["pid"] = sqlite3_column_int64(s, 10);
  row["started_at"] = text(8);
  const std::string status = status_of(row);
  const double completed = num(12), rejected = num(13), rate = num(14), ttft = num(15), tpot = num(16);
  const double requests = std::isnan(completed) && std::isnan(rejected)
                              ? kNone
                              : (std::isnan(completed) ? 0 : completed) + (std::isnan(rejected) ? 0 : rejected);
  const bool unit = text(4) == "unit";
  nlohmann::ordered_json j;
  j["id"] = row["id"];
  j["name"] = text(1);
  j["status"] = status;
  j["policy"] = text(3);
  j["backend"] = text(4);
  j["hardware"] = preset_display_name(text(5), PresetKind::kHardware);
  j["model"] = preset_display_name(text(6), PresetKind::kModel);
  j["gpus"] = json_number(num(7));
  j["requests"] = json_number(requests);
  j["request_throughput"] = json_number(rate);
  j["ttft_p99"] = json_number(ttft);
  j["tpot_p99"] = json_number(tpot);
  j["started_at"] = text(8);
  j["error"] = text(11);
  cells = {std::to_string(sqlite3_column_int64(s, 0)), text(1), status, text(3), text(4),
           j["hardware"].get<std::string>(), j["model"].get<std::string>(), list_cell(num(7), 1, false),
           list_cell(requests, 1, false), list_cell(rate, 1, true), list_cell(ttft, unit ? 1 : 1000, true),
           list_cell(tpot, unit ? 1 : 1000, true), text(8).substr(0, 19)};
  return j;
}

}  // namespace

Status print_run_list(const std::string& db_path, ReportFormat format, std::ostream& out) {
  if (format == ReportFormat::kVllmJson) return Error{"--format: list runs prints text, csv or json"};
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db.handle(), kRunListSql, -1, &s, nullptr) != SQLITE_OK) return Error{db.error_message()};
  const std::vector<std::string> head = {"id", "name", "status", "policy", "backend", "hardware", "model",
                                         "gpus", "requests", "req/s", "p99_ttft_ms", "p99_tpot_ms", "started"};
  std::vector<std::vector<std::string>> rows = {head};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  while (sqlite3_step(s) == SQLITE_ROW) {
    std::vector<std::string> cells;
    list.push_back(listed_run(s, cells));
    rows.push_back(std::move(cells));
  }
  sqlite3_finalize(s);
  if (format == ReportFormat::kJson) {
    out << list.dump(2) << '\n';
  } else if (format == ReportFormat::kCsv) {
    for (size_t i = 0; i < head.size(); ++i) out << (i ? "," : "") << head[i];
    out << '\n';
    for (size_t r = 1; r < rows.size(); ++r) {
      for (size_t i = 0; i < rows[r].size(); ++i) out << (i ? "," : "") << csv_field(rows[r][i] == "-" ? "" : rows[r][i]);
      out << '\n';
    }
  } else if (rows.size() == 1) {
    out << "no runs in " << db_path << "; run `sim --trace ...` first\n";
  } else {
    print_aligned(out, rows, [](size_t i) { return i >= 1 && i <= 6; });
    out << "(latencies in ms, steps for the unit backend; `sim report --run ID` for one, `sim compare ID ID` for several)\n";
  }
  return Ok{};
}

}  // namespace servesim
