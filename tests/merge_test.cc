// `sim merge` (analysis/storage/merge.h): every table that names a run follows it, a merge run again copies
// nothing twice, a source given twice is refused, and two runs of one sweep stay two sweeps.
#include "analysis/storage/merge.h"

#include <gtest/gtest.h>

#include <sstream>

#include "analysis/storage/sweep_db.h"
#include "runner/run.h"
#include "runner/sweep.h"
#include "sim/config/config.h"
#include "tests/sweep_fixture.h"

namespace servesim {
namespace {

int64_t count(const std::string& path, const std::string& sql) { return std::stoll(query_one(path, sql)); }

using MergeTest = SweepTest;

// A disaggregated run into `path`: its transfers rows are what merges used to drop.
void disaggregated_run(const std::string& workload, const std::string& path) {
  toml::table t;
  t.insert("trace", workload);
  t.insert("db", path);
  t.insert("prefill_replicas", 1);
  t.insert("decode_replicas", 1);
  t.insert("num_prompts", 40);
  auto config = resolve_config(t);
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto ran = run_configuration(config.value());
  ASSERT_TRUE(ran.ok()) << ran.error().message;
  ASSERT_EQ(ran.value().status, "done") << ran.value().error;
}

// Regression: the transfers table was not merged; a merge run again (after a stop, or by mistake)
// appended every run a second time; the same source given twice was merged twice.
TEST_F(MergeTest, EveryTableFollowsItsRunAndAMergeRunAgainCopiesNothingTwice) {
  disaggregated_run(workload_, db("a.db"));
  disaggregated_run(workload_, db("b.db"));
  ASSERT_GT(count(db("a.db"), "SELECT count(*) FROM transfers"), 0);
  std::ostringstream log;
  auto first = merge_databases({db("a.db")}, db("all.db"), log);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM transfers"), count(db("a.db"), "SELECT count(*) FROM transfers"));
  // As if the first merge had stopped after a.db: the same command again finishes it.
  auto again = merge_databases({db("a.db"), db("b.db")}, db("all.db"), log);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again.value().merged.size(), 2u);
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM runs"), 2);
  for (const char* table : {"requests", "metrics", "timeline", "distributions", "transfers"}) {
    const std::string sql = std::string("SELECT count(*) FROM ") + table;
    EXPECT_EQ(count(db("all.db"), sql), count(db("a.db"), sql) + count(db("b.db"), sql)) << table;
  }
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM transfers WHERE run_id = 2"),
            count(db("b.db"), "SELECT count(*) FROM transfers"));
  EXPECT_NE(log.str().find("0 runs (1 more already there)"), std::string::npos) << log.str();
  // The same source twice, under two spellings, is refused before anything is written.
  auto twice = merge_databases({db("a.db"), (dir_ / "." / "a.db").string()}, db("new.db"), log);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("is given twice"), std::string::npos) << twice.error().message;
  EXPECT_FALSE(fs::exists(db("new.db")));
}

// Regression: a database merged while its run was still going was copied as `running` and never
// updated: the same merge once the run had ended said "1 more already there" and kept the empty copy.
TEST_F(MergeTest, ARunMergedWhileRunningTakesItsEndOnTheNextMerge) {
  disaggregated_run(workload_, db("a.db"));
  fs::copy_file(db("a.db"), db("snapshot.db"));
  exec(db("snapshot.db"), "UPDATE runs SET status = 'running', finished_at = NULL; DELETE FROM metrics;");
  std::ostringstream log;
  ASSERT_TRUE(merge_databases({db("snapshot.db")}, db("all.db"), log).ok());
  EXPECT_NE(log.str().find("1 still running"), std::string::npos) << log.str();
  ASSERT_TRUE(merge_databases({db("a.db")}, db("all.db"), log).ok());
  EXPECT_NE(log.str().find("1 that were running now ended"), std::string::npos) << log.str();
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(query_one(db("all.db"), "SELECT status FROM runs"), "done");
  for (const char* table : {"requests", "metrics", "timeline", "distributions", "transfers"}) {
    const std::string sql = std::string("SELECT count(*) FROM ") + table;
    EXPECT_EQ(count(db("all.db"), sql), count(db("a.db"), sql)) << table;
  }
  // Merged once more, nothing changes.
  ASSERT_TRUE(merge_databases({db("a.db")}, db("all.db"), log).ok());
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM metrics"), count(db("a.db"), "SELECT count(*) FROM metrics"));
}

TEST_F(MergeTest, AStopBeforeASourceLeavesItOut) {
  disaggregated_run(workload_, db("a.db"));
  std::atomic<bool> stop{true};
  std::ostringstream log;
  auto stopped = merge_databases({db("a.db")}, db("all.db"), log, &stop);
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped.value().interrupted);
  EXPECT_TRUE(stopped.value().merged.empty());
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM runs"), 0);
}

// The same sweep run twice over the same points (not shards of one) stays two sweeps: joined, the
// second's points would have replaced the first's.
TEST_F(MergeTest, TwoRunsOfOneSweepStayTwoSweeps) {
  SweepSpec s = spec("one.db");
  s.grid = {axis("replicas", {1, 2})};
  ASSERT_TRUE(run_sweep(s, {.jobs = 1}).ok());
  s.fixed.insert_or_assign("db", db("two.db"));
  ASSERT_TRUE(run_sweep(s, {.jobs = 1}).ok());
  std::ostringstream log;
  ASSERT_TRUE(merge_databases({db("one.db"), db("two.db")}, db("all.db"), log).ok());
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM sweeps"), 2);
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM sweep_points WHERE status = 'done'"), 4);
  // Merged again: nothing new.
  ASSERT_TRUE(merge_databases({db("one.db"), db("two.db")}, db("all.db"), log).ok());
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM sweeps"), 2);
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM runs"), 4);
}

// Regression: two runs alike in start, host, process, name and configuration (a sweep's duplicate
// points on two threads) were taken for one, and merging again made a phantom sweep. Runs carry a
// uid; a damaged source is refused before anything is written.
TEST_F(MergeTest, RunsAreKnownByTheirUidAndADamagedSourceIsRefused) {
  disaggregated_run(workload_, db("a.db"));
  disaggregated_run(workload_, db("a.db"));
  {
    auto d = Database::open(db("a.db"));
    ASSERT_TRUE(d.ok());
    // As alike as two runs can be, but for their uid.
    ASSERT_TRUE(d.value()->exec("UPDATE runs SET started_at = (SELECT started_at FROM runs WHERE id = 1), "
                                "name = 'x', config = 'y'").ok());
  }
  EXPECT_EQ(count(db("a.db"), "SELECT count(DISTINCT uid) FROM runs"), 2);
  std::ostringstream log;
  ASSERT_TRUE(merge_databases({db("a.db")}, db("all.db"), log).ok());
  ASSERT_TRUE(merge_databases({db("a.db")}, db("all.db"), log).ok());
  EXPECT_EQ(count(db("all.db"), "SELECT count(*) FROM runs"), 2);
  // A damaged source: garbage over its pages.
  fs::copy_file(db("a.db"), db("bad.db"));
  {
    std::fstream f(db("bad.db"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20000);
    const std::string junk(30000, 'x');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto bad = merge_databases({db("bad.db")}, db("none.db"), log);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bad.db"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(fs::exists(db("none.db")));
}

}  // namespace
}  // namespace servesim
