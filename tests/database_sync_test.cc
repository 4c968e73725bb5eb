// Database::open waits for the disk only as its caller asks (a run's --db-sync): counted through
// an SQLite VFS that forwards every call to the default one and counts the files' syncs.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "analysis/storage/database.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_syncs{0};
sqlite3_vfs* g_default = nullptr;
sqlite3_vfs g_counting{};

// A file of the counting VFS: its methods, then the default VFS's file right after it.
struct CountingFile {
  sqlite3_file base;
  sqlite3_file* real;
};

sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<CountingFile*>(f)->real; }
const sqlite3_io_methods& methods(sqlite3_file* f) { return *real(f)->pMethods; }

const sqlite3_io_methods kCountingMethods = {
    3,
    [](sqlite3_file* f) { return methods(f).xClose(real(f)); },
    [](sqlite3_file* f, void* p, int n, sqlite3_int64 o) { return methods(f).xRead(real(f), p, n, o); },
    [](sqlite3_file* f, const void* p, int n, sqlite3_int64 o) {
      return methods(f).xWrite(real(f), p, n, o);
    },
    [](sqlite3_file* f, sqlite3_int64 n) { return methods(f).xTruncate(real(f), n); },
    [](sqlite3_file* f, int flags) {
      ++g_syncs;
      return methods(f).xSync(real(f), flags);
    },
    [](sqlite3_file* f, sqlite3_int64* n) { return methods(f).xFileSize(real(f), n); },
    [](sqlite3_file* f, int l) { return methods(f).xLock(real(f), l); },
    [](sqlite3_file* f, int l) { return methods(f).xUnlock(real(f), l); },
    [](sqlite3_file* f, int* r) { return methods(f).xCheckReservedLock(real(f), r); },
    [](sqlite3_file* f, int op, void* a) { return methods(f).xFileControl(real(f), op, a); },
    [](sqlite3_file* f) { return methods(f).xSectorSize(real(f)); },
    [](sqlite3_file* f) { return methods(f).xDeviceCharacteristics(real(f)); },
    [](sqlite3_file* f, int r, int s, int e, void volatile** p) {
      return methods(f).xShmMap(real(f), r, s, e, p);
    },
    [](sqlite3_file* f, int o, int n, int flags) { return methods(f).xShmLock(real(f), o, n, flags); },
    [](sqlite3_file* f) { methods(f).xShmBarrier(real(f)); },
    [](sqlite3_file* f, int d) { return methods(f).xShmUnmap(real(f), d); },
    [](sqlite3_file* f, sqlite3_int64 o, int n, void** p) {
      return methods(f).xFetch(real(f), o, n, p);
    },
    [](sqlite3_file* f, sqlite3_int64 o, void* p) { return methods(f).xUnfetch(real(f), o, p); },
};

int counting_open(sqlite3_vfs* /*vfs*/, const char* name, sqlite3_file* file, int flags,
                  int* out_flags) {
  auto* c = reinterpret_cast<CountingFile*>(file);
  c->real = reinterpret_cast<sqlite3_file*>(c + 1);
  const int rc = g_default->xOpen(g_default, name, c->real, flags, out_flags);
  c->base.pMethods = c->real->pMethods != nullptr ? &kCountingMethods : nullptr;
  return rc;
}

// Makes the counting VFS SQLite's default for the test, and the default one again after it.
class DatabaseSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_default = sqlite3_vfs_find(nullptr);
    ASSERT_NE(g_default, nullptr);
    ASSERT_GE(g_default->iVersion, 1);
    g_counting = *g_default;
    g_counting.zName = "servesim-counting-syncs";
    g_counting.szOsFile = static_cast<int>(sizeof(CountingFile)) + g_default->szOsFile;
    g_counting.xOpen = counting_open;
    g_counting.pNext = nullptr;
    ASSERT_EQ(sqlite3_vfs_register(&g_counting, /*makeDflt=*/1), SQLITE_OK);
    dir_ = fs::temp_directory_path() / ("servesim_database_sync_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    sqlite3_vfs_register(g_default, /*makeDflt=*/1);
    sqlite3_vfs_unregister(&g_counting);
    fs::remove_all(dir_);
  }
  // The disk waits of opening path with `synchronous` and writing a run's row, then closing it.
  int syncs_of_a_run(const std::string& path, const std::string& synchronous) {
    g_syncs = 0;
    auto db = Database::open(path, synchronous);
    EXPECT_TRUE(db.ok()) << db.error().message;
    if (!db.ok()) return -1;
    EXPECT_TRUE(db.value()->begin_run(RunInfo{}).ok());
    db.value().reset();  // closes it, back in rollback-journal mode
    return g_syncs.load();
  }
  fs::path dir_;
};

TEST_F(DatabaseSyncTest, OffNeverWaitsForTheDisk) {
  const std::string path = (dir_ / "sim.db").string();
  EXPECT_EQ(syncs_of_a_run(path, "off"), 0) << "a new file";
  // The file was left in rollback mode: the next open switches it to WAL again.
  EXPECT_EQ(syncs_of_a_run(path, "off"), 0) << "an existing file";
}

TEST_F(DatabaseSyncTest, NormalAndFullWaitAsAsked) {
  const std::string path = (dir_ / "sim.db").string();
  EXPECT_GT(syncs_of_a_run(path, "normal"), 0) << "a new file";
  EXPECT_GT(syncs_of_a_run(path, "normal"), 0) << "an existing file";
  EXPECT_GT(syncs_of_a_run(path, "full"), 0);
}

TEST_F(DatabaseSyncTest, AnUnknownModeIsAnError) {
  auto db = Database::open((dir_ / "sim.db").string(), "sometimes");
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.error().message.find("expected off, normal or full"), std::string::npos)
      << db.error().message;
  EXPECT_FALSE(fs::exists(dir_ / "sim.db"));
}

}  // namespace
}  // namespace servesim
