// `sim compare RUN RUN ...` (the metrics of several runs side by side, with each run's absolute and
// relative difference from the first) and `sim list runs` (one line per run). Only read.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/reports/report.h"
#include "sim/result.h"

namespace servesim {

// Prints the runs' metrics side by side (the union of their metrics, in metric_names() order),
// each run after the first with its difference from the first (b - a) and the relative difference
// ((b - a) / a; none when a is 0). Text shows latencies in milliseconds (steps for the unit
// backend), as the summary does; csv and json keep the stored units (seconds). The runs' header
// (name, status, policy, backend, hardware, model, workload, deployment) comes first; runs of
// different workloads or backends are compared with a warning. Errors: fewer than two runs, a run
// that does not exist (naming those that do), a repeated run, a format other than text, csv or json.
Status print_comparison(const std::string& db_path, const std::vector<int64_t>& run_ids, ReportFormat format,
                        std::ostream& out);

// Prints every run of the database, oldest first: id, name, status (a running run whose process is
// gone shows as abandoned), policy, backend, hardware, model, GPUs, requests (completed and
// rejected), request throughput, p99 TTFT and TPOT (ms), and when it started. Text, csv or json.
Status print_run_list(const std::string& db_path, ReportFormat format, std::ostream& out);

}  // namespace servesim
