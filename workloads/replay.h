// Trace replay: a recorded trace file in, the Workload that replays it out.
//
// Four formats are read, one reader per file pair (azure_trace.h, vidur_trace.h, mooncake_trace.h,
// csv_trace.h); each streams the file line by line and keeps only one RequestSpec per row. This file
// holds what they share: the [replay] table of a workload file, format detection and the entry point,
// which orders the rows and rewrites their arrival times:
//   1. the first `limit` rows of the file are read (all of them when limit is 0);
//   2. rows are sorted by arrival, stably (rows need not be sorted in the file);
//   3. arrivals are shifted so that the earliest is 0;
//   4. with rate > 0 every arrival is multiplied by (observed mean rate / rate), where the observed
//      rate is (n - 1) / (last - first), so that the replay's mean rate is `rate`; otherwise by
//      time_scale.
// Requests are named r0, r1, ... in file order (before sorting), unless a csv trace names an id
// column. Every row must have a prompt and an output of at least one token: nothing is dropped or
// clipped, a bad row is an error that names the file and the line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <toml++/toml.h>

#include "sim/result.h"
#include "workloads/priorities.h"
#include "workloads/workload.h"

namespace servesim {

enum class TraceFormat { kAzure, kVidur, kMooncake, kCsv };

// The format's name in [replay].format and in messages: "azure", "vidur", "mooncake", "csv".
const char* trace_format_name(TraceFormat format);

// Column names of a csv trace. Arrival is in seconds; id and max_tokens are optional ("": absent).
struct CsvColumns {
  std::string arrival = "arrival";
  std::string prompt_tokens = "prompt_tokens";
  std::string output_tokens = "output_tokens";
  std::string id = "";          // optional: the request ids (non-empty, unique)
  std::string max_tokens = "";  // optional: the caller's limit; an empty cell means not given
  std::string priority = "";    // optional: the request's priority (an integer; empty cell: 0)
};

struct ReplayOptions {
  std::string path;                   // the trace file (already resolved)
  std::optional<TraceFormat> format;  // nullopt: detected (detect_trace_format)
  int64_t limit = 0;                  // 0: every row; else the first `limit` rows of the file
  double rate = 0;                    // > 0: rescale arrivals so the mean rate is this (req/s)
  double time_scale = 1.0;            // multiplies every arrival (after the shift to 0); > 0
  int32_t block_tokens = 512;         // mooncake: prompt tokens per hash id
  CsvColumns columns;                 // csv: column names
  std::optional<PriorityOptions> priority;  // [replay.priority]: priorities drawn per row
  uint64_t seed = 0;                  // the seed of those draws (the run's --seed, else 0)
};

// Reads a [replay] table of the workload file `workload_path`. Keys: path (required; relative to the
// workload file's folder), format, limit (>= 1), rate (> 0), time_scale (> 0), block_tokens (>= 1,
// mooncake), columns (csv: a table with arrival, prompt_tokens, output_tokens, id, max_tokens,
// priority), priority (a table of values and weights to draw priorities from; workloads/priorities.h).
// `columns` without `format` means format = "csv". Errors, one line, `PATH:LINE:COL: replay.KEY: ...`:
// an unknown or mistyped key, rate together with time_scale, columns or block_tokens with a format
// that has no use for them. The trace file itself is not opened here.
Result<ReplayOptions> parse_replay_table(const toml::table& replay, const std::string& workload_path);

// Reads the trace file into a Workload (seed 0), as described at the top of this file. Errors, one
// line: "PATH: cannot open file", "PATH: empty trace (no rows)", "PATH:LINE: ..." for a bad row,
// "PATH: rate: ..." when the trace spans no time, and invalid options.
Result<Workload> replay_trace(const ReplayOptions& options);

// The format of the trace at `path`: mooncake for a .jsonl file or one whose first line is a JSON
// object; else, from the CSV header: azure (TIMESTAMP, ContextTokens, GeneratedTokens), vidur
// (arrived_at, num_prefill_tokens, num_decode_tokens), or csv when the header has `columns`' arrival,
// prompt_tokens and output_tokens. Error when it is none of them, listing the columns found.
Result<TraceFormat> detect_trace_format(const std::string& path, const CsvColumns& columns = {});

// True for a path that names a trace file rather than a workload TOML: .csv or .jsonl (any case).
bool is_trace_path(const std::string& path);

}  // namespace servesim
