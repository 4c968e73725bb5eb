// The fixture of the sweep and search tests: a folder of its own per test, a generated workload of
// 300 requests, and a base sweep spec writing into that folder.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "analysis/storage/database.h"
#include "runner/sweep.h"

namespace servesim {

namespace fs = std::filesystem;

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("sweep_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    workload_ = (dir_ / "w.toml").string();
    std::ofstream(workload_) << "[generate]\nrequests = 300\nseed = 5\n[generate.arrival]\n"
                                "process = 'poisson'\nrate = 10.0\n[generate.prompt_tokens]\n"
                                "dist = 'uniform'\nmin = 200\nmax = 2000\n[generate.output_tokens]\n"
                                "dist = 'uniform'\nmin = 20\nmax = 300\n";
  }
  std::string db(const std::string& name) const { return (dir_ / name).string(); }

  SweepSpec spec(const std::string& db_name) const {
    SweepSpec s;
    s.fixed.insert("trace", workload_);
    s.fixed.insert("db", db(db_name));
    s.fixed.insert("policy", toml::table{{"name", "chunked-prefill"}});
    return s;
  }

  static SweepAxis axis(const std::string& key, std::initializer_list<int64_t> values) {
    SweepAxis a{key, {}};
    for (int64_t v : values) a.values.push_back(v);
    return a;
  }
  static SweepAxis axis(const std::string& key, std::initializer_list<const char*> values) {
    SweepAxis a{key, {}};
    for (const char* v : values) a.values.push_back(std::string(v));
    return a;
  }

  fs::path dir_;
  std::string workload_;
};

inline std::map<int64_t, double> metric_by_point(const SweepResult& r, const std::string& name) {
  std::map<int64_t, double> out;
  for (const PointOutcome& p : r.points) {
    for (const Metric& m : p.metrics) {
      if (m.name == name) out[p.point] = m.value;
    }
  }
  return out;
}

// One value of a query on the database at `path`, as text ("" when there is no row or it is NULL).
inline std::string query_one(const std::string& path, const std::string& sql) {
  auto db = Database::open_read_only(path);
  EXPECT_TRUE(db.ok());
  if (!db.ok()) return "";
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db.value()->handle(), sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  return out;
}

// Runs `sql` on the database at `path` (a test's way of shaping a database by hand).
inline void exec(const std::string& path, const std::string& sql) {
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  Status s = db.value()->exec(sql.c_str());
  ASSERT_TRUE(s.ok()) << s.error().message;
}

}  // namespace servesim
