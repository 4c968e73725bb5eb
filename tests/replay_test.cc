// Tests of workloads/replay.h: the [replay] table and its messages, format detection, and what
// replay_trace does to the rows of every format (stable sort, shift to 0, limit, rate, time_scale).
#include "workloads/replay.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>


namespace servesim {
namespace {

using namespace servesim::testing;


// Parses `text` as the [replay] table of the workload file "dir/w.toml".
Result<ReplayOptions> parse(std::string_view text) {
#if TOML_EXCEPTIONS
  const toml::table t = toml::parse(text, std::string_view("dir/w.toml"));
#else
  const toml::table t = std::move(toml::parse(text, std::string_view("dir/w.toml"))).table();
#endif
  return parse_replay_table(*t["replay"].as_table(), "dir/w.toml");
}

// The message of a [replay] table that must be refused.
std::string replay_error(std::string_view text) {
  auto o = parse(text);
  EXPECT_FALSE(o.ok()) << text;
  return o.ok() ? std::string() : o.error().message;
}

Workload replay_ok(const ReplayOptions& o) {
  auto w = replay_trace(o);
  EXPECT_TRUE(w.ok()) << w.error().message;
  return w.ok() ? std::move(w).value() : Workload{};
}

// The ids, and the arrivals, of a workload's requests in order.
std::vector<std::string> ids(const Workload& w) {
  std::vector<std::string> out;
  for (const RequestSpec& r : w.requests) out.push_back(r.id);
  return out;
}
std::vector<Time> arrivals(const Workload& w) {
  std::vector<Time> out;
  for (const RequestSpec& r : w.requests) out.push_back(r.arrival);
  return out;
}

TEST(ReplayTable, ReadsEveryKey) {
  auto o = parse("[replay]\npath = 'traces/t.jsonl'\nformat = 'mooncake'\nlimit = 100\nrate = 2.5\n"
                 "block_tokens = 16\n");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o.value().path, "dir/traces/t.jsonl");
  EXPECT_EQ(o.value().format, TraceFormat::kMooncake);
  EXPECT_EQ(o.value().limit, 100);
  EXPECT_EQ(o.value().rate, 2.5);
  EXPECT_EQ(o.value().time_scale, 1.0);
  EXPECT_EQ(o.value().block_tokens, 16);

  o = parse("[replay]\npath = '/abs/t.csv'\ntime_scale = 2\n");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o.value().path, "/abs/t.csv");
  EXPECT_FALSE(o.value().format);  // detected when the trace is read
  EXPECT_EQ(o.value().limit, 0);
  EXPECT_EQ(o.value().rate, 0.0);
  EXPECT_EQ(o.value().time_scale, 2.0);
  EXPECT_EQ(o.value().block_tokens, 512);
}

TEST(ReplayTable, ColumnsMeanCsv) {
  auto o = parse("[replay]\npath = 't.csv'\n[replay.columns]\narrival = 't'\nid = 'name'\n");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o.value().format, TraceFormat::kCsv);
  EXPECT_EQ(o.value().columns.arrival, "t");
  EXPECT_EQ(o.value().columns.prompt_tokens, "prompt_tokens");
  EXPECT_EQ(o.value().columns.id, "name");
  EXPECT_EQ(o.value().columns.max_tokens, "");
}

TEST(ReplayTable, Errors) {
  EXPECT_EQ(replay_error("[replay]\nformat = 'azure'\n"),
            "dir/w.toml:1:1: replay: missing required key 'path'");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\nspeed = 2\n"),
            "dir/w.toml:3:1: replay.speed: unknown key (known: path, format, limit, rate, "
            "time_scale, block_tokens, columns, priority)");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\nformat = 'splitwise'\n"),
            "dir/w.toml:3:10: replay.format: expected one of \"azure\", \"mooncake\", \"vidur\", "
            "\"csv\", got \"splitwise\"");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\nlimit = 0\n"),
            "dir/w.toml:3:9: replay.limit: expected an integer >= 1, got 0");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\nrate = -1.0\n"),
            "dir/w.toml:3:8: replay.rate: expected a number > 0, got -1.0");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\ntime_scale = 0\n"),
            "dir/w.toml:3:14: replay.time_scale: expected a number > 0, got 0");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\nrate = 1\ntime_scale = 2\n"),
            "dir/w.toml:4:14: replay.time_scale: cannot be combined with rate (rate rescales "
            "arrivals to a mean rate; time_scale multiplies them); set one of the two");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\nformat = 'azure'\nblock_tokens = 16\n"),
            "dir/w.toml:4:16: replay.block_tokens: only for format = \"mooncake\"");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\nformat = 'vidur'\ncolumns = { arrival = 't' }\n"),
            "dir/w.toml:4:11: replay.columns: only for format = \"csv\"");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\ncolumns = 3\n"),
            "dir/w.toml:3:11: replay.columns: expected a table ([replay.columns]), got 3");
  EXPECT_EQ(replay_error("[replay]\npath = 't.csv'\n[replay.columns]\nstart = 't'\n"),
            "dir/w.toml:4:1: replay.columns.start: unknown key (known: arrival, prompt_tokens, "
            "output_tokens, id, max_tokens, priority)");
  EXPECT_EQ(replay_error("[replay]\npath = ''\n"),
            "dir/w.toml:2:8: replay.path: expected a non-empty string, got \"\"");
}

TEST(Replay, SortsStablyAndShiftsToZero) {
  ReplayOptions o;
  o.path = write_temp("t.csv", "arrival,prompt_tokens,output_tokens\n"
                               "12,1,1\n10.5,2,1\n12,3,1\n11,4,1\n10.5,5,1\n");
  const Workload w = replay_ok(o);
  EXPECT_EQ(w.path, o.path);
  EXPECT_EQ(w.seed, 0u);
  EXPECT_EQ(ids(w), (std::vector<std::string>{"r1", "r4", "r3", "r0", "r2"}));
  EXPECT_EQ(arrivals(w), (std::vector<Time>{0, 0, 500'000'000, 1'500'000'000, 1'500'000'000}));
  EXPECT_EQ(w.requests[0].prompt_tokens, 2);
  EXPECT_EQ(w.requests[0].line, 3);
}

TEST(Replay, LimitTakesTheFirstRowsOfTheFile) {
  ReplayOptions o;
  o.path = write_temp("t.csv", "arrival,prompt_tokens,output_tokens\n3,1,1\n1,1,1\n2,1,1\n0,1,1\n");
  o.limit = 3;
  const Workload w = replay_ok(o);
  EXPECT_EQ(ids(w), (std::vector<std::string>{"r1", "r2", "r0"}));
  EXPECT_EQ(arrivals(w), (std::vector<Time>{0, kNsPerSecond, 2 * kNsPerSecond}));
}

TEST(Replay, RateAndTimeScale) {
  ReplayOptions o;
  // 5 rows over 2 s: an observed mean rate of 2 req/s.
  o.path = write_temp("t.csv", "arrival,prompt_tokens,output_tokens\n"
                               "1,1,1\n1.5,1,1\n2,1,1\n2.25,1,1\n3,1,1\n");
  o.rate = 8;  // four times faster
  EXPECT_EQ(arrivals(replay_ok(o)),
            (std::vector<Time>{0, 125'000'000, 250'000'000, 312'500'000, 500'000'000}));
  o.rate = 0;
  o.time_scale = 3;
  EXPECT_EQ(arrivals(replay_ok(o)),
            (std::vector<Time>{0, 1'500'000'000, 3'000'000'000, 3'750'000'000, 6'000'000'000}));
  o.time_scale = 2e9;  // past the largest accepted factor
  EXPECT_FALSE(replay_trace(o).ok());
  o.time_scale = 1e9;
  auto w = replay_trace(o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message,
            o.path + ": the replay would span more than 1e9 s (2 s in the trace, times 1000000000)");
}

TEST(Replay, AzureRowsOutOfOrder) {
  ReplayOptions o;
  o.path = write_temp("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                               "2023-11-16 18:00:01.5,1,1\r\n"
                               "2023-11-16 18:00:00.25,2,1\r\n"
                               "2023-11-16 18:00:02,3,1\r\n");
  const Workload w = replay_ok(o);
  EXPECT_EQ(ids(w), (std::vector<std::string>{"r1", "r0", "r2"}));
  EXPECT_EQ(arrivals(w), (std::vector<Time>{0, 1'250'000'000, 1'750'000'000}));
  // Each row within 1e9 s of the first, but the whole more than 1e9 s apart.
  o.path = write_temp("b.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                               "2000-01-01 00:00:00,1,1\n1970-01-01 00:00:00,1,1\n"
                               "2030-01-01 00:00:00,1,1\n");
  auto far = replay_trace(o);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().message,
            o.path + ": the replay would span more than 1e9 s (1893456000 s in the trace, times 1)");
}

TEST(Replay, RateNeedsATraceThatSpansTime) {
  ReplayOptions o;
  o.path = write_temp("t.csv", "arrival,prompt_tokens,output_tokens\n4,1,1\n4,1,1\n");
  o.rate = 1;
  auto w = replay_trace(o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message,
            o.path + ": rate: cannot rescale to a mean rate: all 2 rows arrive at the same time");
  o.rate = 0;
  EXPECT_EQ(arrivals(replay_ok(o)), (std::vector<Time>{0, 0}));
}

TEST(Replay, DetectsTheFormat) {
  const auto detected = [](const std::string& path) {
    auto f = detect_trace_format(path);
    EXPECT_TRUE(f.ok()) << f.error().message;
    return f.ok() ? trace_format_name(f.value()) : "";
  };
  EXPECT_STREQ(detected(kExcerpts + "azure_conv_head.csv"), "azure");
  EXPECT_STREQ(detected(kExcerpts + "mooncake_conversation_head.jsonl"), "mooncake");
  EXPECT_STREQ(detected(write_temp("m.txt", "\n {\"timestamp\": 0}\n")), "mooncake");
  EXPECT_STREQ(detected(write_temp("v.csv", ",arrived_at,num_prefill_tokens,num_decode_tokens\n")),
               "vidur");
  EXPECT_STREQ(detected(write_temp("c.csv", "output_tokens,arrival,prompt_tokens\n")), "csv");
  const std::string unknown = write_temp("u.csv", "time,in,out\n");
  auto f = detect_trace_format(unknown);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message,
            unknown + ":1: cannot tell the trace format from the header (found: time, in, out); "
                      "known: azure (TIMESTAMP, ContextTokens, GeneratedTokens), vidur (arrived_at, "
                      "num_prefill_tokens, num_decode_tokens), csv (arrival, prompt_tokens, "
                      "output_tokens); set format and columns");
  EXPECT_EQ(detect_trace_format(unknown, {"time", "in", "out"}).value(), TraceFormat::kCsv);
  f = detect_trace_format("/nonexistent/t.csv");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message, "/nonexistent/t.csv: cannot open file (no such file)");
}

TEST(Replay, DetectedFormatsReplay) {
  ReplayOptions o;
  o.path = kExcerpts + "mooncake_conversation_head.jsonl";
  const Workload m = replay_ok(o);
  ASSERT_EQ(m.requests.size(), 20u);
  EXPECT_EQ(m.requests[0].prompt.size(), 14u);
  o.path = kExcerpts + "azure_code_head.csv";
  EXPECT_EQ(replay_ok(o).requests.size(), 20u);
  o.path = write_temp("e.csv", "");
  auto w = replay_trace(o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message, o.path + ": empty trace (no rows)");
}

TEST(Replay, IsTracePath) {
  EXPECT_TRUE(is_trace_path("a/b.csv") && is_trace_path("trace.JSONL"));
  EXPECT_FALSE(is_trace_path("w.toml") || is_trace_path("csv") || is_trace_path("t.json"));
}

}  // namespace
}  // namespace servesim
