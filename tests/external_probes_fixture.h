// The fixture of the tests of probes run by a parent process (runner/external_probes.h), without
// Ray: a parent played by the test, which runs each probe with the real `sim run --config FILE --db
// OWN.db`, as scripts/ray_search.py's tasks do, and the comparison of two searches probe by probe.
#pragma once

#include <sqlite3.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "runner/external_probes.h"
#include "runner/search.h"
#include "sim/config/toml_fields.h"
#include "tests/cli_harness.h"
#include "tests/sweep_fixture.h"

namespace servesim::probes_testing {

using nlohmann::json;

inline std::string shell_quote(const std::string& s) { return servesim::testing::quote(s); }

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One integer (or text) from a database; "" when there is no row, "NULL" for NULL.
inline std::string query(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::string out;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      out = t != nullptr ? reinterpret_cast<const char*>(t) : "NULL";
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return out;
}

// The parent: runs every probe of a request with `sim run`, each into a database of its own in
// `dir`, and answers as ray_search.py does. `requests` keeps what it was asked.
struct SimRunParent {
  fs::path dir;
  std::vector<json> requests;
  // Rewrites the answer before it is sent (a parent that fails a probe, or answers nonsense).
  std::function<std::string(json answer, const json& request)> tamper = {};

  std::string operator()(const std::string& line) {
    EXPECT_EQ(line.rfind(std::string(kProbesLinePrefix), 0), 0u) << line;
    const json request = json::parse(line.substr(kProbesLinePrefix.size()));
    requests.push_back(request);
    json results = json::array();
    for (const json& probe : request["probes"]) {
      const std::string stem = "r" + std::to_string(request["round"].get<int>()) + "_p" +
                               std::to_string(probe["point"].get<int64_t>());
      const fs::path config = dir / (stem + ".toml"), db = dir / (stem + ".db"), err = dir / (stem + ".err");
      std::ofstream(config) << probe["config"].get<std::string>();
      const std::string cmd = servesim::testing::quote(servesim::testing::kSim) + " run --config " +
                              shell_quote(config.string()) + " --db " + shell_quote(db.string()) +
                              " --quiet >/dev/null 2>" + shell_quote(err.string());
      (void)std::system(cmd.c_str());
      // As ray_search.py: the database when it holds the run, else what `sim run` said.
      if (fs::exists(db) && query(db.string(), "SELECT count(*) FROM runs") == "1") {
        results.push_back({{"point", probe["point"]}, {"db", db.string()}});
      } else {
        std::string message = read_file(err);
        if (message.rfind("sim: ", 0) == 0) message = message.substr(5);
        while (!message.empty() && message.back() == '\n') message.pop_back();
        results.push_back({{"point", probe["point"]}, {"error", message}});
      }
    }
    json answer = {{"results", results}};
    return tamper ? tamper(answer, request) : answer.dump();
  }
};

// A channel whose parent is a function of the request line.
inline ProbeChannel channel_to(std::function<std::string(const std::string&)> parent) {
  auto answer = std::make_shared<std::string>();
  ProbeChannel c;
  c.send = [parent, answer](const std::string& line) -> Status {
    *answer = parent(line);
    return Ok{};
  };
  c.receive = [answer]() -> Result<std::string> { return *answer; };
  return c;
}

inline bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

inline std::map<std::string, double> metric_map(const PointOutcome& o) {
  std::map<std::string, double> m;
  for (const Metric& x : o.metrics) m[x.name] = x.value;
  return m;
}

// Every probe of `b` is `a`'s: point, values, status, error, every metric, verdict; and the answer.
inline void expect_same_search(const SearchResult& a, const SearchResult& b) {
  EXPECT_EQ(a.answer, b.answer);
  EXPECT_EQ(a.found, b.found);
  EXPECT_EQ(a.rate, b.rate);
  EXPECT_EQ(a.best_point, b.best_point);
  ASSERT_EQ(a.probes.size(), b.probes.size());
  for (size_t i = 0; i < a.probes.size(); ++i) {
    const SearchProbe& x = a.probes[i];
    const SearchProbe& y = b.probes[i];
    EXPECT_EQ(x.point, y.point);
    ASSERT_EQ(x.values.size(), y.values.size());
    for (size_t k = 0; k < x.values.size(); ++k) EXPECT_EQ(plain_value(*x.values[k]), plain_value(*y.values[k]));
    EXPECT_EQ(x.outcome.status, y.outcome.status) << "probe " << x.point;
    EXPECT_EQ(x.outcome.error, y.outcome.error) << "probe " << x.point;
    EXPECT_EQ(x.miss, y.miss) << "probe " << x.point;
    const auto mx = metric_map(x.outcome), my = metric_map(y.outcome);
    ASSERT_EQ(mx.size(), my.size()) << "probe " << x.point;
    for (const auto& [name, v] : mx) {
      ASSERT_EQ(my.count(name), 1u) << name;
      EXPECT_TRUE(same_value(v, my.at(name))) << "probe " << x.point << " " << name << ": " << v << " vs "
                                              << my.at(name);
    }
  }
}

class ExternalProbesTest : public SweepTest {
 protected:
  SearchSpec max_rate_search(const std::string& db_name) const {
    SearchSpec s;
    s.fixed = spec(db_name).fixed;
    s.slos = {parse_slo("p99_ttft=1s").value()};
    s.precision = 0.05;
    s.start_rate = 2;
    return s;
  }
  // tp = 3 cannot run Llama-3-8B: those probes fail, with the reason.
  SearchSpec cheapest_search(const std::string& db_name) const {
    SearchSpec s;
    s.fixed = spec(db_name).fixed;
    s.fixed.insert("request_rate", 20.0);
    s.grid = {axis("tp", {3, 1}), axis("replicas", {1, 2, 3, 4, 6})};
    s.slos = {parse_slo("p99_ttft=1s").value()};
    return s;
  }
  SimRunParent parent() const {
    SimRunParent p;
    p.dir = dir_ / "parent";
    fs::create_directories(p.dir);
    return p;
  }
  // The search's runs are linked to it, each probe a sweep_points row.
  static void expect_recorded(const SearchResult& r) {
    const std::string id = std::to_string(r.sweep_id);
    EXPECT_EQ(query(r.db_path, "SELECT count(*) FROM sweep_points WHERE sweep_id = " + id),
              std::to_string(r.probes.size()));
    EXPECT_EQ(query(r.db_path, "SELECT count(*) FROM runs WHERE sweep_id IS NOT " + id), "0");
    EXPECT_EQ(query(r.db_path, "SELECT count(*) FROM sweep_points p JOIN runs r ON r.id = p.run_id "
                               "WHERE p.status = r.status AND p.sweep_id = " + id),
              query(r.db_path, "SELECT count(*) FROM runs"));
  }
};

}  // namespace servesim::probes_testing
