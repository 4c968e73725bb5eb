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

namespace {

// A sweep's table: a row per recorded point, and what its kind adds.
struct SweepTable {
  StoredSweep s;
  std::vector<std::string> headers;
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> errors;  // each row's point's error ("" when none)
  // A seeds sweep (`sim --seeds N`) also gets each headline metric's mean and 95 % CI over its runs.
  std::vector<SeedAggregate> aggregate;
  int64_t aggregated = 0;
  // A model-uncertainty sweep (`sim --model-uncertainty`) gets each metric's band over the samples.
  std::vector<ModelBand> band;
};

// The sweep's points: point, keys..., status, run, the table's metrics; their errors aside.
Status read_points(Database& db, SweepTable& t) {
  const StoredSweep& s = t.s;
  t.headers = {"point"};
  std::string sql = "SELECT p.point";
  for (const std::string& k : s.keys) {
    t.headers.push_back(k);
    sql += ", p." + quote_identifier(k);
  }
  t.headers.push_back("status");
  t.headers.push_back("run");
  sql += ", p.status, p.run_id";
  for (const std::string& m : sweep_table_metrics()) {
    t.headers.push_back(m);
    sql += ", (SELECT value FROM metrics WHERE run_id = p.run_id AND name = '" + m + "')";
  }
  sql += ", p.error FROM sweep_points p WHERE p.sweep_id = ? ORDER BY p.point";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  sqlite3_bind_int64(st, 1, s.id);
  const int columns = static_cast<int>(t.headers.size());
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<Cell> row;
    for (int i = 0; i < columns; ++i) row.push_back(cell(st, i));
    t.rows.push_back(std::move(row));
    t.errors.push_back(cell(st, columns).text);
  }
  sqlite3_finalize(st);
  return Ok{};
}

// What the sweep's kind adds: a search's verdicts, a seeds sweep's aggregate, a model band.
Status read_kind_extras(Database& db, SweepTable& t) {
  Result<std::vector<std::string>> verdicts = search_verdicts(db, t.s, t.rows, t.errors);
  if (!verdicts.ok()) return verdicts.error();
  if (!verdicts.value().empty()) {  // a search: each probe's verdict, as `sim search` printed it
    t.headers.push_back("verdict");
    for (size_t r = 0; r < t.rows.size(); ++r) t.rows[r].push_back(Cell{false, false, 0, verdicts.value()[r]});
  }
  if (t.s.kind == "seeds") {
    Result<std::vector<SeedAggregate>> a = read_seed_aggregate(db, t.s.id, &t.aggregated);
    if (!a.ok()) return a.error();
    t.aggregate = std::move(a).value();
  }
  if (t.s.kind == "model-uncertainty") {
    Result<std::vector<ModelBand>> b = read_model_band(db, t.s.id);
    if (!b.ok()) return b.error();
    t.band = std::move(b).value();
  }
  return Ok{};
}

void print_json(const SweepTable& t, std::ostream& out) {
  const StoredSweep& s = t.s;
  nlohmann::json j;
  j["sweep"] = {{"id", s.id}, {"name", s.name}, {"kind", s.kind}, {"status", s.status},
                {"keys", s.keys}, {"points", s.points}, {"answer", s.answer}};
  j["rows"] = nlohmann::json::array();
  for (size_t r = 0; r < t.rows.size(); ++r) {
    nlohmann::json row;
    for (size_t i = 0; i < t.headers.size(); ++i) {
      const Cell& c = t.rows[r][i];
      if (c.null) row[t.headers[i]] = nullptr;
      else if (c.number) row[t.headers[i]] = c.value;
      else row[t.headers[i]] = c.text;
    }
    if (!t.errors[r].empty()) row["error"] = t.errors[r];
    j["rows"].push_back(row);
  }
  if (s.kind == "seeds") j["aggregate"] = seed_aggregate_json(t.aggregate);
  if (s.kind == "model-uncertainty") j["band"] = model_band_json(t.band);
  out << j.dump(2) << '\n';
}

// A seeds sweep's aggregate, in the same columns as stored (seconds): rows mean, std, ci_low, ci_high.
void print_csv_aggregate(const SweepTable& t, std::ostream& out) {
  for (const char* what : {"mean", "std", "ci_low", "ci_high"}) {
    out << what;
    for (size_t i = 1; i < t.headers.size(); ++i) {
      std::string v;
      for (const SeedAggregate& a : t.aggregate) {
        if (a.metric.name != t.headers[i]) continue;
        const SampleStats& stats = a.stats;
        const double x = what[0] == 'm' ? stats.mean : what[0] == 's' ? stats.std : what[3] == 'l' ? stats.low() : stats.high();
        if (!std::isnan(x)) v = format_cell(Cell{false, true, x / a.metric.scale, ""}, true);
      }
      out << "," << v;
    }
    out << "," << (what[0] == 'c' ? csv_field("95 % CI of the mean: " + std::string(kSeedIntervalMethod)) : "") << "\n";
  }
}

void print_csv(const SweepTable& t, std::ostream& out) {
  for (size_t i = 0; i < t.headers.size(); ++i) out << (i ? "," : "") << csv_field(t.headers[i]);
  out << ",error\n";
  for (size_t r = 0; r < t.rows.size(); ++r) {
    for (size_t i = 0; i < t.headers.size(); ++i) out << (i ? "," : "") << csv_field(format_cell(t.rows[r][i], true));
    out << "," << csv_field(t.errors[r]) << '\n';
  }
  if (t.s.kind == "seeds") print_csv_aggregate(t, out);
}

// Latencies read in milliseconds in the table, as the summary prints them.
bool is_ms(const std::string& h) { return h.rfind("ttft", 0) == 0 || h.rfind("tpot", 0) == 0 || h.rfind("e2el", 0) == 0; }

// The text table's cells, header first: columns that are empty in every row are left out.
std::vector<std::vector<std::string>> text_cells(const SweepTable& t) {
  std::vector<size_t> shown;
  for (size_t i = 0; i < t.headers.size(); ++i) {
    bool any = i < 3 + t.s.keys.size();
    for (const auto& row : t.rows) any = any || !row[i].null;
    if (any) shown.push_back(i);
  }
  std::vector<std::vector<std::string>> text(t.rows.size() + 1);
  for (size_t i : shown) {
    const std::string& h = t.headers[i];
    text[0].push_back(is_ms(h) ? h + "_ms" : h);
  }
  for (size_t r = 0; r < t.rows.size(); ++r) {
    for (size_t i : shown) {
      Cell c = t.rows[r][i];
      if (c.number && is_ms(t.headers[i])) c.value *= 1000;
      text[r + 1].push_back(format_cell(c, false));
    }
  }
  return text;
}

void print_text(const SweepTable& t, std::ostream& out) {
  const StoredSweep& s = t.s;
  const std::vector<std::vector<std::string>> text = text_cells(t);
  std::vector<size_t> width(text[0].size(), 0);
  for (const auto& row : text) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  out << (s.kind == "search" ? "Search " : "Sweep ") << s.id << (s.name.empty() ? "" : " (" + s.name + ")")
      << ": " << t.rows.size() << " of " << s.points << " points recorded, status " << s.status << "\n";
  for (const auto& row : text) {
    for (size_t i = 0; i < row.size(); ++i) {
      const bool left = ((i > 0 && i <= s.keys.size() + 1) || text[0][i] == "verdict") && !t.rows.empty();
      std::string cellv = row[i];
      const std::string pad(width[i] - cellv.size(), ' ');
      out << (i ? "  " : "") << (left ? (i + 1 == row.size() ? cellv : cellv + pad) : pad + cellv);
    }
    out << '\n';
  }
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (!t.errors[r].empty()) out << "point " << format_cell(t.rows[r][0], false) << ": " << t.errors[r] << '\n';
  }
  if (!s.answer.empty()) out << "Answer: " << s.answer << '\n';
  if (s.kind == "seeds") {
    out << "\n" << seed_summary_title(t.aggregated) << ":\n";
    print_seed_summary(out, t.aggregate);
  }
  if (s.kind == "model-uncertainty") {
    out << "\nEach metric with the file's values, and 2.5-97.5 % over the hardware file's calibration samples:\n";
    print_model_band(out, t.band);
  }
}

}  // namespace

Status print_sweep_report(const std::string& db_path, std::optional<int64_t> sweep_id,
                          ReportFormat format, std::ostream& out) {
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();
  Result<StoredSweep> sweep = read_sweep(db, sweep_id);
  if (!sweep.ok()) return sweep.error();
  SweepTable t;
  t.s = std::move(sweep).value();
  if (Status st = read_points(db, t); !st.ok()) return st;
  if (Status st = read_kind_extras(db, t); !st.ok()) return st;
  if (format == ReportFormat::kJson) {
    print_json(t, out);
  } else if (format == ReportFormat::kCsv) {
    print_csv(t, out);
  } else {
    print_text(t, out);
  }
  return Ok{};
}

}  // namespace servesim
