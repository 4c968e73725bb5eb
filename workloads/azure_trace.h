// Reader of the Azure LLM inference traces (Azure/AzurePublicDataset, as used by Splitwise, ISCA'24).
//
// A CSV file whose header names TIMESTAMP, ContextTokens and GeneratedTokens (found by name, in any
// order, among other columns). TIMESTAMP is wall-clock time `YYYY-MM-DD HH:MM:SS.fffffff` (a space or
// a 'T' between date and time; 0 to 9 fractional digits); it is read as a proleptic Gregorian date
// with no time zone, by arithmetic alone (no locale, no strptime), keeping nanosecond precision.
// A row's arrival is its time minus the first row's; ContextTokens is the prompt length,
// GeneratedTokens the output length.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/request.h"
#include "sim/result.h"
#include "workloads/csv_reader.h"
#include "workloads/replay.h"

namespace servesim {

// A wall-clock time: seconds since 1970-01-01 00:00:00 plus nanoseconds (0 to 999,999,999).
struct WallTime {
  int64_t seconds = 0;
  int32_t nanos = 0;
};

// Parses `YYYY-MM-DD HH:MM:SS[.f...]` (or with 'T'). nullopt when the text is not such a time or
// names an impossible one (month 13, February 30, hour 24, ...).
std::optional<WallTime> parse_wall_time(std::string_view text);

// Reads the rows of the Azure trace options.path, in file order, at most options.limit of them
// (0: all): id "r<index>", line, arrival in ns after the first row (negative for a row earlier than
// the first), prompt and output tokens. Errors: see replay_trace; a row more than 1e9 s away from
// the first is an error.
Result<std::vector<RequestSpec>> read_azure_trace(const ReplayOptions& options);
// read_azure_trace, the rows going to `sink` as they are read; the first error stops it.
Status read_azure_trace_rows(const ReplayOptions& options, TraceRowSink& sink);

}  // namespace servesim
