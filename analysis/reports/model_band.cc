#include "analysis/reports/model_band.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "analysis/metrics/metrics.h"
#include "analysis/storage/sweep_db.h"
#include "analysis/reports/text_table.h"

namespace servesim {

Result<std::vector<ModelBand>> read_model_band(Database& db, int64_t sweep_id) {
  const std::string sql =
      "SELECT p." + quote_identifier("hardware_sample") +
      ", m.name, m.value FROM sweep_points p JOIN metrics m ON m.run_id = p.run_id "
      "WHERE p.sweep_id = ? AND p.status = 'done' ORDER BY p.point, m.name";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return Error{"sweep " + std::to_string(sweep_id) + " is not a model-uncertainty sweep (no hardware_sample key): " +
                 db.error_message()};
  }
  sqlite3_bind_int64(st, 1, sweep_id);
  std::map<int64_t, std::vector<Metric>> by_sample;  // -1: the file's own values
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char* name = sqlite3_column_text(st, 1);
    if (sqlite3_column_type(st, 0) == SQLITE_NULL || name == nullptr || sqlite3_column_type(st, 2) == SQLITE_NULL) continue;
    by_sample[sqlite3_column_int64(st, 0)].push_back({reinterpret_cast<const char*>(name), sqlite3_column_double(st, 2)});
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return Error{db.error_message()};

  std::vector<ModelBand> out;
  for (const SeedMetric& m : seed_summary_metrics()) {
    ModelBand band{m, std::numeric_limits<double>::quiet_NaN(), 0, 0, 0};
    std::vector<double> values;
    for (const auto& [sample, metrics] : by_sample) {
      const std::optional<double> v = find_metric(metrics, m.name);
      if (!v) continue;
      if (sample < 0) {
        band.value = *v * m.scale;
      } else {
        values.push_back(*v * m.scale);
      }
    }
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    band.low = percentile(values, 2.5);
    band.high = percentile(values, 97.5);
    band.samples = static_cast<int64_t>(values.size());
    out.push_back(band);
  }
  return out;
}

void print_model_band(std::ostream& out, const std::vector<ModelBand>& band) {
  std::vector<std::vector<std::string>> rows;
  for (const ModelBand& b : band) {
    const auto whole = [](double v) { return std::isnan(v) || v == std::floor(v); };
    const int d = whole(b.value) && whole(b.low) && whole(b.high)  // counts
                      ? 0
                      : interval_decimals(std::isnan(b.value) ? b.low : b.value, (b.high - b.low) / 2);
    rows.push_back({std::string(b.metric.name) + (b.metric.unit.empty() ? "" : " (" + std::string(b.metric.unit) + ")"),
                    std::isnan(b.value) ? "-" : fixed_decimals(b.value, d),
                    "[" + fixed_decimals(b.low, d) + ", " + fixed_decimals(b.high, d) + "]",
                    "(" + std::to_string(b.samples) + " samples)"});
  }
  print_aligned(out, rows, [](size_t i) { return i == 0 || i == 3; });
}

nlohmann::json model_band_json(const std::vector<ModelBand>& band) {
  nlohmann::json out = nlohmann::json::array();
  for (const ModelBand& b : band) {
    out.push_back({{"metric", b.metric.name},
                   {"unit", b.metric.unit},
                   {"value", std::isnan(b.value) ? nlohmann::json(nullptr) : nlohmann::json(b.value)},
                   {"low", b.low},
                   {"high", b.high},
                   {"samples", b.samples}});
  }
  return out;
}

}  // namespace servesim
