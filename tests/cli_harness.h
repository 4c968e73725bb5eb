// Test fixture for end-to-end tests of the `sim` executable: runs it in a fresh folder as a user
// would, and reads what it wrote to the database.
#pragma once

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace servesim::testing {
namespace fs = std::filesystem;

inline const std::string kSim = SERVESIM_SIM_BINARY;
inline const std::string kData = std::string(SERVESIM_PROJECT_DIR) + "/data";

struct Outcome {
  int status;
  std::string output;  // stdout and stderr together
};

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / ("cli_" + std::string(info->test_suite_name()) + "_" +
                                             info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  Outcome sim(const std::vector<std::string>& args) const {
    std::string cmd = "cd " + quote(dir_.string()) + " && " + quote(kSim);
    for (const std::string& a : args) cmd += " " + quote(a);
    cmd += " 2>&1";
    Outcome o{-1, ""};
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.output.append(buf, n);
    const int st = pclose(p);
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return o;
  }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  // One value from the run's database; "NULL" for SQL NULL, "" when there is no row.
  std::string query(const std::string& sql, const std::string& db = "sim.db") const {
    sqlite3* h = nullptr;
    std::string out;
    if (sqlite3_open_v2((dir_ / db).c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
          sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char* t = sqlite3_column_text(st, 0);
        out = t != nullptr ? reinterpret_cast<const char*>(t) : "NULL";
      }
      sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return out;
  }
  double metric(const std::string& name) const {
    return std::stod(query("SELECT value FROM metrics WHERE name = '" + name +
                           "' AND run_id = (SELECT max(id) FROM runs)"));
  }
  double req(const std::string& id, const std::string& col) const {
    return std::stod(query("SELECT " + col + " FROM requests WHERE id = '" + id +
                           "' AND run_id = (SELECT max(id) FROM runs)"));
  }

  fs::path dir_;
};


// A real trace shipped with servesim (data/traces/README.md).
inline std::string shipped_trace(const std::string& name) {
  return (std::filesystem::path(SERVESIM_PROJECT_DIR) / "data" / "traces" / name).string();
}

}  // namespace servesim::testing
