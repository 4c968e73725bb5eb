// The model-uncertainty band: `sim --model-uncertainty [N]` reruns a workload once with the
// hardware file's own values and once per row of its [calibration] table (the fitted keys of each
// bootstrap resample of the measurements that `sim calibrate` fitted it to), as a sweep of kind
// "model-uncertainty" over the key `hardware_sample` (-1: the file's values; 0, 1, ...: its rows).
//
// Method: the bootstrap resamples stand for the fitted parameters' sampling distribution (each a fit
// to the measurements resampled with replacement), jointly, so that keys that trade against each
// other move together. Each metric's band is the 2.5 % and 97.5 % points (numpy's linear percentile)
// of its value over the resampled hardware: how far the prediction moves with the calibration's own
// uncertainty, for this workload, on the same arrivals (the seed is fixed). It does not include the
// error the model makes with the best parameters (the calibration's held-out MAPE says that), nor the
// workload's randomness (--seeds, --bootstrap).
//
// As with seed_stats.h, nothing is stored: the band is derived from the runs' metrics rows whenever
// it is read (`sim --model-uncertainty` and `sim report --sweep ID` print the same numbers).
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/storage/database.h"
#include "analysis/reports/seed_stats.h"
#include "sim/result.h"

namespace servesim {

struct ModelBand {
  SeedMetric metric;   // as the seeds summary: name, unit, scale
  double value = 0;    // with the file's own values (NaN when that run is missing)
  double low = 0, high = 0;  // 2.5 % and 97.5 % over the samples' runs, in the metric's unit
  int64_t samples = 0;       // runs behind low and high
};

// The band of each seed_summary_metrics() entry over the done points of sweep `sweep_id` (kind
// "model-uncertainty"). Errors: a sweep without the hardware_sample key.
Result<std::vector<ModelBand>> read_model_band(Database& db, int64_t sweep_id);

// One line per metric: "ttft_p99 (ms)   812.3   [771.1, 853.5]   (100 samples)".
void print_model_band(std::ostream& out, const std::vector<ModelBand>& band);

// [{"metric", "unit", "value", "low", "high", "samples"}].
nlohmann::json model_band_json(const std::vector<ModelBand>& band);

}  // namespace servesim
