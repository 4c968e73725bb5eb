// `sim validate --measured`: how far the roofline is from measured batches (analysis/calibration/measured.h).
// Each batch is priced with comparable_price (only the parts of the iteration its time covers) and
// its error is (predicted - measured) / measured: positive when the roofline is too slow. The
// errors are summarised overall, by kind (prefill, decode, mixed, linear-only) and by kind and size
// band, with the MAPE (mean |error|), its median and 90th percentile, and the bias (mean signed
// error); the worst shapes are listed. Size bands: a decode batch of 1-16 or 17+ sequences (few
// sequences: the weights' read dominates; many: the KV cache's), any other batch of 1-512 or 513+
// new tokens (where GEMM efficiency is still climbing, and where it has levelled off).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/calibration/measured.h"
#include "analysis/reports/report.h"
#include "backends/roofline.h"

namespace servesim {

// One priced batch.
struct PricedBatch {
  const MeasuredBatch* batch;
  double predicted = 0;  // s, comparable_price
  double error = 0;      // (predicted - measured) / measured
};

struct ErrorSummary {
  std::string group;  // "all", "decode", "decode batch 17+"
  size_t count = 0;
  double mape = 0, p50 = 0, p90 = 0;  // of |error|
  double bias = 0;                    // mean error: > 0 the roofline is too slow, < 0 too fast
};

struct MeasuredValidation {
  std::vector<PricedBatch> priced;    // every batch, in input order
  ErrorSummary all;
  std::vector<ErrorSummary> by_kind;  // prefill, decode, mixed, linear-only: those present
  std::vector<ErrorSummary> by_band;  // each kind's bands, small before large: those present
  std::vector<size_t> worst;          // indices into priced, largest |error| first (at most 10)
};

// "batch 1-16" | "batch 17+" (decode) | "1-512 tokens" | "513+ tokens" (any other kind).
const char* size_band(const MeasuredBatch& b);

// Prices every batch. REQUIRES: !batches.empty(); they outlive the result.
MeasuredValidation validate_measured(const RooflineModel& roofline, const std::vector<MeasuredBatch>& batches);

// What the report says it compared.
struct MeasuredSource {
  std::string path, hardware, model;  // as the user named them
  int32_t tp = 1;
  std::vector<std::string> notes;     // the reader's (what it skipped or averaged)
};

// What `sim validate --measured` was asked to compare: files already resolved from preset names.
struct MeasuredRequest {
  std::string path;           // a Vidur profile folder or a CSV of ours
  std::string hardware_path;  // a hardware TOML file
  std::string model_path;     // a config.json
  int32_t tp = 1;             // tensor-parallel degree of the roofline (and of Vidur's rows)
  ReportFormat format = ReportFormat::kText;
};
// Loads the hardware and model, reads the measurements (a folder as Vidur's profile, a file as our
// CSV), prices them with a roofline at the model's dtype and tp, and prints the report. Errors: the
// readers' and loaders', a tp the model cannot be split by.
Status validate_measured_path(const MeasuredRequest& request, std::ostream& out);

// The report as text (a table, the worst shapes, the notes) or JSON (the same, fractions not
// percentages, plus every shape). REQUIRES: format is kText or kJson.
void print_measured_validation(const MeasuredValidation& v, const MeasuredSource& source, ReportFormat format,
                               std::ostream& out);

}  // namespace servesim
