// Tests of workloads/csv_trace.h and the shared line and cell readers of workloads/csv_reader.h:
// columns by name, ids, max_tokens, CRLF and BOM, blank lines, and every row error with its line.
#include "workloads/csv_trace.h"

#include <charconv>
#include <optional>

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "workloads/csv_reader.h"

namespace servesim {
namespace {

using namespace servesim::testing;

ReplayOptions csv_options(const std::string& path) {
  ReplayOptions o;
  o.path = path;
  o.format = TraceFormat::kCsv;
  return o;
}

std::vector<RequestSpec> read_ok(const ReplayOptions& o) {
  auto rows = read_csv_trace(o);
  EXPECT_TRUE(rows.ok()) << rows.error().message;
  return rows.ok() ? std::move(rows).value() : std::vector<RequestSpec>{};
}

std::string read_error(std::string_view text) {
  const std::string path = write_temp("t.csv", text);
  auto rows = read_csv_trace(csv_options(path));
  EXPECT_FALSE(rows.ok()) << text;
  const std::string message = rows.ok() ? std::string() : rows.error().message;
  // Every message starts with the path; tests compare what follows it.
  EXPECT_EQ(message.substr(0, path.size()), path);
  return message.substr(std::min(path.size(), message.size()));
}

// The room a trace reader reserves is judged from the rows read so far: close to the rows the file
// holds, never above the limit, and no more than those read once the file is read.
TEST(LineReader, RowsExpectedJudgesTheRestOfTheFileByTheRowsRead) {
  std::string text = "arrival,prompt,output\n";
  for (int i = 0; i < 10'000; ++i) text += std::to_string(i % 10) + ".5," + std::to_string(100 + i % 900) + ",7\n";
  auto opened = LineReader::open(write_temp("rows.csv", text));
  ASSERT_TRUE(opened.ok());
  LineReader& in = opened.value();
  std::string line;
  ASSERT_TRUE(in.next(line));  // the header
  for (int i = 0; i < 1024; ++i) ASSERT_TRUE(in.next(line));
  EXPECT_GE(in.rows_expected(1024, 0), 10'000u);
  EXPECT_LE(in.rows_expected(1024, 0), 12'000u);
  EXPECT_EQ(in.rows_expected(1024, 5000), 5000u);
  while (in.next(line)) {
  }
  EXPECT_EQ(in.rows_expected(10'000, 0), 10'000u);
}

// Lines are read a chunk of the file at a time: lines across the chunks' edges, one of exactly the
// longest length allowed, CRLF endings and a last line without a newline come back whole, with their
// numbers; one byte longer is an error at its line.
TEST(LineReader, LinesAcrossChunksComeBackWhole) {
  std::vector<std::string> lines;
  for (int i = 0; i < 5000; ++i) lines.push_back(std::string(static_cast<size_t>(i % 97), static_cast<char>('a' + i % 26)));
  lines.push_back(std::string(100'000, 'x'));
  lines.push_back("");
  lines.push_back(std::string(kMaxLineBytes, 'y'));
  lines.push_back("crlf");
  lines.push_back("last, no newline");
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) {
    text += lines[i];
    if (i + 1 == lines.size()) break;
    text += lines[i] == "crlf" ? "\r\n" : "\n";
  }
  // With a byte-order mark, which line 1 (empty) comes back without.
  const std::string lines_path = write_temp("lines.txt", "\xEF\xBB\xBF" + text);
  // Read into strings, and as views (of the reader's chunk, or gathered where a line crosses one).
  for (const bool views : {false, true}) {
    auto opened = LineReader::open(lines_path);
    ASSERT_TRUE(opened.ok());
    LineReader& in = opened.value();
    std::string line;
    std::string_view view;
    for (size_t i = 0; i < lines.size(); ++i) {
      ASSERT_TRUE(views ? in.next(view) : in.next(line)) << i;
      ASSERT_EQ(views ? view : std::string_view(line), lines[i]) << i << (views ? " (view)" : "");
      ASSERT_EQ(in.line_number(), static_cast<int32_t>(i + 1));
    }
    EXPECT_FALSE(views ? in.next(view) : in.next(line));
    EXPECT_TRUE(in.status().ok());
  }
  std::string line;

  const std::string path = write_temp("long.txt", "ok\n" + std::string(kMaxLineBytes + 1, 'z') + "\nafter\n");
  auto long_line = LineReader::open(path);
  ASSERT_TRUE(long_line.ok());
  ASSERT_TRUE(long_line.value().next(line));
  EXPECT_FALSE(long_line.value().next(line));
  EXPECT_EQ(long_line.value().status().error().message,
            path + ":2: line longer than 1048576 bytes; is this a trace file?");
}

TEST(SplitCsv, QuotesCommasAndSpaces) {
  std::vector<std::string> f;
  ASSERT_TRUE(split_csv(R"( a ,"b, c","say ""hi""",,"")", f));
  EXPECT_EQ(f, (std::vector<std::string>{"a", "b, c", "say \"hi\"", "", ""}));
  ASSERT_TRUE(split_csv("", f));
  EXPECT_EQ(f, (std::vector<std::string>{""}));
  EXPECT_FALSE(split_csv(R"(a,"b)", f));
}

// Split into views, a line without quotes gives pieces of itself; with quotes, the unquoted text.
// Either way the fields are split_csv's.
TEST(SplitCsv, ViewsGiveTheSameFields) {
  std::vector<std::string> unquoted, expected;
  std::vector<std::string_view> views;
  for (const std::string_view line :
       {std::string_view(" a ,b\t, c,,"), std::string_view(""), std::string_view("0.5,10,3"),
        std::string_view(R"( a ,"b, c","say ""hi""",,"")"), std::string_view(",")}) {
    ASSERT_TRUE(split_csv(line, expected));
    ASSERT_TRUE(split_csv(line, unquoted, views)) << line;
    ASSERT_EQ(std::vector<std::string>(views.begin(), views.end()), expected) << line;
    if (line.find('"') == std::string_view::npos) {
      for (const std::string_view v : views) {
        EXPECT_TRUE(v.data() >= line.data() && v.data() + v.size() <= line.data() + line.size()) << line;
      }
    }
  }
  EXPECT_FALSE(split_csv(R"(a,"b)", unquoted, views));
}

// The fast path for plain decimals gives from_chars' value exactly, and leaves everything else to
// it: random decimals of every length and fraction, the edges of its range, and cells it must
// not take (signs, exponents, stray dots, mantissas past 2^53, more than 22 fraction digits).
TEST(PlainDecimal, EqualsFromCharsOrDeclines) {
  const auto from_chars = [](std::string_view text) {
    double v = 0;
    const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
    EXPECT_TRUE(res.ec == std::errc() && res.ptr == text.data() + text.size()) << text;
    return v;
  };
  uint64_t x = 0x2545F4914F6CDD1DULL;
  int taken = 0;
  for (int i = 0; i < 200'000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::string text = std::to_string(x % 1'000'000'000'000'000ULL);
    const size_t cut = (x >> 60) % (text.size() + 1);
    if (cut < text.size()) text.insert(text.size() - cut, ".");
    if (text.front() == '.') text.insert(0, "0");
    const std::optional<double> fast = plain_decimal(text);
    if (!fast) continue;
    ++taken;
    ASSERT_EQ(*fast, from_chars(text)) << text;
  }
  EXPECT_GT(taken, 150'000);
  for (const char* text : {"0", "0.0", "4.314579", "0.1", "0.3", "1000000000", "1e9", "9007199254740991",
                           "0.0000000000000000000001", "123456789012345.6"}) {
    if (const std::optional<double> fast = plain_decimal(text)) {
      EXPECT_EQ(*fast, from_chars(text)) << text;
    }
  }
  for (const char* text : {"", ".", "1.", ".5", "-1", "+1", "1e3", "1.5e-3", "1..2", "1.2.3", " 1", "1 ",
                           "inf", "nan", "0x10", "90071992547409931", "0.00000000000000000000001"}) {
    EXPECT_FALSE(plain_decimal(text).has_value()) << text;
  }
}

TEST(CsvTrace, ReadsRowsInFileOrder) {
  const auto rows = read_ok(csv_options(write_temp(
      "t.csv", "arrival,prompt_tokens,output_tokens\n0.5,10,3\n0.25,7,1\n1e-9,1,100000000\n")));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].id, "r0");
  EXPECT_EQ(rows[0].arrival, 500'000'000);
  EXPECT_EQ(rows[0].prompt_tokens, 10);
  EXPECT_EQ(rows[0].output_tokens, 3);
  EXPECT_EQ(rows[0].max_tokens, 0);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[1].id, "r1");
  EXPECT_EQ(rows[1].arrival, 250'000'000);
  EXPECT_EQ(rows[2].arrival, 1);
  EXPECT_EQ(rows[2].output_tokens, kMaxTokens);
  EXPECT_TRUE(rows[2].prompt.empty());
}

TEST(CsvTrace, NamedColumnsIdsAndMaxTokens) {
  ReplayOptions o = csv_options(write_temp("t.csv",
                                           "name,out,extra,t,in,cap\n"
                                           "a,5,x,1.0,100,8\n"
                                           "\"b,2\",6,y,2,200,\n"));
  o.columns = {"t", "in", "out", "name", "cap"};
  const auto rows = read_ok(o);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, "a");
  EXPECT_EQ(rows[0].arrival, kNsPerSecond);
  EXPECT_EQ(rows[0].prompt_tokens, 100);
  EXPECT_EQ(rows[0].output_tokens, 5);
  EXPECT_EQ(rows[0].max_tokens, 8);
  EXPECT_EQ(rows[1].id, "b,2");
  EXPECT_EQ(rows[1].max_tokens, 0);  // empty cell: not given
}

TEST(CsvTrace, CrlfBomAndBlankLines) {
  const auto rows = read_ok(csv_options(write_temp(
      "t.csv", "\xEF\xBB\xBF" "arrival,prompt_tokens,output_tokens\r\n\r\n1,2,3\r\n  \r\n4,5,6")));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].line, 3);
  EXPECT_EQ(rows[1].line, 5);
  EXPECT_EQ(rows[1].arrival, 4 * kNsPerSecond);
  EXPECT_EQ(rows[1].output_tokens, 6);
}

TEST(CsvTrace, Limit) {
  ReplayOptions o = csv_options(
      write_temp("t.csv", "arrival,prompt_tokens,output_tokens\n3,1,1\n2,1,1\n1,1,1\nbad\n"));
  o.limit = 2;
  const auto rows = read_ok(o);  // the bad row after the limit is never read
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].arrival, 2 * kNsPerSecond);
}

TEST(CsvTrace, TokenCountsWrittenAsFloats) {
  const auto rows = read_ok(
      csv_options(write_temp("t.csv", "arrival,prompt_tokens,output_tokens\n0,512.0,7.00\n")));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].prompt_tokens, 512);
  EXPECT_EQ(rows[0].output_tokens, 7);
}

// Counts of up to nine digits are read at once (parse_token_count's plain path), longer ones and
// the edges of the range by from_chars: both give the same values.
TEST(CsvTrace, TokenCountsOfEveryLength) {
  const auto rows = read_ok(csv_options(write_temp("t.csv",
                                                   "arrival,prompt_tokens,output_tokens\n0,000000007,100000000\n"
                                                   "0,0000000000012,1\n0,9,99999999\n")));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].prompt_tokens, 7);
  EXPECT_EQ(rows[0].output_tokens, 100'000'000);
  EXPECT_EQ(rows[1].prompt_tokens, 12);
  EXPECT_EQ(rows[2].prompt_tokens, 9);
  EXPECT_EQ(rows[2].output_tokens, 99'999'999);
}

TEST(CsvTrace, RowErrorsNameLineAndColumn) {
  const std::string h = "arrival,prompt_tokens,output_tokens\n";
  EXPECT_EQ(read_error(h + "0,1,1\n0,abc,1\n"),
            ":3: prompt_tokens: expected an integer >= 1, got 'abc'");
  EXPECT_EQ(read_error(h + "0,1,1\n\n0,1,0\n"), ":4: output_tokens: expected an integer >= 1, got '0'");
  EXPECT_EQ(read_error(h + "0,-4,1\n"), ":2: prompt_tokens: expected an integer >= 1, got '-4'");
  EXPECT_EQ(read_error(h + "0,1.5,1\n"), ":2: prompt_tokens: expected an integer >= 1, got '1.5'");
  EXPECT_EQ(read_error(h + "0,,1\n"), ":2: prompt_tokens: expected an integer >= 1, got ''");
  EXPECT_EQ(read_error(h + "0,100000001,1\n"),
            ":2: prompt_tokens: expected an integer <= 100000000, got '100000001'");
  EXPECT_EQ(read_error(h + "0,99999999999999999999,1\n"),
            ":2: prompt_tokens: expected an integer <= 100000000, got '99999999999999999999'");
  EXPECT_EQ(read_error(h + "nan,1,1\n"),
            ":2: arrival: expected a number of seconds from 0 to 1e9, got 'nan'");
  EXPECT_EQ(read_error(h + "-1,1,1\n"),
            ":2: arrival: expected a number of seconds from 0 to 1e9, got '-1'");
  EXPECT_EQ(read_error(h + "1s,1,1\n"),
            ":2: arrival: expected a number of seconds from 0 to 1e9, got '1s'");
  EXPECT_EQ(read_error(h + "0,1\n"), ":2: expected 3 fields, as in the header, got 2");
  EXPECT_EQ(read_error(h + "0,1,1,\n"), ":2: expected 3 fields, as in the header, got 4");
  EXPECT_EQ(read_error(h + "\"0,1,1\n"), ":2: malformed CSV row: unclosed quote");
}

TEST(CsvTrace, FileErrors) {
  EXPECT_EQ(read_error("a,b,output_tokens\n0,1,1\n"),
            ":1: missing column 'arrival' (found: a, b, output_tokens)");
  EXPECT_EQ(read_error("arrival,prompt_tokens,output_tokens\n"), ": empty trace (no rows)");
  EXPECT_EQ(read_error("arrival,prompt_tokens,output_tokens\n\n\n"), ": empty trace (no rows)");
  EXPECT_EQ(read_error(""), ": empty trace (no rows)");
  EXPECT_EQ(read_error("\n0,1,1\n"), ":1: expected a header row naming the columns, got a blank line");
  auto missing = read_csv_trace(csv_options("/nonexistent/t.csv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "/nonexistent/t.csv: cannot open file (no such file)");
}

TEST(CsvTrace, IdColumnErrors) {
  const std::string path = write_temp("t.csv", "id,arrival,prompt_tokens,output_tokens\n"
                                               "a,0,1,1\nb,0,1,1\na,0,1,1\n,0,1,1\n");
  ReplayOptions o = csv_options(path);
  o.columns.id = "id";
  auto rows = read_csv_trace(o);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().message, path + ":4: id: duplicate id 'a' (first on line 2)");
  o.columns.id = "request";
  rows = read_csv_trace(o);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().message,
            path + ":1: missing column 'request' (found: id, arrival, prompt_tokens, output_tokens)");
  o.columns.id = "id";
  o.limit = 2;
  EXPECT_TRUE(read_csv_trace(o).ok());
  const std::string empty_id = write_temp("e.csv", "id,arrival,prompt_tokens,output_tokens\n,0,1,1\n");
  o = csv_options(empty_id);
  o.columns.id = "id";
  rows = read_csv_trace(o);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().message, empty_id + ":2: id: expected a non-empty id, got ''");
}

TEST(CsvTrace, MaxTokensErrors) {
  ReplayOptions o = csv_options(
      write_temp("t.csv", "arrival,prompt_tokens,output_tokens,max\n0,1,1,0\n"));
  o.columns.max_tokens = "max";
  auto rows = read_csv_trace(o);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().message, o.path + ":2: max: expected an integer >= 1, got '0'");
}

}  // namespace
}  // namespace servesim
