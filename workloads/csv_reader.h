// Line-by-line reading of trace files, and the small parsers the trace readers share.
//
// A LineReader streams a text file one line at a time (never the whole file in memory) and knows the
// number of the line it last read, so that every message can say `PATH:LINE: ...`. It strips the line
// ending (LF or CRLF) and a UTF-8 byte-order mark at the start of line 1. A CsvHeader is a trace's
// first line split into column names; for_each_csv_row feeds the data rows after it, split into
// fields, to a reader's callback. The cell parsers check one value and name the column in their
// messages: `PATH:LINE: COLUMN: expected an integer >= 1, got 'abc'`.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/request.h"
#include "sim/result.h"

namespace servesim {

// The longest line a trace may have: a row of a trace is a few hundred bytes (a Mooncake row with
// its hash ids a few kilobytes).
inline constexpr size_t kMaxLineBytes = 1 << 20;

class LineReader {
 public:
  // Opens `path` for reading. Errors: check_readable_file's (sim/config/toml_fields.h): a folder, a
  // device or a pipe is refused.
  static Result<LineReader> open(const std::string& path);

  // Reads the next line into `line`, without its line ending and (on line 1) without a UTF-8 BOM.
  // Returns false at the end of the file, or on a line longer than kMaxLineBytes or a read error;
  // status() tells which. `line` is then unspecified.
  bool next(std::string& line);
  // The same, as a view of the line that stays valid until the next call: of the reader's buffer
  // where the line lies whole in it (no copy), else of a string the reader gathers it in.
  bool next(std::string_view& line);
  // Ok, or why next() stopped before the end of the file ("PATH:LINE: line longer than ...").
  const Status& status() const { return status_; }

  // The number (1-based) of the line last read; 0 before the first.
  int32_t line_number() const { return line_number_; }
  // How many rows the whole file holds, judging by the bytes that the `rows` read so far took
  // (lines read since the header, say), plus an eighth; at most `limit` unless it is 0. For
  // reserving room: a guess, never a bound.
  size_t rows_expected(size_t rows, int64_t limit) const;
  const std::string& path() const { return path_; }

  // "PATH:LINE: message", at the line last read.
  Error error(std::string_view message) const;
  // "PATH:LINE: COLUMN: expected WHAT, got 'TEXT'", at the line last read.
  Error expected(std::string_view column, std::string_view what, std::string_view text) const;

 private:
  LineReader(std::string path, std::ifstream in) : path_(std::move(path)), in_(std::move(in)) {}
  // Reads the next chunk of the file into buf_; false at its end.
  bool refill();

  std::string path_;
  std::ifstream in_;
  std::vector<char> buf_;  // the file, a chunk at a time: buf_[pos_, end_) is not read yet
  size_t pos_ = 0, end_ = 0;
  std::string carry_;  // a line that runs past the end of buf_, gathered
  uint64_t chunk_start_ = 0;  // the file offset of buf_[0]
  uint64_t start_ = 0;        // the offset of the line after the first (rows_expected)
  int32_t line_number_ = 0;
  Status status_ = Ok{};
};

// Text from a file for a message: control and non-ASCII bytes as \xNN, cut to about 60 characters,
// so that a binary file never writes raw bytes to the terminal.
std::string printable(std::string_view text);

// True when `line` holds nothing but spaces and tabs. Blank lines hold no row and are skipped.
bool is_blank(std::string_view line);

// Splits one CSV line at its commas into `fields` (which is cleared first; its capacity is reused).
// A field in double quotes may hold commas, and "" inside it stands for one quote. Spaces and tabs
// around a field are removed. Returns false when a quoted field is not closed.
bool split_csv(std::string_view line, std::vector<std::string>& fields);
// The same into views: of `line` itself when it holds no quote (no copy), else of `unquoted`,
// where the fields are written without their quotes. Valid while both are.
bool split_csv(std::string_view line, std::vector<std::string>& unquoted,
               std::vector<std::string_view>& fields);

// The column names of a CSV trace, read from its first line.
class CsvHeader {
 public:
  // Reads line 1 of `in` as the header. Errors: "PATH: empty trace (no rows)" for an empty file,
  // "PATH:1: ..." for a blank or malformed header line.
  static Result<CsvHeader> read(LineReader& in);

  size_t size() const { return names_.size(); }
  bool has(std::string_view name) const;
  // The index of the column called `name` (exact match).
  // Error: "PATH:1: missing column 'NAME' (found: a, b, c)".
  Result<size_t> find(std::string_view name) const;
  // The names as a list for messages: "a, b, c".
  std::string list() const;

 private:
  std::string path_;
  std::vector<std::string> names_;
};

// After this many rows, a trace reader judges the rest of the file by their bytes, and room is
// reserved for it (rather than the table moving as it doubles, every copy new pages to fault in).
inline constexpr size_t kRowsBeforeReserving = 1024;

// Where a trace reader (read_csv_trace_rows, read_azure_trace_rows) puts the rows, one after the
// other in file order.
class TraceRowSink {
 public:
  virtual ~TraceRowSink() = default;
  // How many rows the file is judged to hold (LineReader::rows_expected): said once, after the
  // first kRowsBeforeReserving rows, for reserving room.
  virtual void reserve(size_t rows) = 0;
  // A default RequestSpec for the next row, which the reader then fills in.
  virtual RequestSpec& add() = 0;
  // The row that add() gave last is complete. Returning false stops the reading (without an error).
  virtual bool added() { return true; }
};

// A TraceRowSink into a vector: what read_csv_trace and read_azure_trace give.
class TraceRowVector final : public TraceRowSink {
 public:
  std::vector<RequestSpec> rows;
  void reserve(size_t n) override { rows.reserve(n); }
  RequestSpec& add() override { return rows.emplace_back(); }
};

// Calls row(fields) for each data row after the header, in file order, skipping blank lines, until
// the end of the file or until `limit` rows have been handed over (limit 0: no limit). Stops at the
// first error, from the callback or its own: "PATH:LINE: expected N fields, as in the header, got M"
// or an unclosed quote. If the file has no data row at all: "PATH: empty trace (no rows)".
// With a `sink` (a trace reader's, whose add() the callback fills), sink->added() is called after
// each row, and the reading ends without an error once it returns false.
// `in` must have just read the header.
Status for_each_csv_row(LineReader& in, const CsvHeader& header, int64_t limit,
                        const std::function<Status(std::span<const std::string_view>)>& row,
                        TraceRowSink* sink = nullptr);

// A token count: an integer >= 1 that fits int32_t. A trailing ".0" (as pandas writes integers of
// a float column) is accepted. Errors name `column` and the text as written.
Result<int32_t> parse_token_count(const LineReader& in, std::string_view column,
                                  std::string_view text);

// A request priority: an integer that fits int32_t, negative allowed (".0" accepted, as above).
Result<int32_t> parse_priority(const LineReader& in, std::string_view column, std::string_view text);

// A time in seconds: a finite decimal number from 0 to 1e9 (kMaxArrivalSeconds).
Result<double> parse_seconds(const LineReader& in, std::string_view column, std::string_view text);
// A cell of digits with an optional fraction ("4.314579") whose value is from_chars' exactly, at a
// fraction of its cost; nullopt for anything else (signs, exponents, long mantissas), which
// from_chars then reads.
std::optional<double> plain_decimal(std::string_view text);

}  // namespace servesim
