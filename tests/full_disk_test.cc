// A disk that fills during a run or a sweep (tests/full_disk_vfs.h): a write error is not a
// property of the configuration. A run ends `failed` with the error; a sweep's points that could
// not be written are interrupted, the sweep says why, and a resume reruns them.
#include <gtest/gtest.h>

#include "analysis/storage/sweep_db.h"
#include "runner/run.h"
#include "runner/sweep.h"
#include "sim/config/config.h"
#include "tests/full_disk_vfs.h"
#include "tests/sweep_fixture.h"

namespace servesim {
namespace {

class FullDiskTest : public SweepTest {
 protected:
  // A workload whose rows (requests and timeline) take far more than the quotas below.
  void big_workload() {
    std::ofstream(workload_) << "[generate]\nrequests = 20000\nseed = 5\n[generate.arrival]\n"
                                "process = 'poisson'\nrate = 50.0\n[generate.prompt_tokens]\n"
                                "dist = 'uniform'\nmin = 20\nmax = 200\n[generate.output_tokens]\n"
                                "dist = 'uniform'\nmin = 2\nmax = 20\n";
  }
};

// Regression: the run's row stayed `running`, with no error, when the disk filled.
TEST_F(FullDiskTest, ARunThatCannotWriteItsRowsEndsFailedWithTheError) {
  big_workload();
  toml::table t;
  t.insert("trace", workload_);
  t.insert("db", db("full.db"));
  t.insert("log", "requests");
  auto config = resolve_config(t);
  ASSERT_TRUE(config.ok());
  Result<RunOutput> ran = Error{""};
  {
    testing::FullDisk disk(600 << 10);
    ran = run_configuration(config.value());
    EXPECT_GT(disk.refused(), 0);
  }
  ASSERT_TRUE(ran.ok()) << ran.error().message;
  EXPECT_NE(ran.value().write_error.find("full"), std::string::npos) << ran.value().write_error;
  EXPECT_EQ(query_one(db("full.db"), "SELECT status FROM runs"), "failed");
  EXPECT_NE(query_one(db("full.db"), "SELECT error FROM runs").find("full"), std::string::npos);
}

// Regression: a full disk recorded the points as done without metrics ("6 done, 0 failed", exit
// 0), and --resume skipped them forever.
TEST_F(FullDiskTest, ASweepsPointsThatCouldNotBeWrittenAreRerunByAResume) {
  big_workload();
  SweepSpec s = spec("sweep.db");
  s.log = "requests";
  s.grid = {axis("replicas", {1, 2, 3, 4})};
  Result<SweepResult> cut = Error{""};
  {
    testing::FullDisk disk(900 << 10);
    cut = run_sweep(s, {.jobs = 1});
  }
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  const SweepResult& r = cut.value();
  EXPECT_NE(r.storage_error.find("full"), std::string::npos) << r.storage_error;
  int64_t done = 0;
  for (const PointOutcome& o : r.points) {
    EXPECT_NE(o.status, "failed") << o.error;  // a write error says nothing of the configuration
    if (o.status == "done") {
      ++done;
      EXPECT_FALSE(o.metrics.empty());
    }
  }
  EXPECT_LT(done, 4);
  EXPECT_EQ(query_one(db("sweep.db"), "SELECT status FROM sweeps"), "interrupted");
  EXPECT_EQ(query_one(db("sweep.db"), "SELECT count(*) FROM sweep_points WHERE status = 'done' AND run_id IN "
                               "(SELECT run_id FROM metrics)"),
            query_one(db("sweep.db"), "SELECT count(*) FROM sweep_points WHERE status = 'done'"));
  // With room again, the resume runs what is missing.
  auto d = Database::open_read_only(db("sweep.db"));
  const StoredSweep stored = read_sweep(*d.value(), r.sweep_id).value();
  d.value().reset();
  auto again = parse_sweep_spec(stored.spec, "stored", stored.keys);
  ASSERT_TRUE(again.ok());
  again.value().fixed.insert_or_assign("db", db("sweep.db"));
  auto resumed = run_sweep(again.value(), {.jobs = 1, .resume_id = r.sweep_id});
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_TRUE(resumed.value().storage_error.empty()) << resumed.value().storage_error;
  EXPECT_EQ(query_one(db("sweep.db"), "SELECT count(*) FROM sweep_points WHERE status = 'done'"), "4");
  EXPECT_EQ(query_one(db("sweep.db"), "SELECT status FROM sweeps"), "done");
}

}  // namespace
}  // namespace servesim
