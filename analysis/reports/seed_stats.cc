#include "analysis/reports/seed_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace servesim {

double student_t_975(int64_t df) {
  // t_{0.975, df} for df = 1..30 (any statistics table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
  static constexpr double kTable[] = {
      12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
      2.2010,  2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
      2.0796,  2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (df <= 30) return kTable[df - 1];
  const double z = 1.959963984540054;  // the normal's 0.975 quantile
  const double v = static_cast<double>(df);
  const double z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v) +
         (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * v * v * v * v);
}

std::string seed_summary_title(int64_t seeds) {
  return "Mean and 95 % CI of the mean over " + std::to_string(seeds) + " seeds (" +
         std::string(kSeedIntervalMethod) + ")";
}

SampleStats sample_stats(std::span<const double> values, double range_low, double range_high) {
  SampleStats s;
  s.range_low = range_low;
  s.range_high = range_high;
  s.n = static_cast<int64_t>(values.size());
  double sum = 0;
  for (const double x : values) sum += x;
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) {
    s.std = s.half_width = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  double squares = 0;
  for (const double x : values) squares += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(squares / static_cast<double>(s.n - 1));
  s.half_width = student_t_975(s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
  return s;
}

std::span<const SeedMetric> seed_summary_metrics() {
  static constexpr SeedMetric kMetrics[] = {
      {"completed", "", 1},
      {"rejected", "", 1},
      {"request_throughput", "req/s", 1},
      {"output_throughput", "tok/s", 1},
      {"total_token_throughput", "tok/s", 1},
      {"ttft_mean", "ms", 1000},
      {"ttft_p50", "ms", 1000},
      {"ttft_p99", "ms", 1000},
      {"tpot_mean", "ms", 1000},
      {"tpot_p99", "ms", 1000},
      {"itl_mean", "ms", 1000},
      {"itl_p99", "ms", 1000},
      {"e2el_mean", "ms", 1000},
      {"e2el_p99", "ms", 1000},
      {"slot_utilization", "", 1, 1},
      {"kv_utilization_mean", "", 1, 1},
      {"preemptions", "", 1},
  };
  return kMetrics;
}

std::vector<SeedAggregate> aggregate_seed_runs(const std::vector<std::vector<Metric>>& runs) {
  std::vector<SeedAggregate> out;
  for (const SeedMetric& m : seed_summary_metrics()) {
    std::vector<double> values;
    for (const std::vector<Metric>& run : runs) {
      if (std::optional<double> v = find_metric(run, m.name)) values.push_back(*v * m.scale);
    }
    if (!values.empty()) out.push_back({m, sample_stats(values, 0, m.range_high)});
  }
  return out;
}

Result<std::vector<SeedAggregate>> read_seed_aggregate(Database& db, int64_t sweep_id, int64_t* runs) {
  const char* sql =
      "SELECT p.point, m.name, m.value FROM sweep_points p JOIN metrics m ON m.run_id = p.run_id "
      "WHERE p.sweep_id = ? AND p.status = 'done' ORDER BY p.point, m.name";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &st, nullptr) != SQLITE_OK) return Error{db.error_message()};
  sqlite3_bind_int64(st, 1, sweep_id);
  std::map<int64_t, std::vector<Metric>> by_point;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char* name = sqlite3_column_text(st, 1);
    if (name == nullptr || sqlite3_column_type(st, 2) == SQLITE_NULL) continue;
    by_point[sqlite3_column_int64(st, 0)].push_back(
        {reinterpret_cast<const char*>(name), sqlite3_column_double(st, 2)});
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return Error{db.error_message()};
  std::vector<std::vector<Metric>> all;
  for (auto& [point, metrics] : by_point) all.push_back(std::move(metrics));
  if (runs != nullptr) *runs = static_cast<int64_t>(all.size());
  return aggregate_seed_runs(all);
}

int interval_decimals(double value, double half_width) {
  const double w = std::isnan(half_width) || half_width == 0 ? std::abs(value) : half_width;
  if (w == 0 || !std::isfinite(w)) return 0;
  return std::clamp(2 - static_cast<int>(std::floor(std::log10(w))), 0, 6);
}

std::string fixed_decimals(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void print_seed_summary(std::ostream& out, const std::vector<SeedAggregate>& aggregate) {
  std::vector<std::vector<std::string>> rows;
  for (const SeedAggregate& a : aggregate) {
    const SampleStats& s = a.stats;
    const int d = interval_decimals(s.mean, s.half_width);
    const std::string label =
        std::string(a.metric.name) + (a.metric.unit.empty() ? "" : " (" + std::string(a.metric.unit) + ")");
    const bool spread = !std::isnan(s.half_width);
    rows.push_back({label, fixed_decimals(s.mean, d),
                    spread ? "[" + fixed_decimals(s.low(), d) + ", " + fixed_decimals(s.high(), d) + "]" : "",
                    spread ? "std " + fixed_decimals(s.std, d) : "",
                    "(" + std::to_string(s.n) + (s.n == 1 ? " seed)" : " seeds)")});
  }
  std::vector<size_t> width(5, 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      const std::string pad(width[i] - r[i].size(), ' ');
      line += (i ? "  " : "") + (i == 0 || i == 4 ? r[i] + pad : pad + r[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  }
}

nlohmann::json seed_aggregate_json(const std::vector<SeedAggregate>& aggregate) {
  nlohmann::json out = nlohmann::json::array();
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  for (const SeedAggregate& a : aggregate) {
    out.push_back({{"metric", a.metric.name}, {"unit", a.metric.unit}, {"n", a.stats.n},
                   {"mean", a.stats.mean}, {"std", number(a.stats.std)},
                   {"ci_low", number(a.stats.low())}, {"ci_high", number(a.stats.high())},
                   {"ci_method", kSeedIntervalMethod}});
  }
  return out;
}

}  // namespace servesim
