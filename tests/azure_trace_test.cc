// Tests of workloads/azure_trace.h: wall-clock parsing (days from civil, fractional seconds), the
// shipped excerpts (CRLF), errors with their lines, and the two full Azure traces when present.
#include "workloads/azure_trace.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>


namespace servesim {
namespace {

using namespace servesim::testing;


ReplayOptions azure_options(const std::string& path) {
  ReplayOptions o;
  o.path = path;
  o.format = TraceFormat::kAzure;
  return o;
}

TEST(WallTime, DaysFromCivil) {
  auto t = parse_wall_time("1970-01-01 00:00:00");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->seconds, 0);
  EXPECT_EQ(t->nanos, 0);
  t = parse_wall_time("2023-11-16 18:15:46.6805900");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->seconds, 1700158546);  // as Python's datetime(..., tzinfo=utc).timestamp() says
  EXPECT_EQ(t->nanos, 680590000);
  EXPECT_EQ(parse_wall_time("2000-02-29T00:00:00")->seconds, 951782400);
  EXPECT_EQ(parse_wall_time("1900-03-01 00:00:00")->seconds, -2203891200);
  EXPECT_EQ(parse_wall_time("2023-12-31 23:59:59.5")->nanos, 500000000);
  EXPECT_EQ(parse_wall_time("2023-12-31 23:59:59.123456789")->nanos, 123456789);
}

TEST(WallTime, RejectsWhatIsNotATime) {
  for (const char* bad : {"", "2023-11-16", "2023-11-16 18:15", "2023-11-16 18:15:46.",
                          "2023-11-16 18:15:46.1234567890", "2023-13-01 00:00:00",
                          "2023-02-29 00:00:00", "1900-02-29 00:00:00", "2023-04-31 00:00:00",
                          "2023-11-16 24:00:00", "2023-11-16 18:60:00", "2023-11-16 18:15:60",
                          "2023-11-16 18:15:46Z", "23-11-16 18:15:46", "2023/11/16 18:15:46",
                          "2023-11-16  18:15:46", "2023-1a-16 18:15:46"}) {
    EXPECT_FALSE(parse_wall_time(bad)) << bad;
  }
}

TEST(AzureTrace, ConversationExcerpt) {
  auto rows = read_azure_trace(azure_options(kExcerpts + "azure_conv_head.csv"));
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  const auto& r = rows.value();
  ASSERT_EQ(r.size(), 20u);
  EXPECT_EQ(r[0].arrival, 0);
  EXPECT_EQ(r[0].prompt_tokens, 374);
  EXPECT_EQ(r[0].output_tokens, 44);
  EXPECT_EQ(r[0].line, 2);
  // 18:15:50.9951690 - 18:15:46.6805900, to the 100 ns the trace records
  EXPECT_EQ(r[1].arrival, 4'314'579'000);
  EXPECT_EQ(r[19].id, "r19");
  EXPECT_EQ(r[19].arrival, 13'025'088'000);  // 18:15:59.7056780
  EXPECT_EQ(r[19].prompt_tokens, 1353);
  EXPECT_EQ(r[19].output_tokens, 142);
}

TEST(AzureTrace, CodeExcerpt) {
  auto rows = read_azure_trace(azure_options(kExcerpts + "azure_code_head.csv"));
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows.value().size(), 20u);
  EXPECT_EQ(rows.value()[1].arrival, 52'000'000);  // 18:17:04.0319600 - 18:17:03.9799600
  EXPECT_EQ(rows.value()[0].prompt_tokens, 4808);
  EXPECT_EQ(rows.value()[0].output_tokens, 10);
}

TEST(AzureTrace, ColumnsByNameAcrossMidnightAndUnsorted) {
  auto rows = read_azure_trace(azure_options(write_temp(
      "a.csv", "GeneratedTokens,TIMESTAMP,ContextTokens\n"
               "5,2023-12-31 23:59:59.9,10\n"
               "6,2024-01-01 00:00:00.1,20\n"
               "7,2023-12-31 23:59:59,30\n")));
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  const auto& r = rows.value();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].arrival, 200'000'000);
  EXPECT_EQ(r[1].prompt_tokens, 20);
  EXPECT_EQ(r[1].output_tokens, 6);
  EXPECT_EQ(r[2].arrival, -900'000'000);  // before the first row: replay_trace shifts it to 0
}

TEST(AzureTrace, Errors) {
  const std::string h = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n";
  const std::string ok_row = "2023-11-16 18:15:46.6805900,374,44\r\n";
  struct Case {
    std::string text, expected;
  } cases[] = {
      {"TIMESTAMP,ContextTokens,Foo\n" + ok_row,
       ":1: missing column 'GeneratedTokens' (found: TIMESTAMP, ContextTokens, Foo)"},
      {h + ok_row + "2023-11-16 18:15:47,374,0\r\n",
       ":3: GeneratedTokens: expected an integer >= 1, got '0'"},
      {h + ok_row + ok_row + "2023-11-16 18:15:47,x,1\r\n",
       ":4: ContextTokens: expected an integer >= 1, got 'x'"},
      {h + "2023-11-16 25:15:46,1,1\r\n",
       ":2: TIMESTAMP: expected a time YYYY-MM-DD HH:MM:SS.fffffff, got '2023-11-16 25:15:46'"},
      {h + ok_row + "3023-11-16 18:15:46,1,1\r\n",
       ":3: TIMESTAMP: more than 1e9 s away from the first row's"},
      {h, ": empty trace (no rows)"},
  };
  for (const Case& c : cases) {
    const std::string path = write_temp("a.csv", c.text);
    auto rows = read_azure_trace(azure_options(path));
    ASSERT_FALSE(rows.ok()) << c.text;
    EXPECT_EQ(rows.error().message, path + c.expected);
  }
}

// The full traces shipped in data/traces: every row replays (the load time is measured in bench/ and
// reported by whoever changes the reader, not asserted here).
TEST(AzureTrace, ShippedTraces) {
  struct Trace {
    const char* name;
    size_t rows;
    Time span;
  } traces[] = {{"azure-conv.csv", 19366, 3'501'721'937'000},
                {"azure-code.csv", 8819, 3'435'948'056'000}};
  for (const Trace& t : traces) {
    const std::string path = kShippedTraces + t.name;
    auto rows = read_azure_trace(azure_options(path));
    ASSERT_TRUE(rows.ok()) << rows.error().message;
    ASSERT_EQ(rows.value().size(), t.rows) << t.name;
    EXPECT_EQ(rows.value().back().arrival, t.span) << t.name;  // the files are sorted
  }
}

}  // namespace
}  // namespace servesim
