// Error bars over seeds: `sim --seeds N` reruns a generated workload with N seeds (a sweep of kind
// "seeds" over the key `seed`), and this file turns the runs' stored metrics into each headline
// metric's mean, sample standard deviation and 95 % confidence interval of the mean: Student's t,
// cut at the metric's range (no latency, throughput or count below 0, no fraction above 1).
//
// Why that interval: with few seeds, mean ± t s / sqrt(n) reaches past what the metric can be (2
// seeds: t = 12.7, so a p99 latency whose two values differ by a ninth of their mean gets a lower
// bound below 0). The mean itself can never be there, so cutting the interval at the range leaves
// its coverage exactly as it was: it is still a 95 % interval, now of possible values only. A
// percentile bootstrap over the seeds would stay inside the values seen, but covers far less than
// it says with few seeds (with 2 it is the two values, a 50 % interval at best); a t interval of
// the logarithms would describe the geometric mean, not the mean printed beside it.
//
// Nothing here is stored: the aggregate is derived from the runs' metrics rows whenever it is read
// (analysis derives, the simulator records), so `sim run --seeds` and `sim report --sweep ID` print
// the same numbers, and a merged or resumed seeds sweep needs nothing recomputed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/storage/database.h"
#include "analysis/metrics/metrics.h"
#include "sim/result.h"

namespace servesim {

// t_{0.975, df}: the two-sided 95 % quantile of Student's t with df degrees of freedom. df 1..30
// from the standard table (4 decimals); above 30 by the Cornish-Fisher expansion (Abramowitz and
// Stegun 26.7.5, four terms), within 1e-4 of the exact value there.
// REQUIRES: df >= 1.
double student_t_975(int64_t df);

// The method of the seeds' intervals, as the summaries, the JSON and the CSV state it.
inline constexpr std::string_view kSeedIntervalMethod = "Student's t, cut at the metric's range";
// "Mean and 95 % CI of the mean over N seeds (Student's t, cut at the metric's range)": the heading
// of every seeds summary.
std::string seed_summary_title(int64_t seeds);

// Mean, sample standard deviation (n - 1) and the 95 % CI of the mean: mean ± t_{0.975,n-1} s/sqrt(n),
// cut at [range_low, range_high], the values the metric can take. With fewer than two values std,
// half_width, low() and high() are NaN.
struct SampleStats {
  int64_t n = 0;
  double mean = 0, std = 0;
  double half_width = 0;  // t_{0.975,n-1} s / sqrt(n), before the cut
  double range_low = -std::numeric_limits<double>::infinity();
  double range_high = std::numeric_limits<double>::infinity();
  double low() const { return std::max(mean - half_width, range_low); }
  double high() const { return std::min(mean + half_width, range_high); }
  // Whether the cut moved a bound: the t interval reached past the metric's range.
  bool cut() const { return mean - half_width < range_low || mean + half_width > range_high; }
};
// REQUIRES: !values.empty(), range_low <= range_high. Sums in the order given (deterministic).
SampleStats sample_stats(std::span<const double> values,
                         double range_low = -std::numeric_limits<double>::infinity(),
                         double range_high = std::numeric_limits<double>::infinity());

// A headline metric of the seeds summary: its stored name, its unit and the factor from the stored
// value (seconds for latencies) to that unit.
struct SeedMetric {
  std::string_view name;
  std::string_view unit;  // "" for counts and fractions
  double scale;
  // The largest value the metric can take (1 for fractions, else unbounded); none is below 0.
  double range_high = std::numeric_limits<double>::infinity();
};
std::span<const SeedMetric> seed_summary_metrics();

struct SeedAggregate {
  SeedMetric metric;
  SampleStats stats;  // in the metric's unit
};

// The aggregate of each seed_summary_metrics() entry over `runs` (each run's metrics), over the runs
// that have it; metrics no run has are left out.
std::vector<SeedAggregate> aggregate_seed_runs(const std::vector<std::vector<Metric>>& runs);

// The same from the database: the done points of sweep `sweep_id`, in point order. Also sets
// *runs to how many runs were aggregated.
Result<std::vector<SeedAggregate>> read_seed_aggregate(Database& db, int64_t sweep_id, int64_t* runs);

// How many decimals to print a value with whose interval is half_width wide: three significant
// digits of the half-width (of the value when the width is 0 or NaN), 0 to 6. The bootstrap's
// summary (analysis/reports/bootstrap.h) prints its intervals the same way.
int interval_decimals(double value, double half_width);
// v with that many decimals ("%.*f").
std::string fixed_decimals(double v, int decimals);

// One line per metric: "ttft_p99 (ms)   812.3   [771.1, 853.5]   std 65.1   (10 seeds)".
void print_seed_summary(std::ostream& out, const std::vector<SeedAggregate>& aggregate);

// [{"metric", "unit", "n", "mean", "std", "ci_low", "ci_high", "ci_method"}], in the metric's unit
// (null where not defined); ci_method is kSeedIntervalMethod.
nlohmann::json seed_aggregate_json(const std::vector<SeedAggregate>& aggregate);

}  // namespace servesim
