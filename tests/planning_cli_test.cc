// The capacity-planning commands end to end, as a user runs them: load-control flags, --goodput,
// sim sweep, sim search, sim report --sweep, sim merge, and their bad-input exits.
#include <gtest/gtest.h>

#include "cli_harness.h"

namespace servesim::testing {
namespace {

using PlanningCli = Cli;

TEST_F(PlanningCli, LoadControlsAndGoodputFromTheCommandLine) {
  const Outcome o = sim({"--trace", "pareto.toml", "--request-rate", "16", "--num-prompts", "400",
                         "--goodput", "ttft:2000", "tpot:100", "--log", "summary"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Request goodput (req/s):"), std::string::npos);
  EXPECT_NE(o.output.find("SLO attainment:"), std::string::npos);
  EXPECT_NE(o.output.find("OVERLOADED:"), std::string::npos) << o.output;
  EXPECT_EQ(metric("completed") + metric("rejected"), 400);
  EXPECT_EQ(query("SELECT overloaded FROM runs"), "1");
  EXPECT_EQ(query("SELECT count(*) FROM requests"), "0");  // --log summary
  EXPECT_EQ(query("SELECT gpus || ' ' || replicas || ' ' || tp FROM runs"), "1 1 1");
  // The closed loop: never more in flight than the limit, so it is not overloaded from the
  // server's side, but requests wait to be sent.
  const Outcome c = sim({"--trace", "pareto.toml", "--max-concurrency", "4", "--num-prompts", "200"});
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_EQ(query("SELECT max(n) FROM (SELECT (SELECT count(*) FROM requests q WHERE q.run_id = r.run_id "
                  "AND q.arrival <= r.arrival AND q.finished > r.arrival) AS n FROM requests r "
                  "WHERE r.run_id = 2)"),
            "4");
}

TEST_F(PlanningCli, BadLoadAndSloTokensExitTwoNamingThem) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--request-rate", "0"}, "request_rate"},
      {{"--request-rate", "-3"}, "request_rate"},
      {{"--max-concurrency", "0"}, "max_concurrency"},
      {{"--num-prompts", "0"}, "num_prompts"},
      {{"--burstiness", "0"}, "burstiness"},
      {{"--goodput", "ttft2000"}, "ttft2000"},
      {{"--goodput", "itl:50"}, "unknown SLO 'itl'"},
      {{"--goodput", "ttft:-1"}, "ttft:-1"},
      {{"--request-rate", "2", "--time-scale", "2"}, "time_scale"},
      {{"--burstiness", "2", "--request-rate", "inf"}, "burstiness"}};
  for (const auto& [flags, expected] : cases) {
    std::vector<std::string> args = {"--trace", "pareto.toml"};
    args.insert(args.end(), flags.begin(), flags.end());
    const Outcome o = sim(args);
    EXPECT_EQ(o.status, 2) << flags.front() << ": " << o.output;
    EXPECT_NE(o.output.find(expected), std::string::npos) << o.output;
  }
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "");  // nothing written
}

TEST_F(PlanningCli, SweepReportsATableAndRefusesBadGrids) {
  const Outcome o = sim({"sweep", "--trace", "pareto.toml", "--num-prompts", "200", "--grid",
                         "replicas=1,2", "--grid", "tp=1,3", "-j", "2", "--db", "plan.db"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("4 points run"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("2 done, 2 failed"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("cannot share evenly"), std::string::npos) << o.output;
  EXPECT_EQ(query("SELECT count(*) FROM sweep_points WHERE status = 'done' AND tp = 1", "plan.db"), "2");
  EXPECT_EQ(query("SELECT group_concat(replicas) FROM (SELECT replicas FROM sweep_points WHERE tp = 1 "
                  "ORDER BY point)", "plan.db"),
            "1,2");
  const Outcome csv = sim({"report", "--sweep", "--db", "plan.db", "--format", "csv"});
  ASSERT_EQ(csv.status, 0) << csv.output;
  EXPECT_EQ(csv.output.rfind("point,replicas,tp,status,run,gpus", 0), 0u) << csv.output;
  const Outcome json = sim({"report", "--sweep", "1", "--db", "plan.db", "--format", "json"});
  EXPECT_NE(json.output.find("\"keys\""), std::string::npos) << json.output;

  const std::string file = write("plan.toml", "name = 'from a file'\n[fixed]\ntrace = 'pareto.toml'\n"
                                              "num_prompts = 100\n[grid]\nrequest_rate = [2, 4]\n"
                                              "[grid.policy]\nname = ['continuous', 'chunked-prefill']\n");
  const Outcome f = sim({"sweep", file, "--db", "plan.db"});
  ASSERT_EQ(f.status, 0) << f.output;
  EXPECT_NE(f.output.find("Sweep 2 (from a file): 4 of 4"), std::string::npos) << f.output;
  EXPECT_EQ(query("SELECT count(*) FROM sweep_points WHERE \"policy.name\" = 'chunked-prefill'", "plan.db"), "2");

  for (const auto& [grid, expected] : std::vector<std::pair<std::string, std::string>>{
           {"replica=1,2", "unknown key (known:"}, {"replicas=", "empty list"}, {"replicas", "expected KEY=V1"},
           {"hardware=a100-80gb,nope", "no hardware preset"}}) {
    const Outcome b = sim({"sweep", "--trace", "pareto.toml", "--grid", grid, "--db", "bad.db"});
    EXPECT_EQ(b.status, 2) << grid << ": " << b.output;
    EXPECT_NE(b.output.find(expected), std::string::npos) << b.output;
  }
  const Outcome none = sim({"sweep", "--trace", "pareto.toml", "--db", "bad.db"});
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.output.find("no grid"), std::string::npos);
  EXPECT_EQ(query("SELECT count(*) FROM runs", "bad.db"), "");  // no database either
}

TEST_F(PlanningCli, SearchAnswersInOneLine) {
  const Outcome o = sim({"search", "--trace", "pareto.toml", "--num-prompts", "300", "--slo",
                         "p99_ttft=1s", "--precision", "0.05", "--db", "s.db"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Answer: max request_rate"), std::string::npos) << o.output;
  EXPECT_EQ(query("SELECT kind FROM sweeps", "s.db"), "search");
  EXPECT_EQ(query("SELECT answer LIKE 'max request_rate%' FROM sweeps", "s.db"), "1");
  const Outcome c = sim({"search", "--trace", "pareto.toml", "--num-prompts", "300", "--request-rate", "12",
                         "--slo", "p99_ttft=1s", "--grid", "hardware=t4,a100-80gb", "--grid", "replicas=1,2,4,8",
                         "--minimize", "cost_per_hour", "--db", "s.db"});
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("Answer: cheapest: hardware="), std::string::npos) << c.output;
  const Outcome bad = sim({"search", "--trace", "pareto.toml", "--slo", "p99_ttfx=1s"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("known: mean_ttft"), std::string::npos) << bad.output;
  const Outcome no_slo = sim({"search", "--trace", "pareto.toml"});
  EXPECT_EQ(no_slo.status, 2);
}

TEST_F(PlanningCli, ParallelRunsIntoOneNewDatabaseAllSucceed) {
  // Processes racing to create one file: exactly one creates it, none deletes another's.
  std::string cmd = "cd " + quote(dir_.string()) + " && for i in 1 2 3 4; do " + quote(kSim) +
                    " --trace pareto.toml --num-prompts 50 --log summary --db race.db > /dev/null 2>&1 "
                    "|| echo failed & done; wait";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[256];
  std::string out;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  EXPECT_EQ(out, "");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'done'", "race.db"), "4");
}

TEST_F(PlanningCli, MergeJoinsShards) {
  for (const char* shard : {"0/2", "1/2"}) {
    const Outcome o = sim({"sweep", "--trace", "pareto.toml", "--num-prompts", "100", "--grid",
                           "replicas=1,2,3", "--shard", shard, "--db",
                           std::string("part") + shard[0] + ".db"});
    ASSERT_EQ(o.status, 0) << o.output;
  }
  const Outcome m = sim({"merge", "part0.db", "part1.db", "--into", "all.db"});
  ASSERT_EQ(m.status, 0) << m.output;
  EXPECT_EQ(query("SELECT count(*) FROM sweeps", "all.db"), "1");
  EXPECT_EQ(query("SELECT count(*) FROM sweep_points WHERE status = 'done'", "all.db"), "3");
  EXPECT_EQ(sim({"merge", "part0.db"}).status, 2);
}

}  // namespace
}  // namespace servesim::testing
