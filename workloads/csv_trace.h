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
#include "workloads/replay.h"

namespace servesim {

// Reads the rows of the csv trace options.path with the columns options.columns, in file order, at
// most options.limit of them (0: all): id (the id column's, else "r<index>"), line, arrival (ns, as
// written, not yet shifted), prompt, output and max tokens. Errors: see replay_trace; a duplicate id
// names both lines.
Result<std::vector<RequestSpec>> read_csv_trace(const ReplayOptions& options);

// Where read_csv_trace_rows puts the rows, one after the other in file order.
class TraceRowSink {
 public:
  virtual ~TraceRowSink() = default;
  // How many rows the file is judged to hold (LineReader::rows_expected): said once, after the
  // first 1,024 rows, for reserving room.
  virtual void reserve(size_t rows) = 0;
  // A default RequestSpec for the next row, which the reader then fills in.
  virtual RequestSpec& add() = 0;
  // The row that add() gave last is complete. Returning false stops the reading (without an error).
  virtual bool added() { return true; }
};

// read_csv_trace, the rows going to `sink` as they are read; the first error stops it, and the row
// that add() gave last is then incomplete.
Status read_csv_trace_rows(const ReplayOptions& options, TraceRowSink& sink);

}  // namespace servesim
