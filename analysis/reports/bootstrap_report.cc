// The bootstrap of a stored run, and how it is printed (analysis/reports/bootstrap.h).
#include <cmath>

#include "analysis/reports/bootstrap.h"
#include "analysis/reports/text_table.h"

namespace servesim {

Result<BootstrapResult> read_bootstrap(Database& db, int64_t run_id, bool steps, const BootstrapOptions& options) {
  Result<std::vector<RequestRow>> rows = read_request_rows(db, run_id);
  if (!rows.ok()) return rows.error();
  if (rows.value().empty()) {
    return Error{"--bootstrap resamples a run's requests rows, and run " + std::to_string(run_id) +
                 " logged none (--log summary): rerun it with --log requests (the default) or --log iterations"};
  }
  Result<BootstrapResult> result = bootstrap_requests(rows.value(), options, steps);
  if (result.ok()) result.value().run_id = run_id;
  return result;
}

std::vector<std::string> estimate_cells(const BootstrapEstimate& e) {
  const bool interval = !std::isnan(e.low);
  const bool whole = std::trunc(e.point) == e.point && (!interval || (std::trunc(e.low) == e.low && std::trunc(e.high) == e.high));
  const int d = whole ? 0 : interval_decimals(e.point, interval ? (e.high - e.low) / 2 : NAN);  // counts as counts
  return {std::string(e.metric.name) + (e.metric.unit.empty() ? "" : " (" + std::string(e.metric.unit) + ")"),
          fixed_decimals(e.point, d),
          interval ? "[" + fixed_decimals(e.low, d) + ", " + fixed_decimals(e.high, d) + "]" : "-"};
}

void print_bootstrap_summary(std::ostream& out, const BootstrapResult& result) {
  out << "Bootstrap over the " << result.requests << " requests" << (result.run_id > 0 ? " of run " + std::to_string(result.run_id) : "")
      << ": " << result.resamples << " resamples (seed " << result.seed << ")\n"
      << "Estimate and 95 % percentile interval (2.5-97.5 % of the resamples):\n";
  std::vector<std::vector<std::string>> rows;
  for (const BootstrapEstimate& e : result.estimates) rows.push_back(estimate_cells(e));
  print_aligned(out, rows, [](size_t i) { return i == 0; });
}

nlohmann::json bootstrap_json(const BootstrapResult& result) {
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json estimates = nlohmann::json::array();
  for (const BootstrapEstimate& e : result.estimates) {
    estimates.push_back({{"metric", e.metric.name}, {"unit", e.metric.unit}, {"estimate", e.point},
                         {"ci_low", number(e.low)}, {"ci_high", number(e.high)}, {"resamples", e.resamples}});
  }
  return {{"method", "percentile bootstrap over requests, 95 %"},
          {"requests", result.requests},
          {"resamples", result.resamples},
          {"seed", result.seed},
          {"duration", result.duration},
          {"estimates", std::move(estimates)}};
}

}  // namespace servesim
