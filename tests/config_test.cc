#include "sim/config/config.h"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analysis/storage/database.h"
#include "runner/run.h"
#include "test_util.h"

namespace servesim {
namespace {

TEST(Config, DefaultsFollowVllm) {
  RunConfig c = resolve_config(toml::table{}).value();
  EXPECT_EQ(c.policy, "continuous");
  EXPECT_EQ(c.backend, "roofline");
  EXPECT_EQ(c.max_num_seqs, 256);
  EXPECT_EQ(c.max_num_batched_tokens, 8192);
  EXPECT_EQ(c.block_size, 16);
  EXPECT_EQ(c.kv_blocks, -1);
  EXPECT_DOUBLE_EQ(c.gpu_memory_utilization, 0.9);
  EXPECT_EQ(c.db, "sim.db");
  EXPECT_FALSE(c.seed.has_value());
}

TEST(Config, SetParsesTomlValuesAndFallsBackToStrings) {
  toml::table t;
  ASSERT_TRUE(apply_set(t, "policy.max_wait=inf").ok());
  ASSERT_TRUE(apply_set(t, "policy.release=batch").ok());
  ASSERT_TRUE(apply_set(t, "kv.blocks=512").ok());
  ASSERT_TRUE(apply_set(t, "max_num_seqs=3").ok());
  ASSERT_TRUE(apply_set(t, "policy.name=static").ok());
  RunConfig c = resolve_config(std::move(t)).value();
  EXPECT_EQ(c.kv_blocks, 512);
  EXPECT_EQ(c.max_num_seqs, 3);
  EXPECT_EQ(c.policy, "static");
  EXPECT_TRUE(std::isinf(c.policy_options["max_wait"].value_or(0.0)));
  EXPECT_EQ(c.policy_options["release"].value_or(std::string()), "batch");
  EXPECT_FALSE(c.policy_options.contains("name"));
}

TEST(Config, SetRejectsMalformedAssignments) {
  toml::table t;
  EXPECT_FALSE(apply_set(t, "kv.blocks").ok());
  EXPECT_FALSE(apply_set(t, "=3").ok());
  ASSERT_TRUE(apply_set(t, "tp=2").ok());
  Status s = apply_set(t, "tp.x=1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("not a table"), std::string::npos);
}

TEST(Config, ErrorsNameTheKeyAndWhereItCameFrom) {
  toml::table t;
  ASSERT_TRUE(apply_set(t, "max_num_seqs=0").ok());
  Result<RunConfig> c = resolve_config(std::move(t));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message, "command line: max_num_seqs: expected an integer in [1, 1048576], got 0");

  toml::table u;
  ASSERT_TRUE(apply_set(u, "kv.blokcs=3").ok());
  Result<RunConfig> d = resolve_config(std::move(u));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("kv.blokcs: unknown key"), std::string::npos);
}

TEST(Config, TheTimelineResolutionIsSecondsOrAuto) {
  EXPECT_EQ(resolve_config(toml::table{}).value().log_resolution, 0);  // auto
  toml::table a;
  ASSERT_TRUE(apply_set(a, "log_resolution=auto").ok());
  EXPECT_EQ(resolve_config(std::move(a)).value().log_resolution, 0);
  toml::table b;
  ASSERT_TRUE(apply_set(b, "log_resolution=0.5").ok());
  EXPECT_EQ(resolve_config(std::move(b)).value().log_resolution, 0.5);
  for (const char* bad : {"log_resolution=often", "log_resolution=0"}) {
    toml::table t;
    ASSERT_TRUE(apply_set(t, bad).ok());
    Result<RunConfig> c = resolve_config(std::move(t));
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.error().message.find("command line: log_resolution: expected"), std::string::npos)
        << c.error().message;
  }
}

TEST(Config, FileValuesCarryTheirLine) {
  const std::string path = servesim::testing::temp_path("config_test.toml");
  std::ofstream(path) << "backend = \"unit\"\n\nmax_num_batched_tokens = \"lots\"\n";
  Result<toml::table> t = load_config_file(path);
  ASSERT_TRUE(t.ok());
  Result<RunConfig> c = resolve_config(std::move(t.value()));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find(path + ":3:"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("max_num_batched_tokens"), std::string::npos);

  std::ofstream(path) << "backend = \n";
  Result<toml::table> bad = load_config_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(path + ":1:"), std::string::npos);
}

TEST(Config, BudgetBelowMaxNumSeqsIsAnError) {
  toml::table t{{"max_num_seqs", 64}, {"max_num_batched_tokens", 32}};
  EXPECT_FALSE(resolve_config(std::move(t)).ok());
}

TEST(Config, ResolvedConfigRoundTripsAsToml) {
  toml::table t;
  ASSERT_TRUE(apply_set(t, "policy.name=static").ok());
  RunConfig c = resolve_config(std::move(t)).value();
  toml::table opts{{"max_wait", 0.0}, {"release", "each"}};
  toml::table back = toml::parse(config_to_toml(c, opts));
  EXPECT_EQ(back["policy"]["name"].value_or(std::string()), "static");
  EXPECT_EQ(back["policy"]["release"].value_or(std::string()), "each");
  EXPECT_EQ(back["max_num_seqs"].value_or(0), 256);
  EXPECT_EQ(back["kv"]["block_size"].value_or(0), 16);
}

// db_sync: the run writes with SQLite's synchronous mode off unless normal or full is asked for;
// anything else is refused by name.
TEST(Config, TheRunWritesWithTheDatabaseSyncItIsGiven) {
  EXPECT_EQ(resolve_config(toml::table{}).value().db_sync, "off");
  toml::table bad;
  ASSERT_TRUE(apply_set(bad, "db_sync=fast").ok());
  Result<RunConfig> refused = resolve_config(std::move(bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("db_sync"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("fast"), std::string::npos) << refused.error().message;

  const std::string trace = std::string(SERVESIM_PROJECT_DIR) + "/data/workloads/seed-toy.toml";
  const std::pair<std::string, int> modes[] = {{"", 0}, {"off", 0}, {"normal", 1}, {"full", 2}};
  for (const auto& [mode, expected] : modes) {
    const std::string path = testing::temp_path("db_sync_" + (mode.empty() ? std::string("default") : mode) + ".db");
    std::filesystem::remove(path);
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message;
    toml::table t;
    ASSERT_TRUE(apply_set(t, "trace=" + trace).ok());
    ASSERT_TRUE(apply_set(t, "backend=unit").ok());
    if (!mode.empty()) {
      ASSERT_TRUE(apply_set(t, "db_sync=" + mode).ok());
    }
    Result<RunConfig> config = resolve_config(std::move(t));
    ASSERT_TRUE(config.ok()) << config.error().message;
    RunEnvironment env;
    env.db = db.value().get();
    Result<RunOutput> out = run_configuration(config.value(), env);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out.value().status, "done") << out.value().error;
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db.value()->handle(), "PRAGMA synchronous", -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(s, 0), expected) << "db_sync=" << mode;
    sqlite3_finalize(s);
  }
  auto db = Database::open(testing::temp_path("db_sync_bad.db"));
  ASSERT_TRUE(db.ok());
  EXPECT_FALSE(db.value()->set_synchronous("extra").ok());
}

}  // namespace
}  // namespace servesim
