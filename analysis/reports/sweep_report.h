// `sim report --sweep ID`: a sweep's (or search's) points as one table, with the swept values as
// columns and the metrics a planner reads, as text, CSV or JSON. Only reads.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/reports/report.h"
#include "sim/result.h"

namespace servesim {

// The metric columns of the table, in order.
const std::vector<std::string>& sweep_table_metrics();

// Prints sweep `sweep_id` (default: the latest) of the database at db_path: one row per point in
// point order (point, the swept keys, status, run, the metrics of sweep_table_metrics()); the
// text form ends with the sweep's answer, if a search gave one, and the errors of failed points.
Status print_sweep_report(const std::string& db_path, std::optional<int64_t> sweep_id,
                          ReportFormat format, std::ostream& out);

}  // namespace servesim
