#include "analysis/storage/database.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <sys/wait.h>
#include <unistd.h>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/storage/db_recorder.h"
#include "analysis/metrics/metrics.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed at the end.
class DatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("servesim_database_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// The first column of every row of sql, as text ("NULL" for NULL).
std::vector<std::string> column(Database& db, const std::string& sql) {
  std::vector<std::string> out;
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
  while (sqlite3_step(s) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(s, 0);
    out.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
  }
  sqlite3_finalize(s);
  return out;
}

std::string one(Database& db, const std::string& sql) {
  const std::vector<std::string> rows = column(db, sql);
  return rows.empty() ? "<no row>" : rows[0];
}

TEST_F(DatabaseTest, CreatesSchemaAndAppendsRuns) {
  const std::string p = path("sim.db");
  {
    auto db = Database::open(p);
    ASSERT_TRUE(db.ok()) << db.error().message;
    EXPECT_EQ(one(*db.value(), "PRAGMA journal_mode"), "wal");
    EXPECT_EQ(one(*db.value(), "PRAGMA user_version"), "7");
    auto id = db.value()->begin_run(
        {.name = "first", .policy = "static", .backend = "unit", .seed = 7, .version = "0.1.0"});
    ASSERT_TRUE(id.ok()) << id.error().message;
    EXPECT_EQ(id.value(), 1);
  }
  auto db = Database::open(p);  // reopening keeps the runs
  ASSERT_TRUE(db.ok()) << db.error().message;
  auto id = db.value()->begin_run({.name = "second", .config_toml = "[policy]\nname = 'x'\n"});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id.value(), 2);
  Database& d = *db.value();
  EXPECT_EQ(column(d, "SELECT name || ':' || status FROM runs ORDER BY id"),
            (std::vector<std::string>{"first:running", "second:running"}));
  EXPECT_EQ(one(d, "SELECT seed FROM runs WHERE id = 1"), "7");
  EXPECT_EQ(one(d, "SELECT hardware FROM runs WHERE id = 1"), "NULL");  // empty is NULL
  const std::string started = one(d, "SELECT started_at FROM runs WHERE id = 1");
  EXPECT_EQ(started.size(), 24u) << started;  // 2025-01-31T14:03:07.250Z
  EXPECT_EQ(started.back(), 'Z');
  EXPECT_NE(one(d, "SELECT julianday(started_at) FROM runs WHERE id = 1"), "NULL");
}

// A database written before requests.priority (schema version 1) is read as it is and upgraded in
// place when a run is appended; its old rows keep a NULL priority.
TEST_F(DatabaseTest, UpgradesAVersion1DatabaseWithoutLosingRows) {
  const std::string p = path("v1.db");
  sqlite3* raw = nullptr;
  sqlite3_open(p.c_str(), &raw);
  sqlite3_exec(raw,
               "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT, started_at TEXT, "
               "finished_at TEXT, status TEXT, policy TEXT, backend TEXT, hardware TEXT, "
               "model TEXT, workload TEXT, config TEXT, seed INTEGER, version TEXT, "
               "wall_seconds REAL, error TEXT);"
               "CREATE TABLE requests(run_id INTEGER, id TEXT, replica INTEGER, arrival REAL, "
               "scheduled REAL, first_token REAL, finished REAL, prompt_tokens INTEGER, "
               "output_tokens INTEGER, cached_tokens INTEGER, preemptions INTEGER, status TEXT, "
               "reason TEXT, PRIMARY KEY (run_id, id));"
               "CREATE TABLE iterations(run_id INTEGER, replica INTEGER, step INTEGER, start REAL, "
               "duration REAL, num_seqs INTEGER, prefill_tokens INTEGER, decode_tokens INTEGER, "
               "kv_blocks_used INTEGER, kv_blocks_total INTEGER, predicted REAL, "
               "PRIMARY KEY (run_id, replica, step));"
               "CREATE TABLE metrics(run_id INTEGER, name TEXT, value REAL, "
               "PRIMARY KEY (run_id, name));"
               "INSERT INTO runs(id, name, status) VALUES (1, 'old', 'done');"
               "INSERT INTO requests(run_id, id, status) VALUES (1, 'r0', 'finished');"
               "PRAGMA user_version = 1;",
               nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  {
    auto ro = Database::open_read_only(p);
    ASSERT_TRUE(ro.ok()) << ro.error().message;
    EXPECT_EQ(one(*ro.value(), "PRAGMA user_version"), "1");  // reading changes nothing
  }
  auto db = Database::open(p);
  ASSERT_TRUE(db.ok()) << db.error().message;
  Database& d = *db.value();
  EXPECT_EQ(one(d, "PRAGMA user_version"), "7");
  EXPECT_EQ(one(d, "SELECT count(*) FROM timeline"), "0");
  EXPECT_EQ(one(d, "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN ('replicas', 'tp', 'gpus', 'overloaded', 'sweep_id')"), "5");
  EXPECT_EQ(one(d, "SELECT count(*) FROM sweeps"), "0");
  EXPECT_EQ(one(d, "SELECT id || ',' || status || ',' || ifnull(priority, 'NULL') FROM requests"),
            "r0,finished,NULL");
  EXPECT_EQ(one(d, "SELECT name FROM runs WHERE id = 1"), "old");
  auto again = Database::open(p);  // and opens as a current database from then on
  ASSERT_TRUE(again.ok()) << again.error().message;
}

// A reader must open a database another user wrote, in a folder it cannot write: the last writer
// leaves the file in rollback-journal mode (no -wal or -shm needed), and a file left in WAL mode
// whose -shm cannot be created is read as immutable. (The blocked -shm stands in for a read-only
// folder, which a test running as root cannot make.)
TEST_F(DatabaseTest, ReadersNeedNoWriteAccessBesideTheFile) {
  const std::string p = path("ro.db");
  {
    auto db = Database::open(p);
    ASSERT_TRUE(db.ok()) << db.error().message;
    ASSERT_TRUE(db.value()->begin_run({.name = "r"}).ok());
    EXPECT_EQ(one(*db.value(), "PRAGMA journal_mode"), "wal");  // while writing
  }
  EXPECT_FALSE(fs::exists(p + "-wal"));
  EXPECT_FALSE(fs::exists(p + "-shm"));
  {
    auto ro = Database::open_read_only(p);
    ASSERT_TRUE(ro.ok()) << ro.error().message;
    EXPECT_EQ(one(*ro.value(), "PRAGMA journal_mode"), "delete");
  }
  // Left in WAL mode (a writer killed), and its -shm impossible to create.
  sqlite3* raw = nullptr;
  sqlite3_open(p.c_str(), &raw);
  sqlite3_exec(raw, "PRAGMA journal_mode=WAL;", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  fs::create_directory(p + "-shm");
  auto ro = Database::open_read_only(p);
  ASSERT_TRUE(ro.ok()) << ro.error().message;
  EXPECT_EQ(one(*ro.value(), "SELECT name FROM runs"), "r");
}

// The reported case itself: a database another user wrote, in a folder this user cannot write,
// read by a process that is not root (the test drops to nobody when it runs as root).
TEST_F(DatabaseTest, AnotherUserReadsADatabaseInAReadOnlyFolder) {
  const std::string p = path("shared.db");
  {
    auto db = Database::open(p);
    ASSERT_TRUE(db.ok()) << db.error().message;
    ASSERT_TRUE(db.value()->begin_run({.name = "theirs"}).ok());
  }
  for (const bool left_in_wal : {false, true}) {
    if (left_in_wal) {  // as a writer that was killed leaves it
      sqlite3* raw = nullptr;
      sqlite3_open(p.c_str(), &raw);
      sqlite3_exec(raw, "PRAGMA journal_mode=WAL;", nullptr, nullptr, nullptr);
      sqlite3_close(raw);
    }
    fs::permissions(p, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
    const pid_t child = fork();
    if (child == 0) {
      if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
      auto ro = Database::open_read_only(p);
      _exit(ro.ok() && one(*ro.value(), "SELECT name FROM runs") == "theirs" ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    fs::permissions(dir_, fs::perms::owner_all);
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << (left_in_wal ? "left in WAL mode" : "closed cleanly");
  }
}

// A database that cannot be set up (here its -wal file cannot be created, as on a full disk) is an
// error that leaves no empty file behind.
TEST_F(DatabaseTest, AFailedOpenLeavesNoFileBehind) {
  const std::string p = path("blocked.db");
  fs::create_directory(p + "-wal");
  auto db = Database::open(p);
  ASSERT_FALSE(db.ok());
  EXPECT_FALSE(fs::exists(p)) << db.error().message;
  EXPECT_TRUE(fs::is_directory(p + "-wal"));  // what was there before stays
}

TEST_F(DatabaseTest, RefusesFilesThatAreNotServesimDatabases) {
  std::ofstream(path("text.db")) << "this is not a database, just some text long enough\n";
  auto not_sqlite = Database::open(path("text.db"));
  ASSERT_FALSE(not_sqlite.ok());
  EXPECT_NE(not_sqlite.error().message.find("is not an SQLite database"), std::string::npos)
      << not_sqlite.error().message;

  sqlite3* raw = nullptr;
  sqlite3_open(path("other.db").c_str(), &raw);
  sqlite3_exec(raw, "CREATE TABLE foo(x)", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  auto other = Database::open(path("other.db"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("not a servesim database (its tables: foo)"),
            std::string::npos)
      << other.error().message;

  sqlite3_open(path("shape.db").c_str(), &raw);
  sqlite3_exec(raw, "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT)", nullptr, nullptr,
               nullptr);
  sqlite3_close(raw);
  auto shape = Database::open(path("shape.db"));
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.error().message.find("table runs has columns (id, name)"), std::string::npos)
      << shape.error().message;

  auto missing_dir = Database::open(path("no/such/dir/sim.db"));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.error().message.find("cannot open database"), std::string::npos);

  auto read_missing = Database::open_read_only(path("absent.db"));
  ASSERT_FALSE(read_missing.ok());
  EXPECT_FALSE(fs::exists(path("absent.db")));  // reading never creates
}

Request make_request(const RequestSpec& spec, RequestStatus status) {
  Request r;
  r.spec = &spec;
  r.arrival = spec.arrival;
  r.prompt_tokens = spec.prompt_tokens;
  r.output_tokens = spec.output_tokens;
  r.status = status;
  return r;
}

TEST_F(DatabaseTest, RecorderWritesRowsMetricsAndStatus) {
  auto db = Database::open(path("sim.db"));
  ASSERT_TRUE(db.ok());
  Database& d = *db.value();
  const int64_t run = d.begin_run({.policy = "continuous", .backend = "roofline"}).value();
  MetricsAccumulator metrics({.max_num_seqs = 4, .replicas = 1});
  {
    DbRecorder rec(d, run, metrics);
    // More iterations than one transaction holds, to cross a commit.
    IterationRecord it;
    it.kv_blocks_total = 1000;
    for (int64_t step = 0; step < 60'000; ++step) {
      it.step = step;
      it.start = step * 1'000'000;
      it.duration = 1'000'000;
      it.num_seqs = it.emitted = 1;
      it.kv_blocks_used = step % 1000;
      it.predicted = step == 0 ? 900'000 : -1;
      metrics.on_iteration(it, {});
      rec.on_iteration(it, {});
    }
    const RequestSpec a{"a", 500'000'000, 10, 3, 0, 0}, b{"b", 0, 99999, 1, 0, 0}, c{"c", 0, 5, 9};
    Request ra = make_request(a, RequestStatus::kDone);
    ra.replica = 0;
    ra.num_output = 3;
    ra.scheduled = 500'000'000;
    ra.first_token = 750'000'000;
    ra.last_token = ra.finished = 2'000'000'000;
    Request rb = make_request(b, RequestStatus::kRejected);
    rb.reason = "prompt of 99999 tokens exceeds KV memory of 16000 tokens";
    Request rc = make_request(c, RequestStatus::kRunning);
    rc.priority = -2;
    rc.replica = 0;
    rc.num_output = 4;
    rc.preemptions = 1;
    for (const Request* r : {&ra, &rb, &rc}) {
      metrics.on_request(*r);
      rec.on_request(*r);
    }
    rec.on_run_end(RunOutcome::kInterrupted, "");
    EXPECT_EQ(rec.write_error(), "");
  }
  EXPECT_EQ(one(d, "SELECT count(*) FROM iterations WHERE run_id = 1"), "60000");
  EXPECT_EQ(one(d, "SELECT count(*) FROM iterations WHERE predicted IS NOT NULL"), "1");
  EXPECT_EQ(one(d, "SELECT predicted FROM iterations WHERE step = 0"), "0.0009");
  EXPECT_EQ(one(d, "SELECT kv_blocks_total FROM iterations WHERE step = 5"), "1000");
  EXPECT_EQ(column(d,
                   "SELECT id || ',' || ifnull(replica, 'NULL') || ',' || arrival || ',' || "
                   "ifnull(scheduled, 'NULL') || ',' || ifnull(first_token, 'NULL') || ',' || "
                   "ifnull(finished, 'NULL') || ',' || output_tokens || ',' || preemptions || "
                   "',' || status || ',' || ifnull(reason, 'NULL') || ',' || priority FROM requests "
                   "ORDER BY id"),
            (std::vector<std::string>{"a,0,0.5,0.5,0.75,2.0,3,0,finished,NULL,0",
                                      "b,NULL,0.0,NULL,NULL,NULL,0,0,rejected,"
                                      "prompt of 99999 tokens exceeds KV memory of 16000 tokens,0",
                                      "c,0,0.0,NULL,NULL,NULL,4,1,unfinished,NULL,-2"}));
  EXPECT_EQ(one(d, "SELECT status FROM runs WHERE id = 1"), "interrupted");
  EXPECT_EQ(one(d, "SELECT error FROM runs WHERE id = 1"), "NULL");
  EXPECT_EQ(one(d, "SELECT wall_seconds >= 0 AND finished_at >= started_at FROM runs"), "1");
  EXPECT_EQ(one(d, "SELECT value FROM metrics WHERE name = 'completed'"), "1.0");
  EXPECT_EQ(one(d, "SELECT value FROM metrics WHERE name = 'rejected'"), "1.0");
  EXPECT_EQ(one(d, "SELECT value FROM metrics WHERE name = 'e2el_mean'"), "1.5");
  EXPECT_EQ(one(d, "SELECT value FROM metrics WHERE name = 'iterations'"), "60000.0");
  EXPECT_EQ(one(d, "SELECT count(*) FROM metrics"), std::to_string(metrics.compute().size()));
}

// Each committed transaction is copied from the write-ahead log into the database file as the run
// goes (on the writer's thread), not all at once when the database closes: midway through a run of
// several transactions, the file holds more than the log.
TEST_F(DatabaseTest, RecorderCheckpointsAsItCommits) {
  auto db = Database::open(path("sim.db"));
  ASSERT_TRUE(db.ok());
  Database& d = *db.value();
  const int64_t run = d.begin_run({}).value();
  MetricsAccumulator metrics({});
  DbRecorder rec(d, run, metrics, LogLevel::kIterations, 1.0, /*background=*/false);
  IterationRecord it;
  for (int64_t step = 0; step < 130'000; ++step) {  // two commits, and a transaction open
    it.step = step;
    it.start = step * 1'000'000;
    it.duration = 1'000'000;
    it.num_seqs = it.emitted = 1;
    rec.on_iteration(it, {});
  }
  const auto file = fs::file_size(path("sim.db")), log = fs::file_size(path("sim.db-wal"));
  EXPECT_GT(file, 4u << 20) << "log " << log;  // 100,000 rows of about 50 bytes
  EXPECT_LT(log, file);
  rec.on_run_end(RunOutcome::kDone, "");
  EXPECT_EQ(one(d, "SELECT count(*) FROM iterations"), "130000");
}

// The writer thread takes chunks of rows in the order they were gathered, with several waiting
// at once: every row of a run of many chunks is written, in order, and a duplicate key in a late
// chunk keeps the rows before it and stops the rest.
TEST_F(DatabaseTest, BackgroundWriterWritesEveryChunkInOrder) {
  auto db = Database::open(path("sim.db"));
  ASSERT_TRUE(db.ok());
  Database& d = *db.value();
  const int64_t run = d.begin_run({}).value();
  MetricsAccumulator metrics({});
  DbRecorder rec(d, run, metrics, LogLevel::kIterations);  // in the background
  IterationRecord it;
  constexpr int64_t kRows = 150'000, kDuplicateAt = 120'000;  // about 18 chunks
  for (int64_t i = 0; i < kRows; ++i) {
    it.step = i < kDuplicateAt ? i : i - 1;  // row kDuplicateAt repeats the step before it
    it.start = i * 1'000'000;
    it.duration = 1'000'000;
    it.num_seqs = it.emitted = 1;
    rec.on_iteration(it, {});
  }
  rec.on_run_end(RunOutcome::kDone, "");
  EXPECT_NE(rec.write_error().find("UNIQUE constraint failed"), std::string::npos) << rec.write_error();
  EXPECT_EQ(one(d, "SELECT count(*) FROM iterations"), std::to_string(kDuplicateAt));
  EXPECT_EQ(one(d, "SELECT count(*) FROM iterations WHERE step != rowid - 1"), "0");  // in order
  EXPECT_EQ(one(d, "SELECT status FROM runs"), "failed");
}

TEST_F(DatabaseTest, FailedWriteIsReportedAndMarksTheRunFailed) {
  auto db = Database::open(path("sim.db"));
  ASSERT_TRUE(db.ok());
  Database& d = *db.value();
  const int64_t run = d.begin_run({}).value();
  MetricsAccumulator metrics({});
  DbRecorder rec(d, run, metrics);
  const RequestSpec a{"dup", 0, 1, 1, 0, 0};
  const Request r = make_request(a, RequestStatus::kRejected);
  rec.on_request(r);
  rec.on_request(r);  // same id twice: the primary key refuses it
  rec.on_run_end(RunOutcome::kFailed, "bad workload");  // rows are written by then
  EXPECT_NE(rec.write_error().find("writing requests to"), std::string::npos) << rec.write_error();
  EXPECT_NE(rec.write_error().find("UNIQUE constraint failed"), std::string::npos);
  EXPECT_EQ(one(d, "SELECT status FROM runs"), "failed");
  EXPECT_EQ(one(d, "SELECT error FROM runs"), "bad workload; " + rec.write_error());
  EXPECT_EQ(one(d, "SELECT count(*) FROM requests"), "1");  // the row before the failure stays
}

}  // namespace
}  // namespace servesim
