// The log levels and the timeline (analysis/db_recorder.h): what each --log writes, and timeline
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

}  // namespace
}  // namespace servesim::testing
