// `sim validate`: how well a cost model predicted a measured run. For every iteration of a run from
// a measuring backend (cpu or cuda), the relative error of the prediction logged beside the
// measured duration; summarised overall, by kind of iteration (prefill-only, decode-only, mixed)
// and by batch size, as a table and as rows in `metrics` (validate_*). With a hardware file, the
// run's batches (its batch_items rows) are re-priced by a roofline of that file instead: how well
// would this file have predicted the run (before and after `sim calibrate`, say).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "sim/result.h"

namespace servesim {

// Reads the run (default: the latest) and prints the table. Without hardware_path, the stored
// predictions are judged and the summary is stored in the run's `metrics` rows; with it, every
// iteration is re-priced with a RooflineModel of that file and the run's model (fp32 for the cpu
// backend, else the model's dtype; tp 1) and nothing is stored. Errors: no database, no such run,
// a run without predictions; with hardware_path, a run without batch_items ("run N logged no
// batches"), an unreadable hardware or model file.
Status validate_run(const std::string& db_path, std::optional<int64_t> run_id, std::ostream& out,
                    std::optional<std::string> hardware_path = {});

}  // namespace servesim
