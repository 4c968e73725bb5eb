// Reader of Vidur's trace files (microsoft/vidur, its trace_replay request generator).
//
// A CSV file whose header names arrived_at (seconds), num_prefill_tokens (the prompt) and
// num_decode_tokens (the output), among any other columns (pandas' unnamed index column, request
// types, ...), found by name. Token counts written as floats ("512.0", as pandas writes them) are
// accepted when whole. It is the generic csv reader (csv_trace.h) with these column names.
#pragma once

#include <vector>

#include "sim/request.h"
#include "sim/result.h"
#include "workloads/replay.h"

namespace servesim {

// Vidur's column names, as CsvColumns.
CsvColumns vidur_columns();

// Reads the rows of the Vidur trace options.path, in file order, at most options.limit of them (0:
// all): id "r<index>", line, arrival (ns, not yet shifted), prompt and output tokens.
// options.columns is not used. Errors: see replay_trace.
Result<std::vector<RequestSpec>> read_vidur_trace(const ReplayOptions& options);

}  // namespace servesim
