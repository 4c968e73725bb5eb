#include "analysis/reports/sweep_report.h"

#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "analysis/storage/database.h"
#include "analysis/reports/model_band.h"
#include "analysis/reports/seed_stats.h"
#include "analysis/metrics/slo.h"
#include "analysis/storage/sweep_db.h"
#include "analysis/reports/text_table.h"
#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

struct Cell {
  bool null = true;
  bool number = false;
  double value = 0;
  std::string text;
};

Cell cell(sqlite3_stmt* s, int i) {
  Cell c;
  switch (sqlite3_column_type(s, i)) {
    case SQLITE_NULL: break;
    case SQLITE_INTEGER:
    case SQLITE_FLOAT:
      c.null = false;
      c.number = true;
      c.value = sqlite3_column_double(s, i);
      break;
    default:
      c.null = false;
      c.text = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  }
  return c;
}

std::string format_cell(const Cell& c, bool csv) {
  if (c.null) return csv ? "" : "-";
  if (!c.number) return c.text;
  char buf[64];
  if (c.value == std::floor(c.value) && std::abs(c.value) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", c.value);
  } else {
    if (csv) {
      std::snprintf(buf, sizeof buf, "%.17g", c.value);
    } else {
      std::snprintf(buf, sizeof buf, std::abs(c.value) >= 0.01 ? "%.2f" : "%.3g", c.value);
    }
  }
  return buf;
}


// Every metric of run `run_id`.
std::vector<Metric> run_metrics(Database& db, int64_t run_id) {
  std::vector<Metric> out;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), "SELECT name, value FROM metrics WHERE run_id = ?", -1, &st, nullptr) ==
      SQLITE_OK) {
    sqlite3_bind_int64(st, 1, run_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      out.push_back({reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), sqlite3_column_double(st, 1)});
    }
  }
  sqlite3_finalize(st);
  return out;
}

// A search's verdict on each of its probes (rows: point, keys..., status, run, ...), from the SLOs
// of its stored definition: "pass" or "miss: why". Empty for other sweeps.
Result<std::vector<std::string>> search_verdicts(Database& db, const StoredSweep& s,
                                                 const std::vector<std::vector<Cell>>& rows,
                                                 const std::vector<std::string>& errors) {
  std::vector<std::string> out;
  if (s.kind != "search") return out;
  Result<toml::table> spec = parse_toml(s.spec, db.path() + ": search " + std::to_string(s.id));
  if (!spec.ok()) return spec.error();
  const toml::table* table = spec.value().get_as<toml::table>("slo");
  Result<std::vector<Slo>> slos = slos_from_table(table != nullptr ? *table : toml::table{});
  if (!slos.ok()) return slos.error();
  const size_t status_column = 1 + s.keys.size();
  for (size_t r = 0; r < rows.size(); ++r) {
    const Cell& run = rows[r][status_column + 1];
    const std::vector<Metric> metrics = run.null ? std::vector<Metric>{} : run_metrics(db, static_cast<int64_t>(run.value));
    const std::string miss = slo_miss(slos.value(), rows[r][status_column].text, errors[r], metrics);
    out.push_back(miss.empty() ? "pass" : "miss: " + miss);
  }
  return out;
}

}  // namespace

const std::vector<std::string>& sweep_table_metrics() {
  static const std::vector<std::string> names = {
      "gpus", "completed", "rejected", "request_throughput", "output_throughput", "ttft_p99",
      "tpot_p99", "e2el_p99", "request_goodput", "slo_attainment", "overloaded", "cost_per_hour",
      "cost_per_million_output_tokens"};
  return names;
}

Status print_sweep_report(const std::string& db_path, std::optional<int64_t> sweep_id,
                          ReportFormat format, std::ostream& out) {
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  Result<StoredSweep> sweep = read_sweep(db, sweep_id);
  if (!sweep.ok()) return sweep.error();
  const StoredSweep& s = sweep.value();
  std::vector<std::string> headers = {"point"};
  std::string sql = "SELECT p.point";
  for (const std::string& k : s.keys) {
    headers.push_back(k);
    sql += ", p." + quote_identifier(k);
  }
  headers.push_back("status");
  headers.push_back("run");
  sql += ", p.status, p.run_id";
  for (const std::string& m : sweep_table_metrics()) {
    headers.push_back(m);
    sql += ", (SELECT value FROM metrics WHERE run_id = p.run_id AND name = '" + m + "')";
  }
  sql += ", p.error FROM sweep_points p WHERE p.sweep_id = ? ORDER BY p.point";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  sqlite3_bind_int64(st, 1, s.id);
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> errors;
  const int columns = static_cast<int>(headers.size());
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<Cell> row;
    for (int i = 0; i < columns; ++i) row.push_back(cell(st, i));
    rows.push_back(std::move(row));
    errors.push_back(cell(st, columns).text);
  }
  sqlite3_finalize(st);
  Result<std::vector<std::string>> verdicts = search_verdicts(db, s, rows, errors);
  if (!verdicts.ok()) return verdicts.error();
  if (!verdicts.value().empty()) {  // a search: each probe's verdict, as `sim search` printed it
    headers.push_back("verdict");
    for (size_t r = 0; r < rows.size(); ++r) rows[r].push_back(Cell{false, false, 0, verdicts.value()[r]});
  }
  const int n = static_cast<int>(headers.size());
  // Latencies read in milliseconds in the table, as the summary prints them.
  auto is_ms = [](const std::string& h) { return h.rfind("ttft", 0) == 0 || h.rfind("tpot", 0) == 0 || h.rfind("e2el", 0) == 0; };
  // A seeds sweep (`sim --seeds N`) also gets each headline metric's mean and 95 % CI over its runs.
  std::vector<SeedAggregate> aggregate;
  int64_t aggregated = 0;
  if (s.kind == "seeds") {
    Result<std::vector<SeedAggregate>> a = read_seed_aggregate(db, s.id, &aggregated);
    if (!a.ok()) return a.error();
    aggregate = std::move(a).value();
  }
  // A model-uncertainty sweep (`sim --model-uncertainty`) gets each metric's band over the samples.
  std::vector<ModelBand> band;
  if (s.kind == "model-uncertainty") {
    Result<std::vector<ModelBand>> b = read_model_band(db, s.id);
    if (!b.ok()) return b.error();
    band = std::move(b).value();
  }

  if (format == ReportFormat::kJson) {
    nlohmann::json j;
    j["sweep"] = {{"id", s.id}, {"name", s.name}, {"kind", s.kind}, {"status", s.status},
                  {"keys", s.keys}, {"points", s.points}, {"answer", s.answer}};
    j["rows"] = nlohmann::json::array();
    for (size_t r = 0; r < rows.size(); ++r) {
      nlohmann::json row;
      for (int i = 0; i < n; ++i) {
        const Cell& c = rows[r][static_cast<size_t>(i)];
        if (c.null) row[headers[static_cast<size_t>(i)]] = nullptr;
        else if (c.number) row[headers[static_cast<size_t>(i)]] = c.value;
        else row[headers[static_cast<size_t>(i)]] = c.text;
      }
      if (!errors[r].empty()) row["error"] = errors[r];
      j["rows"].push_back(row);
    }
    if (s.kind == "seeds") j["aggregate"] = seed_aggregate_json(aggregate);
    if (s.kind == "model-uncertainty") j["band"] = model_band_json(band);
    out << j.dump(2) << '\n';
    return Ok{};
  }
  if (format == ReportFormat::kCsv) {
    for (int i = 0; i < n; ++i) out << (i ? "," : "") << csv_field(headers[static_cast<size_t>(i)]);
    out << ",error\n";
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int i = 0; i < n; ++i) out << (i ? "," : "") << csv_field(format_cell(rows[r][static_cast<size_t>(i)], true));
      out << "," << csv_field(errors[r]) << '\n';
    }
    if (s.kind == "seeds") {
      // Then the aggregate, in the same columns as stored (seconds): rows mean, std, ci_low, ci_high.
      for (const char* what : {"mean", "std", "ci_low", "ci_high"}) {
        out << what;
        for (int i = 1; i < n; ++i) {
          std::string v;
          for (const SeedAggregate& a : aggregate) {
            if (a.metric.name != headers[static_cast<size_t>(i)]) continue;
            const SampleStats& stats = a.stats;
            const double x = what[0] == 'm' ? stats.mean : what[0] == 's' ? stats.std : what[3] == 'l' ? stats.low() : stats.high();
            if (!std::isnan(x)) v = format_cell(Cell{false, true, x / a.metric.scale, ""}, true);
          }
          out << "," << v;
        }
        out << "," << (what[0] == 'c' ? csv_field("95 % CI of the mean: " + std::string(kSeedIntervalMethod)) : "") << "\n";
      }
    }
    return Ok{};
  }
  // Text: columns that are empty in every row are left out.
  std::vector<int> shown;
  for (int i = 0; i < n; ++i) {
    bool any = i < 3 + static_cast<int>(s.keys.size());
    for (const auto& row : rows) any = any || !row[static_cast<size_t>(i)].null;
    if (any) shown.push_back(i);
  }
  std::vector<std::vector<std::string>> text(rows.size() + 1);
  for (int i : shown) {
    const std::string& h = headers[static_cast<size_t>(i)];
    text[0].push_back(is_ms(h) ? h + "_ms" : h);
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int i : shown) {
      Cell c = rows[r][static_cast<size_t>(i)];
      if (c.number && is_ms(headers[static_cast<size_t>(i)])) c.value *= 1000;
      text[r + 1].push_back(format_cell(c, false));
    }
  }
  std::vector<size_t> width(shown.size(), 0);
  for (const auto& row : text) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  out << (s.kind == "search" ? "Search " : "Sweep ") << s.id << (s.name.empty() ? "" : " (" + s.name + ")")
      << ": " << rows.size() << " of " << s.points << " points recorded, status " << s.status << "\n";
  for (const auto& row : text) {
    for (size_t i = 0; i < row.size(); ++i) {
      const bool left = ((i > 0 && i <= s.keys.size() + 1) || text[0][i] == "verdict") && !rows.empty();
      std::string cellv = row[i];
      const std::string pad(width[i] - cellv.size(), ' ');
      out << (i ? "  " : "") << (left ? (i + 1 == row.size() ? cellv : cellv + pad) : pad + cellv);
    }
    out << '\n';
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!errors[r].empty()) out << "point " << format_cell(rows[r][0], false) << ": " << errors[r] << '\n';
  }
  if (!s.answer.empty()) out << "Answer: " << s.answer << '\n';
  if (s.kind == "seeds") {
    out << "\n" << seed_summary_title(aggregated) << ":\n";
    print_seed_summary(out, aggregate);
  }
  if (s.kind == "model-uncertainty") {
    out << "\nEach metric with the file's values, and 2.5-97.5 % over the hardware file's calibration samples:\n";
    print_model_band(out, band);
  }
  return Ok{};
}

}  // namespace servesim
