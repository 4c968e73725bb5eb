// The log levels and the timeline (analysis/storage/db_recorder.h): what each --log writes, and timeline
// buckets that add up to the iterations they summarize.
#include <gtest/gtest.h>

#include "cli_harness.h"

namespace servesim::testing {
namespace {

using Timeline = Cli;

TEST_F(Timeline, EachLogLevelWritesWhatItSays) {
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "200", "--log", "summary"}).status, 0);
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "200"}).status, 0);  // default: requests
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "200", "--log", "iterations"}).status, 0);
  const char* counts =
      "SELECT (SELECT count(*) FROM requests WHERE run_id = %d) || ' ' || (SELECT count(*) > 0 FROM "
      "timeline WHERE run_id = %d) || ' ' || (SELECT count(*) > 0 FROM iterations WHERE run_id = %d) || "
      "' ' || (SELECT count(*) > 0 FROM metrics WHERE run_id = %d)";
  char sql[512];
  // The unit backend logs every iteration unless told otherwise.
  ASSERT_EQ(sim({"--backend", "unit", "--trace", "seed-toy.toml"}).status, 0);
  ASSERT_EQ(sim({"--backend", "unit", "--trace", "seed-toy.toml", "--log", "requests"}).status, 0);
  const std::string expected[] = {"0 0 0 1", "200 1 0 1", "200 1 1 1", "5 1 1 1", "5 1 0 1"};
  for (int run = 1; run <= 5; ++run) {
    std::snprintf(sql, sizeof sql, counts, run, run, run, run);
    EXPECT_EQ(query(sql), expected[run - 1]) << "run " << run;
  }
}

TEST_F(Timeline, BucketsAddUpToTheIterations) {
  for (const char* resolution : {"1", "0.25", "7"}) {
    SCOPED_TRACE(resolution);
    std::filesystem::remove(dir_ / "sim.db");
    ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "300", "--replicas", "2", "--policy",
                   "chunked-prefill", "--max-num-batched-tokens", "512", "--log", "iterations", "--set",
                   std::string("log_resolution=") + resolution})
                  .status,
              0);
    for (const char* column : {"prefill_tokens", "decode_tokens"}) {
      EXPECT_EQ(query(std::string("SELECT sum(") + column + ") FROM timeline"),
                query(std::string("SELECT sum(") + column + ") FROM iterations"));
    }
    EXPECT_EQ(query("SELECT sum(iterations) FROM timeline"), query("SELECT count(*) FROM iterations"));
    EXPECT_EQ(query("SELECT sum(emitted) FROM timeline"), query("SELECT sum(output_tokens) FROM requests"));
    EXPECT_EQ(query("SELECT round(sum(busy), 6) FROM timeline"), query("SELECT round(sum(duration), 6) FROM iterations"));
    // Per bucket: the iterations that started in it, by replica.
    const std::string same_bucket = "i.replica = t.replica AND CAST(i.start / " + std::string(resolution) +
                                    " AS INTEGER) = t.bucket";
    EXPECT_EQ(query("SELECT count(*) FROM timeline t WHERE iterations != (SELECT count(*) FROM iterations i "
                    "WHERE " + same_bucket + ")"),
              "0");
    EXPECT_EQ(query("SELECT count(*) FROM timeline t WHERE kv_blocks_max != (SELECT max(kv_blocks_used) FROM "
                    "iterations i WHERE " + same_bucket + ")"),
              "0");
    EXPECT_EQ(query("SELECT count(*) FROM timeline t WHERE waiting_max < 0 OR seqs_max < 1"), "0");
  }
}

// By default the buckets are a second, unless the arrivals span more than 2,000 s: 3,000 requests
// at 1 per second (vLLM bench's timing: the last sent at exactly 3,000 s) get 2 s buckets, and the
// run's config says so.
TEST_F(Timeline, TheDefaultResolutionFollowsTheArrivalsSpan) {
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "200"}).status, 0);
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "3000", "--request-rate", "1"}).status, 0);
  const std::string width = "SELECT max(start / bucket) FROM timeline WHERE bucket > 0 AND run_id = ";
  EXPECT_EQ(query(width + "1"), "1.0");
  EXPECT_EQ(query(width + "2"), "2.0");
  EXPECT_EQ(query("SELECT group_concat(instr(config, 'log_resolution = ' || (id * 1.0) || char(10)) > 0) "
                  "FROM runs ORDER BY id"),
            "1,1");
  EXPECT_GT(std::stoi(query("SELECT max(bucket) FROM timeline WHERE run_id = 2")), 1400);
}

// Leaping over repeating decode iterations changes no row: the run that steps every iteration
// (--set leap=false) writes the same requests, timeline, iterations and metrics.
TEST_F(Timeline, LeapingWritesTheRowsOfSteppingEveryIteration) {
  for (const char* policy : {"continuous", "chunked-prefill"}) {
    for (const char* log : {"requests", "iterations"}) {
      SCOPED_TRACE(std::string(policy) + " --log " + log);
      std::filesystem::remove(dir_ / "sim.db");
      const std::vector<std::string> args = {"--trace", "pareto.toml", "--num-prompts", "400",
                                             "--replicas", "3", "--policy", policy, "--log", log,
                                             "--set", "log_resolution=0.5", "--set", "kv.blocks=400"};
      std::vector<std::string> stepping = args;
      stepping.insert(stepping.end(), {"--set", "leap=false"});
      ASSERT_EQ(sim(args).status, 0);
      ASSERT_EQ(sim(stepping).status, 0);
      std::vector<std::pair<const char*, const char*>> tables = {
          {"requests", "id, replica, arrival, scheduled, first_token, finished, prompt_tokens, "
                       "output_tokens, cached_tokens, preemptions, status, reason, priority"},
          {"timeline", "replica, bucket, start, iterations, busy, prefill_tokens, decode_tokens, "
                       "emitted, seqs_max, waiting_max, kv_blocks_mean, kv_blocks_max, "
                       "kv_blocks_total, preemptions"},
          {"metrics", "name, value"}};
      if (std::string(log) == "iterations") {
        tables.push_back({"iterations", "replica, step, start, duration, num_seqs, prefill_tokens, "
                                        "decode_tokens, kv_blocks_used, kv_blocks_total, predicted"});
      }
      for (const auto& [table, columns] : tables) {
        const std::string t = table;
        const std::string one = std::string("SELECT ") + columns + " FROM " + t + " WHERE run_id = 1";
        const std::string two = std::string("SELECT ") + columns + " FROM " + t + " WHERE run_id = 2";
        EXPECT_NE(query("SELECT count(*) FROM " + t + " WHERE run_id = 1"), "0") << t;
        EXPECT_EQ(query("SELECT count(*) FROM " + t + " WHERE run_id = 1"),
                  query("SELECT count(*) FROM " + t + " WHERE run_id = 2"))
            << t;
        EXPECT_EQ(query("SELECT count(*) FROM (" + one + " EXCEPT " + two + ")"), "0") << t;
      }
      // The stepping run says so in its recorded configuration; the default is not written.
      EXPECT_EQ(query("SELECT instr(config, 'leap = false') > 0 FROM runs WHERE id = 2"), "1");
      EXPECT_EQ(query("SELECT instr(config, 'leap') FROM runs WHERE id = 1"), "0");
    }
  }
}

}  // namespace
}  // namespace servesim::testing
