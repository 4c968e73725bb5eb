// Tests of workloads/mooncake_trace.h: arrivals, lengths and prompt segments from the shipped excerpt,
// every error with its line, and the full conversation trace with its own block reuse when present.
#include "workloads/mooncake_trace.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "workloads/csv_reader.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <unordered_set>


namespace servesim {
namespace {

using namespace servesim::testing;


ReplayOptions mooncake_options(const std::string& path) {
  ReplayOptions o;
  o.path = path;
  o.format = TraceFormat::kMooncake;
  return o;
}

int64_t segment_tokens(const RequestSpec& r) {
  int64_t sum = 0;
  for (const Segment& s : r.prompt) sum += s.tokens;
  return sum;
}

TEST(MooncakeTrace, Excerpt) {
  auto rows = read_mooncake_trace(mooncake_options(kExcerpts + "mooncake_conversation_head.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  const auto& r = rows.value();
  ASSERT_EQ(r.size(), 20u);
  EXPECT_EQ(r[0].id, "r0");
  EXPECT_EQ(r[0].line, 1);
  EXPECT_EQ(r[0].arrival, 0);
  EXPECT_EQ(r[0].prompt_tokens, 6758);
  EXPECT_EQ(r[0].output_tokens, 500);
  ASSERT_EQ(r[0].prompt.size(), 14u);  // ceil(6758 / 512)
  EXPECT_EQ(r[0].prompt[0].tokens, 512);
  EXPECT_EQ(r[0].prompt[13].tokens, 6758 - 13 * 512);
  EXPECT_EQ(r[0].prompt[1].id, content_id(kTraceBlockContent, 1));
  EXPECT_EQ(r[10].arrival, 3 * kNsPerSecond);  // timestamp 3000 ms
  for (const RequestSpec& q : r) {
    EXPECT_EQ(segment_tokens(q), q.prompt_tokens) << q.id;
    // Every row of the excerpt starts with hash id 0: the same first block, so the same segment.
    EXPECT_EQ(q.prompt[0].id, r[0].prompt[0].id) << q.id;
    EXPECT_EQ(q.prompt[0].id, content_id(kTraceBlockContent, 0));
  }
  EXPECT_NE(r[0].prompt[1].id, r[1].prompt[1].id);  // ids 1 and 14
}

TEST(MooncakeTrace, BlockTokensFloatTimestampAndLimit) {
  ReplayOptions o = mooncake_options(write_temp(
      "m.jsonl",
      "{\"timestamp\": 1.5, \"input_length\": 2500, \"output_length\": 2, \"hash_ids\": [7, 8, 9],"
      " \"extra\": null}\r\n"
      "\n"
      "{\"hash_ids\": [7], \"output_length\": 1, \"input_length\": 1000, \"timestamp\": 2}\n"
      "not even read\n"));
  o.block_tokens = 1000;
  o.limit = 2;
  auto rows = read_mooncake_trace(o);
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  const auto& r = rows.value();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].arrival, 1'500'000);
  ASSERT_EQ(r[0].prompt.size(), 3u);
  EXPECT_EQ(r[0].prompt[2].tokens, 500);
  EXPECT_EQ(r[1].line, 3);
  EXPECT_EQ(r[1].arrival, 2'000'000);
  ASSERT_EQ(r[1].prompt.size(), 1u);
  EXPECT_EQ(r[1].prompt[0].id, r[0].prompt[0].id);
  EXPECT_EQ(r[1].prompt[0].tokens, 1000);
}

TEST(MooncakeTrace, Errors) {
  const std::string ok = R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})";
  struct Case {
    std::string text, expected;
  } cases[] = {
      {ok + "\n" + R"({"timestamp": 0, "input_length": 6)",
       ":2: malformed JSON: parse error at column 35: syntax error while parsing object - "
       "unexpected end of input; expected '}'"},
      {"[1, 2]", ":1: expected a JSON object, got array"},
      {R"({"timestamp": 0, "input_length": 600, "output_length": 5})", ":1: missing key 'hash_ids'"},
      {R"({"input_length": 600, "output_length": 5, "hash_ids": [1, 2]})",
       ":1: missing key 'timestamp'"},
      {ok + "\n" + ok + "\n" +
           R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": "1, 2"})",
       ":3: hash_ids: expected an array of integers, got string"},
      {R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2.5]})",
       ":1: hash_ids: expected an array of integers, got 2.5 at index 1"},
      {R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2, 3]})",
       ":1: hash_ids: expected ceil(input_length / block_tokens) = 2 ids (input_length 600, "
       "block_tokens 512), got 3"},
      {R"({"timestamp": 0, "input_length": 600, "output_length": 0, "hash_ids": [1, 2]})",
       ":1: output_length: expected an integer >= 1, got 0"},
      {R"({"timestamp": 0, "input_length": 600.0, "output_length": 1, "hash_ids": [1, 2]})",
       ":1: input_length: expected an integer >= 1, got 600.0"},
      {R"({"timestamp": 0, "input_length": "600", "output_length": 1, "hash_ids": [1, 2]})",
       ":1: input_length: expected an integer >= 1, got \"600\""},
      {R"({"timestamp": 0, "input_length": 3000000000, "output_length": 1, "hash_ids": []})",
       ":1: input_length: expected an integer <= 100000000, got 3000000000"},
      {R"({"timestamp": -1, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]})",
       ":1: timestamp: expected a number of milliseconds from 0 to 1e12, got -1"},
      {R"({"timestamp": null, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]})",
       ":1: timestamp: expected a number of milliseconds from 0 to 1e12, got null"},
      {"", ": empty trace (no rows)"},
      {"\n  \n", ": empty trace (no rows)"},
      // Hostile input: each used to abort (an uncaught range error) or overflow the stack.
      {R"({"timestamp": 1e400, "input_length": 6, "output_length": 1, "hash_ids": [1]})",
       ":1: malformed JSON: number overflow parsing '1e400'"},
      {R"({"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [1], "x": )" +
           std::string(5000, '[') + std::string(5000, ']') + "}",
       ":1: malformed JSON: arrays and objects nested more than 100 levels deep (at column 178)"},
      {R"({"timestamp": [[[[[[1]]]]]], "input_length": 6, "output_length": 1, "hash_ids": [1]})",
       ":1: timestamp: expected a number of milliseconds from 0 to 1e12, got an array of 1 values"},
      {"{\"timestamp\": \"\xff\", \"input_length\": 6}",
       ":1: malformed JSON: parse error at column 16: syntax error while parsing value - invalid "
       "string: ill-formed UTF-8 byte; last read: '\"\xFF'"},
      {std::string(kMaxLineBytes + 10, ' '),
       ":1: line longer than 1048576 bytes; is this a trace file?"},
  };
  for (const Case& c : cases) {
    const std::string path = write_temp("m.jsonl", c.text);
    auto rows = read_mooncake_trace(mooncake_options(path));
    ASSERT_FALSE(rows.ok()) << c.text;
    EXPECT_EQ(rows.error().message, path + c.expected);
  }
  auto device = read_mooncake_trace(mooncake_options("/dev/zero"));
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message,
            "/dev/zero: cannot open file (it is not a regular file: a device, a pipe or a socket)");
  auto missing = read_mooncake_trace(mooncake_options("/nonexistent/m.jsonl"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "/nonexistent/m.jsonl: cannot open file (no such file)");
}

// The full conversation trace: every line replays, and its own block reuse, the fraction of its
// 512-token blocks whose hash id already appeared in an earlier row (what an unbounded prefix cache
// keyed by block content could serve; the issue quotes about 37%).
TEST(MooncakeTrace, ShippedConversationTrace) {
  const std::string path = kShippedTraces + "mooncake-conversation.jsonl";
  auto rows = read_mooncake_trace(mooncake_options(path));
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows.value().size(), 12031u);
  std::unordered_set<uint64_t> seen;
  int64_t blocks = 0, repeats = 0;
  for (const RequestSpec& r : rows.value()) {
    EXPECT_EQ(segment_tokens(r), r.prompt_tokens) << r.id;
    for (const Segment& s : r.prompt) repeats += seen.count(s.id) > 0;
    for (const Segment& s : r.prompt) seen.insert(s.id);
    blocks += static_cast<int64_t>(r.prompt.size());
  }
  EXPECT_EQ(blocks, 288500);
  EXPECT_EQ(repeats, 105710);
  std::cout << "Mooncake conversation trace: " << repeats << " of " << blocks
            << " blocks repeat an earlier row's (" << 100.0 * static_cast<double>(repeats) /
            static_cast<double>(blocks) << "%)\n";
}

}  // namespace
}  // namespace servesim
