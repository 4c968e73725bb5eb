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
  Result<std::unique_ptr<Database>> db = Database::open_read_only(db_path);
  if (!db.ok()) return db.error();
  std::vector<StoredRun> runs;
  for (int64_t id : run_ids) {
    Result<StoredRun> r = read_stored_run(*db.value(), id);
    if (!r.ok()) return r.error();
    runs.push_back(std::move(r.value()));
  }
  // Every metric of any run, in metric_names() order (each run's are), the first run's first.
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
  const char* header_columns[] = {"name", "status", "policy", "backend", "hardware", "model", "workload", "replicas", "tp"};
  const auto header_value = [&](const StoredRun& r, const std::string& c) {
    if (c == "status") return status_of(r.row);
    if (c == "hardware") return preset_display_name(text_of(r.row, "hardware"), PresetKind::kHardware);
    if (c == "model") return preset_display_name(text_of(r.row, "model"), PresetKind::kModel);
    if (c == "workload") return preset_display_name(text_of(r.row, "workload"), PresetKind::kWorkload);
    return text_of(r.row, c.c_str());
  };

  if (format == ReportFormat::kJson) {
    nlohmann::ordered_json j;
    j["db"] = db_path;
    j["baseline"] = run_ids.front();
    j["runs"] = nlohmann::ordered_json::array();
    for (const StoredRun& r : runs) {
      nlohmann::ordered_json h;
      h["id"] = r.row.value("id", int64_t{0});
      for (const char* c : header_columns) h[c] = header_value(r, c);
      j["runs"].push_back(h);
    }
    j["warnings"] = warnings;
    j["metrics"] = nlohmann::ordered_json::array();
    for (const std::string& n : names) {
      nlohmann::ordered_json m;
      m["name"] = n;
      const std::optional<double> a = value_of(runs[0], n);
      for (const StoredRun& r : runs) {
        const std::optional<double> b = value_of(r, n);
        m["values"].push_back(b ? nlohmann::ordered_json(*b) : nlohmann::ordered_json(nullptr));
        const bool both = a && b;
        m["diff"].push_back(both ? nlohmann::ordered_json(*b - *a) : nlohmann::ordered_json(nullptr));
        m["relative"].push_back(both && *a != 0 ? nlohmann::ordered_json((*b - *a) / *a) : nlohmann::ordered_json(nullptr));
      }
      j["metrics"].push_back(m);
    }
    out << j.dump(2) << '\n';
    return Ok{};
  }
  if (format == ReportFormat::kCsv) {
    out << "metric";
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::string id = std::to_string(run_ids[i]);
      out << ",run_" << id;
      if (i > 0) out << ",diff_" << id << ",relative_" << id;
    }
    out << '\n';
    for (const std::string& n : names) {
      out << csv_field(n);
      const std::optional<double> a = value_of(runs[0], n);
      for (size_t i = 0; i < runs.size(); ++i) {
        const std::optional<double> b = value_of(runs[i], n);
        out << ',' << (b ? shortest(*b) : "");
        if (i == 0) continue;
        out << ',' << (a && b ? shortest(*b - *a) : "") << ',' << (a && b && *a != 0 ? shortest((*b - *a) / *a) : "");
      }
      out << '\n';
    }
    return Ok{};
  }
  // Text: latencies in milliseconds (steps with the unit backend).
  bool all_unit = true;
  for (const StoredRun& r : runs) all_unit = all_unit && text_of(r.row, "backend") == "unit";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {""};
  for (size_t i = 0; i < runs.size(); ++i) {
    head.push_back("run " + std::to_string(run_ids[i]));
    if (i > 0) {
      head.push_back("diff");
      head.push_back("rel");
    }
  }
  rows.push_back(head);
  for (const char* c : header_columns) {
    std::vector<std::string> row = {c};
    bool any = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      row.push_back(header_value(runs[i], c));
      any = any || !row.back().empty();
      if (i > 0) row.insert(row.end(), {"", ""});
    }
    if (any) rows.push_back(row);
  }
  for (const std::string& n : names) {
    const bool ms = is_latency(n) && !all_unit;
    const double scale = ms ? 1000 : 1;
    std::vector<std::string> row = {n + (ms ? " (ms)" : "")};
    const std::optional<double> a = value_of(runs[0], n);
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::optional<double> b = value_of(runs[i], n);
      row.push_back(b ? number(*b * scale, ms) : "-");
      if (i == 0) continue;
      row.push_back(a && b ? (*b >= *a ? "+" : "") + number((*b - *a) * scale, ms) : "-");
      char rel[32] = "-";
      if (a && b && *a != 0) std::snprintf(rel, sizeof rel, "%+.2f%%", 100 * (*b - *a) / *a);
      row.push_back(rel);
    }
    rows.push_back(row);
  }
  out << "Runs " << run_ids.front();
  for (size_t i = 1; i < run_ids.size(); ++i) out << (i + 1 == run_ids.size() ? " and " : ", ") << run_ids[i];
  out << " of " << db_path << "; differences are from run " << run_ids.front() << "\n";
  for (const std::string& w : warnings) out << "Warning: " << w << "\n";
  print_aligned(out, rows, [](size_t i) { return i == 0; });
  return Ok{};
}

Status print_run_list(const std::string& db_path, ReportFormat format, std::ostream& out) {
  if (format == ReportFormat::kVllmJson) return Error{"--format: list runs prints text, csv or json"};
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  static const char* kSql =
      "SELECT r.id, r.name, r.status, r.policy, r.backend, r.hardware, r.model, r.gpus, r.started_at, r.host, "
      "r.pid, r.error, "
      "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'completed'), "
      "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'rejected'), "
      "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'request_throughput'), "
      "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'ttft_p99'), "
      "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'tpot_p99') "
      "FROM runs r ORDER BY r.id";
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db.handle(), kSql, -1, &s, nullptr) != SQLITE_OK) return Error{db.error_message()};
  const std::vector<std::string> head = {"id", "name", "status", "policy", "backend", "hardware", "model",
                                         "gpus", "requests", "req/s", "p99_ttft_ms", "p99_tpot_ms", "started"};
  std::vector<std::vector<std::string>> rows = {head};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const auto text = [&](int c) {
    const unsigned char* t = sqlite3_column_text(s, c);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  // NULL as NaN (std::optional here trips GCC 12's -Wmaybe-uninitialized once inlined).
  const double kNone = std::numeric_limits<double>::quiet_NaN();
  const auto num = [&](int c) { return sqlite3_column_type(s, c) == SQLITE_NULL ? kNone : sqlite3_column_double(s, c); };
  const auto json_number = [](double v) { return std::isnan(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v); };
  const auto cell = [](double v, double scale, bool fixed) {
    if (std::isnan(v)) return std::string("-");
    char buf[64];
    std::snprintf(buf, sizeof buf, fixed ? "%.2f" : "%.0f", v * scale);
    return std::string(buf);
  };
  while (sqlite3_step(s) == SQLITE_ROW) {
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
    rows.push_back({std::to_string(sqlite3_column_int64(s, 0)), text(1), status, text(3), text(4),
                    j["hardware"].get<std::string>(), j["model"].get<std::string>(), cell(num(7), 1, false),
                    cell(requests, 1, false), cell(rate, 1, true), cell(ttft, unit ? 1 : 1000, true),
                    cell(tpot, unit ? 1 : 1000, true), text(8).substr(0, 19)});
    list.push_back(j);
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
