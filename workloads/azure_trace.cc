#include "workloads/azure_trace.h"

#include <string>

#include "workloads/arrival.h"
#include "workloads/csv_reader.h"

namespace servesim {
namespace {

// Days from 1970-01-01 to the date y-m-d of the proleptic Gregorian calendar (H. Hinnant's
// days_from_civil). REQUIRES: 1 <= m <= 12, 1 <= d <= 31.
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;                                      // [0, 399]
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;             // [0, 146096]
  return era * 146097 + doe - 719468;
}

int64_t days_in_month(int64_t y, int64_t m) {
  static constexpr int8_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// Reads exactly `n` decimal digits at text[pos] into `out`, advancing pos.
bool digits(std::string_view text, size_t& pos, size_t n, int64_t& out) {
  if (pos + n > text.size()) return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  pos += n;
  return true;
}

bool literal(std::string_view text, size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

// ".123": the fraction of a second after the seconds, in nanoseconds (0 without one); false when
// it has no digits or is finer than a nanosecond.
bool fraction_nanos(std::string_view text, size_t& pos, int64_t& nanos) {
  nanos = 0;
  if (!literal(text, pos, '.')) return true;
  size_t n = 0;  // fractional digits read
  for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos, ++n) {
    if (n >= 9) return false;  // finer than a nanosecond
    nanos = nanos * 10 + (text[pos] - '0');
  }
  if (n == 0) return false;
  for (; n < 9; ++n) nanos *= 10;
  return true;
}

}  // namespace

std::optional<WallTime> parse_wall_time(std::string_view text) {
  size_t pos = 0;
  int64_t y, mo, d, h, mi, s;
  if (!digits(text, pos, 4, y) || !literal(text, pos, '-') || !digits(text, pos, 2, mo) ||
      !literal(text, pos, '-') || !digits(text, pos, 2, d)) {
    return std::nullopt;
  }
  if (!literal(text, pos, ' ') && !literal(text, pos, 'T')) return std::nullopt;
  if (!digits(text, pos, 2, h) || !literal(text, pos, ':') || !digits(text, pos, 2, mi) ||
      !literal(text, pos, ':') || !digits(text, pos, 2, s)) {
    return std::nullopt;
  }
  int64_t nanos = 0;
  if (!fraction_nanos(text, pos, nanos)) return std::nullopt;
  if (pos != text.size()) return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59) {
    return std::nullopt;
  }
  const int64_t seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
  return WallTime{seconds, static_cast<int32_t>(nanos)};
}

Status read_azure_trace_rows(const ReplayOptions& options, TraceRowSink& sink) {
  auto opened = LineReader::open(options.path);
  if (!opened) return opened.error();
  LineReader& reader = opened.value();
  auto header = CsvHeader::read(reader);
  if (!header) return header.error();
  size_t col[3];
  const char* const names[3] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  for (size_t i = 0; i < 3; ++i) {
    auto found = header.value().find(names[i]);
    if (!found) return found.error();
    col[i] = found.value();
  }

  size_t rows = 0;
  WallTime first;
  auto row = [&](std::span<const std::string_view> fields) -> Status {
    const std::optional<WallTime> t = parse_wall_time(fields[col[0]]);
    if (!t) {
      return reader.expected(names[0], "a time YYYY-MM-DD HH:MM:SS.fffffff", fields[col[0]]);
    }
    if (rows == 0) first = *t;
    const int64_t seconds = t->seconds - first.seconds;
    constexpr auto kMax = static_cast<int64_t>(kMaxArrivalSeconds);
    if (seconds > kMax || seconds < -kMax) {
      return reader.error("TIMESTAMP: more than 1e9 s away from the first row's");
    }
    auto prompt = parse_token_count(reader, names[1], fields[col[1]]);
    if (!prompt) return prompt.error();
    auto output = parse_token_count(reader, names[2], fields[col[2]]);
    if (!output) return output.error();
    if (rows == kRowsBeforeReserving) sink.reserve(reader.rows_expected(rows, options.limit));
    RequestSpec& spec = sink.add();
    spec.id = default_request_id(static_cast<int64_t>(rows));
    spec.line = reader.line_number();
    spec.arrival = seconds * kNsPerSecond + (t->nanos - first.nanos);
    spec.prompt_tokens = prompt.value();
    spec.output_tokens = output.value();
    ++rows;
    return Ok{};
  };
  return for_each_csv_row(reader, header.value(), options.limit, row, &sink);
}

Result<std::vector<RequestSpec>> read_azure_trace(const ReplayOptions& options) {
  TraceRowVector sink;
  if (Status s = read_azure_trace_rows(options, sink); !s) return s.error();
  return std::move(sink.rows);
}

}  // namespace servesim
