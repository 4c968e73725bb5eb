// What a user reads after a run: the end-of-run summary table (in the style of `vllm bench serve`)
// and `sim report`, which reads a run back from the database and prints it as text, JSON or CSV.
//
// Everything here only reads: the metrics come in as values (from MetricsAccumulator::compute() at
// the end of a run, or from the metrics table), and nothing is derived that the database lacks.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/reports/bootstrap.h"
#include "analysis/metrics/metrics.h"
#include "sim/result.h"

namespace servesim {

enum class ReportFormat { kText, kJson, kCsv, kVllmJson };

struct SummaryHeader {
  int64_t run_id = 0;
  std::string db_path{}, name{}, status{}, policy{}, backend{}, hardware{}, model{}, workload{};
  std::string mirrors{};  // the engine release the policy mirrors ("vLLM 0.33.0"), if it names one
  int32_t replicas = 1, tp = 1;
  // The percentiles printed after each latency's mean and median (vLLM's --metric-percentiles);
  // empty: 90 and 99.
  std::vector<double> percentiles{};
};

// The engine release a run's policy mirrors, from its recorded configuration (TOML): "vLLM X" when
// [policy] has vllm_version = "X", else "".
std::string policy_release(std::string_view config_toml);

// The --metric-percentiles a run was made with, from its recorded configuration (TOML); empty
// when none were given.
std::vector<double> run_percentiles(std::string_view config_toml);

// The line the summary prints under the prefix cache's hit rates when no request's prompt names
// its content (prefix_cacheable_requests is 0).
inline constexpr const char* kNoPromptContent =
    "  note: no prompt here has content ids or block hashes, so none can share a prefix: the hit rate "
    "is not a finding";

// Prints the summary table: label column padded to 40 characters as vLLM's. With backend == "unit"
// times are in iterations and labelled "steps" (rates per step); otherwise durations are in seconds
// and latencies in milliseconds, as vLLM prints them. A line whose metric is absent is left out,
// and so is a latency section with no metrics. Lines for a status other than "done" (or empty), the
// hardware and model (when either is set), capped requests (when any) and kNoPromptContent (when
// prefix_cacheable_requests is 0) appear only when relevant.
void print_summary(std::ostream& out, const SummaryHeader& header,
                   const std::vector<Metric>& metrics);

class Database;

// One stored run: its runs row (column name and JSON value, in table order) and its metrics (in
// metric_names() order, then any other stored names alphabetically).
struct StoredRun {
  nlohmann::ordered_json row = nlohmann::ordered_json::object();
  std::vector<Metric> metrics;
};

// Reads run run_id (default: the latest). Errors: no runs, no run with that id (naming the ids
// that exist).
Result<StoredRun> read_stored_run(Database& db, std::optional<int64_t> run_id);

// `sim report`: reads run run_id (default: the latest) of the database at db_path and prints it:
// kText: print_summary from the stored rows (then the run's error, if any); kJson: {"run": {every
// runs column, the configuration as JSON}, "metrics": {name: value}}; kCsv: "name,value" then one
// line per metric; kVllmJson: vLLM's result file (analysis/reports/vllm_result.h). Metrics come in
// metric_names() order, then any other stored names alphabetically. percentiles (vLLM's
// --metric-percentiles; empty: the run's own, else 90 and 99 in text and 99 in vllm-json) are
// printed in text and vllm-json; one the run did not store is read from its distributions or
// computed from its requests rows, and added to json and csv too. With `bootstrap`, also the
// bootstrap over the run's requests (analysis/reports/bootstrap.h): after the summary in text, as
// "bootstrap" in json. Errors: no file at db_path, not a servesim database, no runs, no run with
// that id (naming the ids that exist); with bootstrap, csv or vllm-json, or a run without requests
// rows.
Status print_report(const std::string& db_path, std::optional<int64_t> run_id, ReportFormat format,
                    std::ostream& out, const std::vector<double>& percentiles = {},
                    const std::optional<BootstrapOptions>& bootstrap = std::nullopt);

// Parses "text" | "json" | "csv" | "vllm-json"; anything else is an Error naming them.
Result<ReportFormat> parse_report_format(std::string_view s);

}  // namespace servesim
