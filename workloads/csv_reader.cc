#include "workloads/csv_reader.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "sim/request.h"
#include "sim/config/toml_fields.h"
#include "workloads/arrival.h"

namespace servesim {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<LineReader> LineReader::open(const std::string& path) {
  if (Status s = check_readable_file(path); !s.ok()) return s.error();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open file"};
  return LineReader(path, std::move(in));
}

bool LineReader::refill() {
  constexpr size_t kChunk = size_t{1} << 16;
  buf_.resize(kChunk);
  chunk_start_ += end_;
  in_.read(buf_.data(), static_cast<std::streamsize>(kChunk));
  pos_ = 0;
  end_ = static_cast<size_t>(in_.gcount());
  return end_ > 0;
}

bool LineReader::next(std::string_view& line) {
  if (!status_.ok()) return false;
  if (pos_ == end_ && !refill()) return false;
  ++line_number_;
  const char* from = buf_.data() + pos_;
  if (const auto* newline = static_cast<const char*>(std::memchr(from, '\n', end_ - pos_))) {
    line = std::string_view(from, static_cast<size_t>(newline - from));  // in the chunk: no copy
    pos_ += line.size() + 1;
  } else {  // the line runs on into the next chunks: gathered in carry_
    carry_.clear();
    while (true) {
      from = buf_.data() + pos_;
      const auto* nl = static_cast<const char*>(std::memchr(from, '\n', end_ - pos_));
      const size_t take = nl != nullptr ? static_cast<size_t>(nl - from) : end_ - pos_;
      if (carry_.size() + take > kMaxLineBytes) {
        status_ = error("line longer than " + std::to_string(kMaxLineBytes) + " bytes; is this a trace file?");
        return false;
      }
      carry_.append(from, take);
      pos_ += take;
      if (nl != nullptr) {
        ++pos_;
        break;
      }
      if (!refill()) break;  // the last line, without a newline
    }
    line = carry_;
  }
  if (line.ends_with('\r')) line.remove_suffix(1);
  if (line_number_ == 1) {
    if (line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    start_ = chunk_start_ + pos_;
  }
  return true;
}

bool LineReader::next(std::string& line) {
  std::string_view view;
  if (!next(view)) return false;
  line.assign(view);
  return true;
}

size_t LineReader::rows_expected(size_t rows, int64_t limit) const {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path_, ec);
  const uint64_t read = chunk_start_ + pos_ - start_;
  if (ec || rows == 0 || read == 0 || size <= chunk_start_ + pos_) return rows;
  const double per_row = static_cast<double>(read) / static_cast<double>(rows);
  double expected = static_cast<double>(rows) + static_cast<double>(size - chunk_start_ - pos_) / per_row * 1.125;
  if (limit > 0) expected = std::min(expected, static_cast<double>(limit));
  return static_cast<size_t>(std::min(expected, 1e9));
}

std::string printable(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (out.size() >= 60) {
      out += "...";
      break;
    }
    if (u >= 0x20 && u < 0x7f) {
      out += ch;
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

Error LineReader::error(std::string_view message) const {
  std::string text = path_ + ":" + std::to_string(line_number_) + ": ";
  text.append(message);
  return Error{std::move(text)};
}

Error LineReader::expected(std::string_view column, std::string_view what,
                           std::string_view text) const {
  std::string message(column);
  message.append(": expected ").append(what).append(", got '").append(printable(text)).append("'");
  return error(message);
}

bool is_blank(std::string_view line) { return trim(line).empty(); }

bool split_csv(std::string_view line, std::vector<std::string>& fields) {
  fields.clear();
  size_t i = 0;
  while (true) {
    std::string field;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {  // "" inside quotes: one quote
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          closed = true;
          break;
        }
        field += line[i++];
      }
      if (!closed) return false;
      const size_t comma = line.find(',', i);
      i = comma == std::string_view::npos ? line.size() : comma;
    } else {
      const size_t comma = line.find(',', i);
      const size_t end = comma == std::string_view::npos ? line.size() : comma;
      field = std::string(trim(line.substr(i, end - i)));
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= line.size()) return true;
    ++i;  // past the comma
  }
}

bool split_csv(std::string_view line, std::vector<std::string>& unquoted,
               std::vector<std::string_view>& fields) {
  fields.clear();
  // One pass: while no quote comes, every field is a piece of the line.
  size_t start = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == ',') {
      fields.push_back(trim(line.substr(start, i - start)));
      start = i + 1;
    } else if (line[i] == '"') {  // quotes to take off: their fields are new text
      if (!split_csv(line, unquoted)) return false;
      fields.assign(unquoted.begin(), unquoted.end());
      return true;
    }
  }
  fields.push_back(trim(line.substr(start)));
  return true;
}

Result<CsvHeader> CsvHeader::read(LineReader& in) {
  CsvHeader header;
  header.path_ = in.path();
  std::string line;
  if (!in.next(line)) {
    if (!in.status().ok()) return in.status().error();
    return Error{in.path() + ": empty trace (no rows)"};
  }
  if (is_blank(line)) return in.error("expected a header row naming the columns, got a blank line");
  if (!split_csv(line, header.names_)) return in.error("malformed CSV header: unclosed quote");
  return header;
}

bool CsvHeader::has(std::string_view name) const {
  for (const std::string& n : names_) {
    if (n == name) return true;
  }
  return false;
}

Result<size_t> CsvHeader::find(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  return Error{path_ + ":1: missing column '" + std::string(name) + "' (found: " + printable(list()) +
               ")"};
}

std::string CsvHeader::list() const {
  std::string out;
  for (const std::string& n : names_) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

Status for_each_csv_row(LineReader& in, const CsvHeader& header, int64_t limit,
                        const std::function<Status(std::span<const std::string_view>)>& row, TraceRowSink* sink) {
  std::string_view line;
  std::vector<std::string> unquoted;
  std::vector<std::string_view> fields;
  int64_t rows = 0;
  while ((limit == 0 || rows < limit) && in.next(line)) {
    if (is_blank(line)) continue;
    if (!split_csv(line, unquoted, fields)) return in.error("malformed CSV row: unclosed quote");
    if (fields.size() != header.size()) {
      return in.error("expected " + std::to_string(header.size()) + " fields, as in the header, got " +
                      std::to_string(fields.size()));
    }
    if (Status s = row(fields); !s) return s;
    ++rows;
    if (sink != nullptr && !sink->added()) return Ok{};  // the sink has all it wants
  }
  if (!in.status().ok()) return in.status();
  if (rows == 0) return Error{in.path() + ": empty trace (no rows)"};
  return Ok{};
}

namespace {

// An integer cell, as a float column may write it ("123.0"): its value, or why not.
struct IntegerCell {
  bool ok = false;            // a whole integer that fits int64_t
  bool out_of_range = false;  // an integer too large for int64_t
  int64_t value = 0;
};

IntegerCell parse_integer_cell(std::string_view text) {
  std::string_view digits = text;
  if (const size_t dot = digits.find('.'); dot != std::string_view::npos) {
    // "123.0" or "123.00": an integer written by a float column; "123.5" is not.
    const std::string_view fraction = digits.substr(dot + 1);
    if (!fraction.empty() && fraction.find_first_not_of('0') == std::string_view::npos) {
      digits = digits.substr(0, dot);
    }
  }
  IntegerCell cell;
  const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), cell.value);
  cell.out_of_range = res.ec == std::errc::result_out_of_range;
  cell.ok = res.ec == std::errc() && res.ptr == digits.data() + digits.size();
  return cell;
}

// A cell of 1 to 9 digits, as nearly every count is: its value at once; -1 for anything else,
// which parse_integer_cell then reads.
int64_t plain_digits(std::string_view text) {
  if (text.empty() || text.size() > 9) return -1;
  int64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

Result<int32_t> parse_token_count(const LineReader& in, std::string_view column,
                                  std::string_view text) {
  if (const int64_t v = plain_digits(text); v >= 1 && v <= kMaxTokens) return static_cast<int32_t>(v);
  const IntegerCell cell = parse_integer_cell(text);
  if (!cell.ok && !cell.out_of_range) return in.expected(column, "an integer >= 1", text);
  constexpr int64_t kMax = kMaxTokens;
  if (cell.out_of_range || cell.value > kMax) {
    return in.expected(column, "an integer <= " + std::to_string(kMax), text);
  }
  if (cell.value < 1) return in.expected(column, "an integer >= 1", text);
  return static_cast<int32_t>(cell.value);
}

Result<int32_t> parse_priority(const LineReader& in, std::string_view column, std::string_view text) {
  const IntegerCell cell = parse_integer_cell(text);
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  if (!cell.ok || cell.value < kMin || cell.value > kMax) {
    return in.expected(column, "an integer from " + std::to_string(kMin) + " to " + std::to_string(kMax),
                       text);
  }
  return static_cast<int32_t>(cell.value);
}

std::optional<double> plain_decimal(std::string_view text) {
  // digits [. digits], with a mantissa below 2^53 and at most 22 fraction digits: both it and the
  // power of ten are exact doubles, so their quotient is the correctly rounded value, as
  // from_chars gives (Clinger's fast path).
  uint64_t mantissa = 0;
  size_t digits = 0;
  size_t dot = std::string_view::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');  // exact while digits <= 19
      ++digits;
    } else if (c == '.' && dot == std::string_view::npos) {
      dot = i;
    } else {
      return std::nullopt;
    }
  }
  const size_t fraction = dot == std::string_view::npos ? 0 : text.size() - dot - 1;
  const bool dangling_dot = dot != std::string_view::npos && (dot == 0 || fraction == 0);  // ".5", "1."
  if (digits == 0 || digits > 19 || mantissa >= (uint64_t{1} << 53) || dangling_dot) return std::nullopt;
  static constexpr double kPowers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (fraction >= std::size(kPowers)) return std::nullopt;
  return static_cast<double>(mantissa) / kPowers[fraction];
}

Result<double> parse_seconds(const LineReader& in, std::string_view column, std::string_view text) {
  if (const std::optional<double> plain = plain_decimal(text); plain && *plain <= kMaxArrivalSeconds) return *plain;
  double v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool whole = res.ec == std::errc() && res.ptr == text.data() + text.size();
  if (!whole || !std::isfinite(v) || v < 0 || v > kMaxArrivalSeconds) {
    return in.expected(column, "a number of seconds from 0 to 1e9", text);
  }
  return v;
}

}  // namespace servesim
