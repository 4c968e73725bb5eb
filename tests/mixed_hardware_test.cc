// Mixed hardware (issue 14, part 3): [[replicas]] groups, each with its own GPU and tensor
// parallelism, through `sim` end to end.
#include <gtest/gtest.h>

#include <string>

#include "cli_harness.h"

namespace servesim {
namespace {

class MixedHardware : public servesim::testing::Cli {
 protected:
  double metric_of(const std::string& name, const std::string& db) const {
    return std::stod(query("SELECT value FROM metrics WHERE name = '" + name + "'", db));
  }
};

constexpr const char* kMixed =
    "trace = \"pareto.toml\"\nmodel = \"llama-3-8b\"\nlog = \"requests\"\n"
    "[[replicas]]\ncount = 2\nhardware = \"h100-sxm\"\n"
    "[[replicas]]\ncount = 4\nhardware = \"l4\"\ntp = 2\n";


// Each group's replicas are what a run of that group alone has: the GPUs, KV blocks and cost add
// up; the faster GPUs decode faster; the deployment is recorded and summarised.
TEST_F(MixedHardware, GroupsAddUpAndEachReplicaRunsOnItsOwnGpu) {
  write("mixed.toml", kMixed);
  const auto o = sim({"--config", "mixed.toml", "--db", "mixed.db", "--router", "least-outstanding"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("2 x h100-sxm + 4 x l4 (tp 2) / llama-3-8b"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("6 replicas in 2 groups (see hardware) = 10 GPUs"), std::string::npos) << o.output;
  EXPECT_EQ(query("SELECT hardware || '|' || replicas || '|' || gpus FROM runs", "mixed.db"),
            "2 x h100-sxm + 4 x l4 (tp 2)|6|10");
  EXPECT_EQ(metric_of("gpus", "mixed.db"), 10);
  EXPECT_EQ(metric_of("replica_groups", "mixed.db"), 2);

  // One replica of each group alone.
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--model", "llama-3-8b", "--hardware", "h100-sxm", "--db", "h.db",
                 "--log", "summary"}).status, 0);
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--model", "llama-3-8b", "--hardware", "l4", "--tp", "2", "--db", "l.db",
                 "--log", "summary"}).status, 0);
  EXPECT_EQ(metric_of("kv_blocks_total", "mixed.db"),
            2 * metric_of("kv_blocks_per_replica", "h.db") + 4 * metric_of("kv_blocks_per_replica", "l.db"));
  EXPECT_NEAR(metric_of("cost_per_hour", "mixed.db"),
              2 * metric_of("cost_per_hour", "h.db") + 4 * metric_of("cost_per_hour", "l.db"), 1e-9);
  // The groups differ in KV per replica: no per-replica figure.
  EXPECT_EQ(query("SELECT count(*) FROM metrics WHERE name = 'kv_blocks_per_replica'", "mixed.db"), "0");

  // Replicas 0 and 1 are the H100s: their requests decode faster than the L4 pairs' (2 to 5).
  const double h100 = std::stod(query("SELECT avg((finished - first_token) / (output_tokens - 1)) FROM requests "
                                      "WHERE replica < 2 AND output_tokens > 1", "mixed.db"));
  const double l4 = std::stod(query("SELECT avg((finished - first_token) / (output_tokens - 1)) FROM requests "
                                    "WHERE replica >= 2 AND output_tokens > 1", "mixed.db"));
  EXPECT_LT(h100 * 1.5, l4) << h100 << " vs " << l4;
  // The configuration is recorded with its groups.
  EXPECT_NE(query("SELECT config FROM runs", "mixed.db").find("[[replicas]]"), std::string::npos);
}

TEST_F(MixedHardware, BadGroupsAreInputErrors) {
  const std::pair<std::string, std::string> bad[] = {
      {"trace = \"pareto.toml\"\nreplicas = []\n", "expected at least one [[replicas]] group"},
      {"trace = \"pareto.toml\"\n[[replicas]]\ncount = 0\n", "replicas[0].count"},
      {"trace = \"pareto.toml\"\n[[replicas]]\nhardware = \"l4\"\n", "replicas[0]: count is required"},
      {"trace = \"pareto.toml\"\n[[replicas]]\ncount = 1\ngpu = \"l4\"\n", "replicas[0].gpu"},
      {"trace = \"pareto.toml\"\n[[replicas]]\ncount = 1\nhardware = \"b900\"\n", "b900"},
      {"trace = \"pareto.toml\"\nreplicas = [1, 2]\n", "expected a table with count, hardware and tp"},
      {"trace = \"pareto.toml\"\nbackend = \"cpu\"\n[[replicas]]\ncount = 1\nhardware = \"l4\"\n",
       "the cpu backend measures this one machine"},
  };
  // --replicas N would silently replace the groups: refused.
  write("mixed.toml", kMixed);
  const auto flag = sim({"--config", "mixed.toml", "--replicas", "8", "--db", "flag.db"});
  EXPECT_EQ(flag.status, 2);
  EXPECT_NE(flag.output.find("--replicas 8: the configuration gives [[replicas]] groups"), std::string::npos)
      << flag.output;
  for (const auto& [text, message] : bad) {
    write("bad.toml", text);
    const auto o = sim({"--config", "bad.toml", "--db", "bad.db"});
    EXPECT_EQ(o.status, 2) << text << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << text << "\n" << o.output;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.db")) << text;
  }
}

}  // namespace
}  // namespace servesim
