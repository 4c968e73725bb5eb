// Tests of workloads/priorities.h and of every way a workload gives request priorities: [[request]]
// priority, [generate.priority], [replay.priority], a csv trace's priority column and a JSONL
// trace's "priority" key.
#include "workloads/priorities.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "workloads/csv_trace.h"
#include "workloads/mooncake_trace.h"

namespace servesim {
namespace {

using namespace servesim::testing;

const std::string kGenerate =
    "[generate]\nrequests = 4000\nseed = 3\n[generate.arrival]\nprocess = \"poisson\"\nrate = 5.0\n"
    "[generate.prompt_tokens]\ndist = \"uniform\"\nmin = 1\nmax = 100\n"
    "[generate.output_tokens]\ndist = \"fixed\"\nvalue = 8\n";

TEST(Priorities, GeneratedRequestsDrawByWeightAndLeaveTheOtherDrawsAlone) {
  const Workload plain = parse_ok(kGenerate);
  const Workload w = parse_ok(kGenerate + "[generate.priority]\nvalues = [0, 5, -2]\n"
                                          "weights = [1, 3, 0]\n");
  ASSERT_EQ(w.requests.size(), plain.requests.size());
  int zeros = 0;
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const RequestSpec& r = w.requests[i];
    EXPECT_EQ(r.arrival, plain.requests[i].arrival);
    EXPECT_EQ(r.prompt_tokens, plain.requests[i].prompt_tokens);
    EXPECT_EQ(plain.requests[i].priority, 0);
    EXPECT_TRUE(r.priority == 0 || r.priority == 5) << r.priority;  // weight 0: never -2
    zeros += r.priority == 0;
  }
  EXPECT_NEAR(zeros, 1000, 90);  // 1/4 of 4000; sd ~27
  const Workload again = parse_ok(kGenerate + "[generate.priority]\nvalues = [0, 5, -2]\n"
                                              "weights = [1, 3, 0]\n");
  for (size_t i = 0; i < w.requests.size(); ++i) {
    EXPECT_EQ(again.requests[i].priority, w.requests[i].priority);
  }
  // Equal weights by default.
  const Workload equal = parse_ok(kGenerate + "[generate.priority]\nvalues = [1, 2]\n");
  int ones = 0;
  for (const RequestSpec& r : equal.requests) ones += r.priority == 1;
  EXPECT_NEAR(ones, 2000, 130);
}

TEST(Priorities, TableErrorsNameTheKey) {
  const std::string head = kGenerate + "[generate.priority]\n";
  const int line = 15;  // the first key of [generate.priority]
  auto at = [&](int l) { return "w.toml:" + std::to_string(l); };
  EXPECT_EQ(parse_error(head + "weights = [1]\n"),
            at(line - 1) + ":1: generate.priority: missing required key 'values'");
  EXPECT_EQ(parse_error(head + "values = []\n"),
            at(line) + ":10: generate.priority.values: expected a non-empty array of integers, "
                       "like [0, 1, 2], got an empty array");
  EXPECT_EQ(parse_error(head + "values = [1, 2.5]\n"),
            at(line) + ":14: generate.priority.values[1]: expected a 32-bit integer, got 2.5");
  EXPECT_EQ(parse_error(head + "values = [1, 2]\nweights = [1]\n"),
            at(line + 1) + ":11: generate.priority.weights: expected an array of 2 numbers >= 0, "
                           "one per value, got an array");
  EXPECT_EQ(parse_error(head + "values = [1, 2]\nweights = [1, -1]\n"),
            at(line + 1) + ":15: generate.priority.weights[1]: expected a finite number >= 0, got -1");
  EXPECT_EQ(parse_error(head + "values = [1, 2]\nweights = [0, 0]\n"),
            at(line + 1) + ":11: generate.priority.weights: all weights are 0: no value could be "
                           "drawn");
  EXPECT_NE(parse_error(head + "values = [1]\nclasses = 2\n").find("generate.priority.classes: unknown key"),
            std::string::npos);
}

TEST(Priorities, ExplicitRequestsGiveTheirOwn) {
  const Workload w = parse_ok(
      "[[request]]\noutput_tokens = 1\npriority = -3\n[[request]]\noutput_tokens = 1\n");
  EXPECT_EQ(w.requests[0].priority, -3);
  EXPECT_EQ(w.requests[1].priority, 0);
  EXPECT_EQ(parse_error("[[request]]\noutput_tokens = 1\npriority = 1.5\n"),
            "w.toml:3:12: request[0].priority: expected a 32-bit integer (lower is served first), "
            "got 1.5");
}

TEST(Priorities, CsvColumnAndJsonlKey) {
  ReplayOptions csv;
  csv.path = write_temp("t.csv", "arrival,prompt_tokens,output_tokens,prio\n0,1,1,2\n1,1,1,\n2,1,1,-7\n");
  csv.format = TraceFormat::kCsv;
  csv.columns.priority = "prio";
  auto rows = read_csv_trace(csv);
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  EXPECT_EQ(rows.value()[0].priority, 2);
  EXPECT_EQ(rows.value()[1].priority, 0);  // an empty cell: the default
  EXPECT_EQ(rows.value()[2].priority, -7);
  csv.path = write_temp("bad.csv", "arrival,prompt_tokens,output_tokens,prio\n0,1,1,high\n");
  auto bad = read_csv_trace(csv);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, csv.path + ":2: prio: expected an integer from -2147483648 to "
                                            "2147483647, got 'high'");

  ReplayOptions jsonl;
  jsonl.format = TraceFormat::kMooncake;
  jsonl.path = write_temp("m.jsonl",
                          R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1], "priority": 4})"
                          "\n"
                          R"({"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1]})");
  auto m = read_mooncake_trace(jsonl);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m.value()[0].priority, 4);
  EXPECT_EQ(m.value()[1].priority, 0);
  jsonl.path = write_temp("m2.jsonl",
                          R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1], "priority": 1e99})");
  auto mbad = read_mooncake_trace(jsonl);
  ASSERT_FALSE(mbad.ok());
  EXPECT_EQ(mbad.error().message, jsonl.path + ":1: priority: expected a 32-bit integer, got 1e+99");
}

TEST(Priorities, ReplayDrawsWithTheRunSeed) {
  const std::string trace = write_temp("t.csv", "arrival,prompt_tokens,output_tokens\n0,1,1\n1,1,1\n"
                                                "2,1,1\n3,1,1\n4,1,1\n5,1,1\n6,1,1\n7,1,1\n");
  const std::string text = "[replay]\npath = '" + trace + "'\n[replay.priority]\nvalues = [0, 1]\n";
  auto draws = [&](std::optional<uint64_t> seed) {
    auto w = parse_workload(text, "w.toml", seed);
    EXPECT_TRUE(w.ok()) << w.error().message;
    std::vector<int32_t> p;
    for (const RequestSpec& r : w.value().requests) p.push_back(r.priority);
    return p;
  };
  EXPECT_EQ(draws(std::nullopt), draws(std::nullopt));
  EXPECT_EQ(draws(11), draws(11));
  EXPECT_NE(draws(11), draws(12));  // 8 draws: equal by chance with probability 1/256
  EXPECT_NE(parse_error("[replay]\npath = 't.csv'\n[replay.columns]\npriority = 'p'\n"
                        "[replay.priority]\nvalues = [1]\n")
                .find("replay.priority: the trace's priority column already gives priorities"),
            std::string::npos);
}

}  // namespace
}  // namespace servesim
