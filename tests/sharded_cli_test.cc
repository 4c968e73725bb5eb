// `sim --threads N` (sim/sharded.h): a run split over threads writes the rows and metrics of the
// run on one thread, in the same order every time; a trace read beside the run splits too.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_harness.h"

namespace servesim::testing {
namespace {

// Every table a run writes, with the columns that do not name the run.
const std::vector<std::pair<std::string, std::string>> kTables = {
    {"requests", "id, replica, arrival, scheduled, first_token, finished, prompt_tokens, output_tokens, "
                 "cached_tokens, preemptions, status, reason, priority"},
    {"timeline", "replica, bucket, start, iterations, busy, prefill_tokens, decode_tokens, emitted, seqs_max, "
                 "waiting_max, kv_blocks_mean, kv_blocks_max, kv_blocks_total, preemptions"},
    {"iterations", "replica, step, start, duration, num_seqs, prefill_tokens, decode_tokens, kv_blocks_used, "
                   "kv_blocks_total, predicted"},
    {"metrics", "name, value"},
    {"distributions", "metric, quantile, value"}};

class ShardedCli : public Cli {
 protected:
  // Runs 1 and 2 wrote the same rows (runs of --log requests write no iterations rows).
  void expect_same_rows(bool iterations) const {
    for (const auto& [table, columns] : kTables) {
      if (table == "iterations" && !iterations) continue;
      SCOPED_TRACE(table);
      const std::string count = "SELECT count(*) FROM " + table + " WHERE run_id = ";
      EXPECT_NE(query(count + "1"), "0");
      EXPECT_EQ(query(count + "1"), query(count + "2"));
      const std::string one = "SELECT " + columns + " FROM " + table + " WHERE run_id = 1";
      const std::string two = "SELECT " + columns + " FROM " + table + " WHERE run_id = 2";
      EXPECT_EQ(query("SELECT count(*) FROM (" + one + " EXCEPT " + two + ")"), "0");
    }
  }
};

TEST_F(ShardedCli, WritesTheRowsOfOneThreadInTheSameOrderEveryTime) {
  const std::vector<std::string> args = {"--trace", "pareto.toml", "--num-prompts", "300", "--replicas", "3",
                                         "--policy", "chunked-prefill", "--max-num-batched-tokens", "512",
                                         "--log", "iterations", "--set", "log_resolution=0.5", "--set",
                                         "kv.blocks=400"};
  for (const char* threads : {"1", "3", "3"}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--threads", threads});
    const auto ran = sim(a);
    ASSERT_EQ(ran.status, 0) << ran.output;
  }
  expect_same_rows(/*iterations=*/true);
  // The split runs' rows go in in one order (the groups' chunks in turn).
  const std::string order = "SELECT group_concat(id) FROM (SELECT id FROM requests WHERE run_id = %d ORDER BY rowid)";
  EXPECT_EQ(query(std::string(order).replace(order.find("%d"), 2, "2")),
            query(std::string(order).replace(order.find("%d"), 2, "3")));
  // The configuration records what was asked for; the default (0, auto) is not written.
  EXPECT_EQ(query("SELECT instr(config, 'threads = 3') > 0 FROM runs WHERE id = 2"), "1");
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "20", "--log", "summary"}).status, 0);
  EXPECT_EQ(query("SELECT instr(config, 'threads') FROM runs WHERE id = 4"), "0");
}

// A Vidur trace given as it is is read on a thread of its own while the groups take its rows; its
// timeline's resolution is found once it is read (auto), and the groups' early buckets merge into it.
TEST_F(ShardedCli, ATraceReadBesideTheRunSplitsToo) {
  std::ostringstream csv;
  csv << "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  uint64_t x = 12345;
  double t = 0;
  for (int i = 0; i < 2500; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t += 1.0 + static_cast<double>(x >> 40) / static_cast<double>(1 << 24);  // about 1.5 s apart: 2 s buckets
    csv << t << "," << 50 + (x >> 33) % 900 << "," << 1 + (x >> 13) % 200 << "\n";
  }
  write("trace.csv", csv.str());
  for (const char* threads : {"1", "2"}) {
    const auto ran = sim({"--trace", "trace.csv", "--model", "llama-2-7b", "--replicas", "4", "--threads", threads});
    ASSERT_EQ(ran.status, 0) << ran.output;
  }
  EXPECT_EQ(query("SELECT count(*) FROM requests WHERE run_id = 2"), "2500");
  EXPECT_EQ(query("SELECT min(start / bucket) FROM timeline WHERE bucket > 0 AND run_id = 2"), "2.0");
  expect_same_rows(/*iterations=*/false);
}

// Mixed hardware: groups of replicas with their own GPUs and limits, split across the groups' seam.
TEST_F(ShardedCli, MixedHardwareSplitsToo) {
  write("mixed.toml",
        "trace = 'pareto.toml'\nnum_prompts = 400\npolicy.name = 'chunked-prefill'\n"
        "[[replicas]]\ncount = 2\nhardware = 'h100-sxm'\nmax_num_batched_tokens = 1024\n"
        "[[replicas]]\ncount = 3\nhardware = 'a100-80gb'\nmax_num_seqs = 32\n");
  for (const char* threads : {"1", "2"}) {
    const auto ran = sim({"--config", "mixed.toml", "--threads", threads});
    ASSERT_EQ(ran.status, 0) << ran.output;
  }
  EXPECT_EQ(query("SELECT count(DISTINCT replica) FROM requests WHERE run_id = 2"), "5");
  expect_same_rows(/*iterations=*/false);
}

TEST_F(ShardedCli, BadThreadsAreRefused) {
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--threads", "-1"}, {"--set", "threads=many"}, {"--set", "threads=5000"}}) {
    std::vector<std::string> a = {"--trace", "pareto.toml", "--num-prompts", "10"};
    a.insert(a.end(), bad.begin(), bad.end());
    const auto ran = sim(a);
    EXPECT_EQ(ran.status, 2) << ran.output;
    EXPECT_NE(ran.output.find("threads: expected an integer in [0, 4096]"), std::string::npos) << ran.output;
    EXPECT_FALSE(fs::exists(dir_ / "sim.db"));
  }
}

}  // namespace
}  // namespace servesim::testing
