// `sim validate`: how well a cost model predicted a measured run. For every iteration of a run from
// a measuring backend (cpu or cuda), the relative error of the prediction logged beside the
// measured duration; summarised overall, by kind of iteration (prefill-only, decode-only, mixed)
// and by batch size, as a table and as rows in `metrics` (validate_*).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "sim/result.h"

namespace servesim {

// Reads the run (default: the latest), prints the table, and stores the summary metrics in the
// run's `metrics` rows. Errors: no database, no such run, a run without predictions.
Status validate_run(const std::string& db_path, std::optional<int64_t> run_id, std::ostream& out);

}  // namespace servesim
