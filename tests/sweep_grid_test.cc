// Grids of sweeps: the order of the axes numbers the points, and a resumed sweep keeps it; tuple
// axes; a key given twice; keys of [[replicas]] groups; a resume refused while its owner runs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>

#include "analysis/storage/sweep_db.h"
#include "runner/sweep.h"
#include "sim/config/config.h"
#include "tests/sweep_fixture.h"

namespace servesim {
namespace {

// Regression: the stored grid was re-read sorted by key, so a sweep whose --grid keys were not in
// alphabetical order resumed with another point -> configuration mapping (runs twice, runs never,
// points labelled with other points' values).
TEST_F(SweepTest, AResumedSweepKeepsEachPointsConfigurationWhateverTheKeyOrder) {
  SweepSpec s = spec("order.db");
  s.grid = {axis("request_rate", {8, 9, 10}), axis("max_num_seqs", {128, 256})};
  std::atomic<bool> stop{false};
  SweepOptions first{.jobs = 1};
  first.stop = &stop;
  first.on_point = [&](const PointOutcome&, int64_t done, int64_t) {
    if (done == 2) stop = true;
  };
  auto cut = run_sweep(s, first);
  ASSERT_TRUE(cut.ok());
  ASSERT_TRUE(cut.value().interrupted);
  StoredSweep stored = [&] {
    auto d = Database::open_read_only(db("order.db"));
    return read_sweep(*d.value(), cut.value().sweep_id).value();
  }();
  EXPECT_EQ(stored.keys, (std::vector<std::string>{"request_rate", "max_num_seqs"}));
  auto parsed = parse_sweep_spec(stored.spec, "stored", stored.keys);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  SweepSpec again = parsed.value();
  for (int64_t p = 0; p < s.num_points(); ++p) EXPECT_EQ(again.describe(p), s.describe(p));
  again.fixed.insert_or_assign("db", db("order.db"));
  auto resumed = run_sweep(again, {.jobs = 2, .resume_id = cut.value().sweep_id});
  ASSERT_TRUE(resumed.ok());
  // Every point ran once, with its own values, and its row says them.
  const std::string path = db("order.db");
  EXPECT_EQ(query_one(path, "SELECT count(*) FROM runs"), "6");
  std::set<std::string> configurations;
  for (int64_t p = 0; p < 6; ++p) {
    const std::vector<const toml::node*> v = s.values(p);
    const std::string where = " FROM sweep_points WHERE point = " + std::to_string(p);
    EXPECT_EQ(query_one(path, "SELECT request_rate" + where), std::to_string(v[0]->value_or(int64_t{0})));
    EXPECT_EQ(query_one(path, "SELECT max_num_seqs" + where), std::to_string(v[1]->value_or(int64_t{0})));
    const std::string config = query_one(path, "SELECT r.config FROM runs r JOIN sweep_points p ON p.run_id = r.id "
                                         "WHERE p.point = " + std::to_string(p));
    EXPECT_NE(config.find("max_num_seqs = " + std::to_string(v[1]->value_or(int64_t{0}))), std::string::npos)
        << "point " << p << ":\n" << config;
    configurations.insert(config);
  }
  EXPECT_EQ(configurations.size(), 6u);
}

TEST_F(SweepTest, ASweepFileNumbersPointsInTheOrderItsKeysAreWritten) {
  const std::string path = (dir_ / "plan.toml").string();
  std::ofstream(path) << "[fixed]\ntrace = '" << workload_ << "'\n[grid]\nrequest_rate = [8, 9]\n"
                      << "max_num_seqs = [128, 256]\n\"hardware,tp\" = [['a100-80gb', 1], ['h100-sxm', 2]]\n";
  auto loaded = load_sweep_file(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const SweepSpec& s = loaded.value();
  EXPECT_EQ(s.keys(), (std::vector<std::string>{"request_rate", "max_num_seqs", "hardware", "tp"}));
  EXPECT_EQ(s.num_points(), 8);  // 2 x 2 x the two pairs
  EXPECT_EQ(s.describe(1), "request_rate=8 max_num_seqs=128 hardware=h100-sxm tp=2");
  EXPECT_TRUE(check_sweep(s).ok()) << check_sweep(s).error().message;
}

TEST(SweepGrid, TupleAxesFromTheCommandLine) {
  auto pairs = parse_grid_flag("hardware,tp=(a100-80gb,8),(h100-sxm,4)");
  ASSERT_TRUE(pairs.ok()) << pairs.error().message;
  EXPECT_EQ(pairs.value().keys(), (std::vector<std::string>{"hardware", "tp"}));
  ASSERT_EQ(pairs.value().values.size(), 2u);
  EXPECT_EQ(pairs.value().value(1, 0)->value_or(std::string()), "h100-sxm");
  EXPECT_EQ(pairs.value().value(1, 1)->value_or(int64_t{0}), 4);
  for (const char* bad : {"hardware,tp=(a100-80gb,8),h100-sxm", "hardware,tp=(a100-80gb,8,1)",
                          "hardware,tp=(a100-80gb,)", "hardware,=(a,1)"}) {
    auto r = parse_grid_flag(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
}

// Regression: "policy.name" and [grid.policy] name were both accepted; the runs used one value
// and the table printed the other.
TEST_F(SweepTest, AKeyGivenTwiceIsAnErrorNamingBothPlaces) {
  const std::string path = (dir_ / "twice.toml").string();
  std::ofstream(path) << "[fixed]\ntrace = '" << workload_ << "'\n[grid]\n\"policy.name\" = ['continuous']\n"
                      << "[grid.policy]\nname = ['chunked-prefill']\n";
  auto loaded = load_sweep_file(path);
  ASSERT_FALSE(loaded.ok());
  const std::string& m = loaded.error().message;
  EXPECT_NE(m.find("'policy.name' is given twice"), std::string::npos) << m;
  EXPECT_NE(m.find(path + ":4:"), std::string::npos) << m;
  EXPECT_NE(m.find(path + ":6:"), std::string::npos) << m;
  // On the command line: the same key twice, or inside a tuple.
  SweepSpec s = spec("x.db");
  ASSERT_TRUE(add_grid_flag(s, parse_grid_flag("tp=1,2").value()).ok());
  EXPECT_FALSE(add_grid_flag(s, parse_grid_flag("tp=4").value()).ok());
  SweepSpec t = spec("y.db");
  ASSERT_TRUE(add_grid_flag(t, parse_grid_flag("tp=1,2").value()).ok());
  auto clash = add_grid_flag(t, parse_grid_flag("hardware,tp=(h100-sxm,2)").value());
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.error().message.find("'tp' is given twice"), std::string::npos) << clash.error().message;
  // A flag over a file's axis of the same key replaces it.
  auto file = load_sweep_file([&] {
    const std::string p = (dir_ / "one.toml").string();
    std::ofstream(p) << "[fixed]\ntrace = '" << workload_ << "'\n[grid]\ntp = [1, 2]\n";
    return p;
  }());
  ASSERT_TRUE(file.ok());
  SweepSpec f = file.value();
  ASSERT_TRUE(add_grid_flag(f, parse_grid_flag("tp=4").value()).ok());
  EXPECT_EQ(f.num_points(), 1);
  // A spec built by hand is checked too.
  SweepSpec h = spec("z.db");
  h.grid = {axis("tp", {1}), axis("tp", {2})};
  EXPECT_FALSE(check_sweep(h).ok());
}

// Regression: --grid replicas silently replaced the configuration's [[replicas]] groups.
TEST_F(SweepTest, GridKeysReachIntoReplicaGroupsAndNeverDropThem) {
  SweepSpec s = spec("groups.db");
  toml::array groups;
  groups.push_back(toml::table{{"count", 1}, {"hardware", "a100-80gb"}, {"tp", 1}});
  groups.push_back(toml::table{{"count", 1}, {"hardware", "h100-sxm"}, {"tp", 1}});
  s.fixed.insert("replicas", groups);
  s.grid = {axis("replicas", {1, 2})};
  Status whole = check_sweep(s);
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.error().message.find("[[replicas]] groups"), std::string::npos) << whole.error().message;
  EXPECT_NE(whole.error().message.find("replicas[0].count"), std::string::npos) << whole.error().message;
  s.grid = {axis("replicas[1].count", {1, 2}), axis("replicas[0].hardware", {"a100-80gb", "h200"})};
  ASSERT_TRUE(check_sweep(s).ok()) << check_sweep(s).error().message;
  auto r = run_sweep(s, {.jobs = 2});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().points.size(), 4u);
  for (const PointOutcome& o : r.value().points) {
    ASSERT_EQ(o.status, "done") << o.error;
    const int64_t expected_gpus = 1 + (o.point / 2 == 0 ? 1 : 2);
    EXPECT_EQ(find_metric(o.metrics, "gpus").value_or(0), static_cast<double>(expected_gpus)) << o.point;
  }
  s.grid = {axis("replicas[2].count", {1})};
  Status missing = check_sweep(s);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("2 [[replicas]] tables"), std::string::npos) << missing.error().message;
}

// Regression: --resume was accepted while the sweep's own process still ran it (11 runs for 6
// points).
TEST_F(SweepTest, AResumeIsRefusedWhileTheSweepsProcessIsAlive) {
  SweepSpec s = spec("live.db");
  s.grid = {axis("replicas", {1, 2})};
  auto db_opened = Database::open(db("live.db"));
  ASSERT_TRUE(db_opened.ok());
  auto id = begin_sweep(*db_opened.value(), {"", "sweep", s.to_toml(), s.keys(), s.num_points()});
  ASSERT_TRUE(id.ok());  // running, owned by this (live) process
  db_opened.value().reset();
  auto refused = run_sweep(s, {.jobs = 1, .resume_id = id.value()});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("is still running: process " + std::to_string(::getpid())),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(query_one(db("live.db"), "SELECT count(*) FROM runs"), "0");
  // Once its process is gone (a pid that no process has), the resume takes it over.
  auto d = Database::open(db("live.db"));
  ASSERT_TRUE(d.value()->exec("UPDATE sweeps SET pid = 999999999").ok());
  d.value().reset();
  auto resumed = run_sweep(s, {.jobs = 1, .resume_id = id.value()});
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_EQ(resumed.value().points.size(), 2u);
  EXPECT_EQ(query_one(db("live.db"), "SELECT pid FROM sweeps"), std::to_string(::getpid()));
  EXPECT_EQ(query_one(db("live.db"), "SELECT status FROM sweeps"), "done");
}

// Regression (the second hostile pass): a resume of a shard's sweep ran every shard's points, and
// merging the shards then duplicated them.
TEST_F(SweepTest, AShardsSweepResumesItsOwnPointsOnly) {
  SweepSpec s = spec("shard.db");
  s.grid = {axis("replicas", {1, 2, 3, 4})};
  auto first = run_sweep(s, {.jobs = 1, .shard = std::pair<int64_t, int64_t>(0, 2)});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value().shard, "0/2");
  EXPECT_EQ(query_one(db("shard.db"), "SELECT shard FROM sweeps"), "0/2");
  auto again = run_sweep(s, {.jobs = 1, .resume_id = first.value().sweep_id});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again.value().points.empty());  // shard 1's points are another database's
  EXPECT_EQ(query_one(db("shard.db"), "SELECT count(*) FROM runs"), "2");
  auto other = run_sweep(s, {.jobs = 1, .shard = std::pair<int64_t, int64_t>(1, 2), .resume_id = first.value().sweep_id});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("was run as shard 0/2"), std::string::npos) << other.error().message;
}

// Regression: a key twice under two spellings ([01] and [1]) or inside one tuple, and a value
// twice, were accepted (the run used one, the table printed another, or a point ran twice).
TEST_F(SweepTest, AKeyOrAValueTwiceInOneAxisIsRefused) {
  toml::table groups;
  toml::array two;
  two.push_back(toml::table{{"count", 1}});
  two.push_back(toml::table{{"count", 1}});
  groups.insert("replicas", two);
  EXPECT_TRUE(set_path(groups, "replicas[1].count", toml::value<int64_t>(3)).ok());
  Status zero = set_path(groups, "replicas[01].count", toml::value<int64_t>(3));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("without leading zeros"), std::string::npos) << zero.error().message;
  SweepSpec s = spec("twice.db");
  s.grid = {parse_grid_flag("tp,tp=(1,2)").value()};
  Status tuple = check_sweep(s);
  ASSERT_FALSE(tuple.ok());
  EXPECT_NE(tuple.error().message.find("the key 'tp' is given twice"), std::string::npos) << tuple.error().message;
  s.grid = {axis("tp", {1, 1})};
  Status value = check_sweep(s);
  ASSERT_FALSE(value.ok());
  EXPECT_NE(value.error().message.find("the value 1 is given twice"), std::string::npos) << value.error().message;
}

// Regression: a resume run from another folder used another file of the same relative name.
TEST_F(SweepTest, FilesAreStoredByAbsolutePathSoAResumeRunsTheSameOnes) {
  fs::create_directories(dir_ / "plans");
  std::ofstream(dir_ / "plans" / "w.toml") << "[generate]\nrequests = 100\nseed = 5\n[generate.arrival]\n"
                                              "process = 'poisson'\nrate = 10.0\n[generate.output_tokens]\n"
                                              "dist = 'fixed'\nvalue = 5\n";
  std::ofstream(dir_ / "plans" / "plan.toml") << "[fixed]\ntrace = 'w.toml'\n[grid]\nreplicas = [1, 2]\n";
  auto loaded = load_sweep_file((dir_ / "plans" / "plan.toml").string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  // Beside the sweep file, as a workload file's [replay] path.
  EXPECT_EQ(loaded.value().fixed["trace"].value_or(std::string()), (dir_ / "plans" / "w.toml").string());
  SweepSpec flags = spec("x.db");
  flags.fixed.insert_or_assign("trace", "pareto.toml");  // a preset's name stays a name
  absolutize_paths(flags, dir_.string());
  EXPECT_EQ(flags.fixed["trace"].value_or(std::string()), "pareto.toml");
}

}  // namespace
}  // namespace servesim
