// Reader of a generic CSV trace: a header row naming the columns, then one request per row.
//
// Which columns hold what is given by CsvColumns (replay.h): arrival (seconds, a number from 0 to
// 1e9), prompt_tokens and output_tokens (integers >= 1), and optionally id (a non-empty string,
// unique in the file) and max_tokens (an integer >= 1, or an empty cell for "not given"). Columns are
// found by name in any order; other columns are ignored. The Vidur reader (vidur_trace.h) is this
// reader with Vidur's column names.
#pragma once

#include <vector>

#include "sim/request.h"
#include "sim/result.h"
#include "workloads/csv_reader.h"
#include "workloads/replay.h"

namespace servesim {

// Reads the rows of the csv trace options.path with the columns options.columns, in file order, at
// most options.limit of them (0: all): id (the id column's, else "r<index>"), line, arrival (ns, as
// written, not yet shifted), prompt, output and max tokens. Errors: see replay_trace; a duplicate id
// names both lines.
Result<std::vector<RequestSpec>> read_csv_trace(const ReplayOptions& options);

// read_csv_trace, the rows going to `sink` as they are read; the first error stops it, and the row
// that add() gave last is then incomplete.
Status read_csv_trace_rows(const ReplayOptions& options, TraceRowSink& sink);

}  // namespace servesim
