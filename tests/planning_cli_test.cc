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

constexpr const char* kThreeHundred =
    "[generate]\nrequests = 300\nseed = 5\n[generate.arrival]\nprocess = 'poisson'\nrate = 10.0\n"
    "[generate.prompt_tokens]\ndist = 'uniform'\nmin = 200\nmax = 2000\n[generate.output_tokens]\n"
    "dist = 'uniform'\nmin = 20\nmax = 300\n";

// Regression: a row whose smaller replica counts were skipped (they could not beat the best found
// before) printed its count as if it were the fewest that pass (A100 tp8 "8 replicas" where 6
// sufficed). Here tp=1 passes at 5 and 4 is never run: 4 GPUs cannot beat tp=2 x 2 replicas.
TEST_F(PlanningCli, ASearchRowWhoseSmallerCountsWereNotRunSaysSo) {
  write("w.toml", kThreeHundred);
  const Outcome o = sim({"search", "--trace", "w.toml", "--request-rate", "20", "--slo", "p99_ttft=300ms", "--grid",
                         "tp=2,1", "--grid", "replicas=1,2,3,4,5,6,7,8", "-j", "1", "--db", "p.db"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("configuration  replicas  gpus  nodes  req/s  p99_ttft_ms  p99_tpot_ms  p99_e2el_ms  "
                          "rejected  usd/hour  verdict"),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("tp=1           <=5       5"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("pass (4 not run: cannot beat the best)"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("Answer: cheapest: tp=2 replicas=2 (4 GPUs = 1 node)"), std::string::npos) << o.output;
  // sim report --sweep gives every probe of the search its verdict.
  const Outcome r = sim({"report", "--sweep", "--db", "p.db"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("verdict"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("miss: p99_ttft 1146 ms > 300 ms"), std::string::npos) << r.output;
}

// Regression: a probe that rejected requests passed; an SLO without a unit was read as seconds.
TEST_F(PlanningCli, AProbeThatRejectsRequestsMissesAndSlosNeedUnits) {
  write("long.toml",
        "[generate]\nrequests = 200\nseed = 5\n[generate.arrival]\nprocess = 'poisson'\nrate = 4.0\n"
        "[generate.prompt_tokens]\ndist = 'uniform'\nmin = 200\nmax = 6000\n[generate.output_tokens]\n"
        "dist = 'fixed'\nvalue = 20\n");
  const std::vector<std::string> base = {"search", "--trace", "long.toml", "--model", "llama-2-7b", "--grid",
                                         "replicas=1,2", "--db", "r.db", "--slo", "p99_ttft=10s"};
  const Outcome missed = sim(base);
  ASSERT_EQ(missed.status, 0) << missed.output;
  EXPECT_NE(missed.output.find("miss: rejected 32 % of requests (64 of 200: 64 longer than the model's context)"),
            std::string::npos)
      << missed.output;
  EXPECT_NE(missed.output.find("Answer: no configuration of the grid meets the SLOs"), std::string::npos)
      << missed.output;
  std::vector<std::string> allowed = base;
  allowed.insert(allowed.end(), {"--slo", "rejected=0.5"});
  const Outcome passed = sim(allowed);
  ASSERT_EQ(passed.status, 0) << passed.output;
  EXPECT_NE(passed.output.find("Answer: cheapest: replicas=1"), std::string::npos) << passed.output;
  const Outcome bare = sim({"search", "--trace", "long.toml", "--slo", "p99_ttft=2"});
  EXPECT_EQ(bare.status, 2);
  EXPECT_NE(bare.output.find("give the unit: 2s or 2ms"), std::string::npos) << bare.output;
}

// --price-by node counts whole nodes: 3 replicas at tp 4 of an 8-GPU H100 are 12 GPUs on 2 nodes,
// priced at two p5.48xlarge, where by the GPU they cost 1.5 of them.
TEST_F(PlanningCli, WholeNodePricing) {
  write("w.toml", kThreeHundred);
  const std::vector<std::string> run = {"--trace", "w.toml", "--hardware", "h100-sxm", "--tp", "4",
                                        "--replicas", "3", "--log", "summary", "--db", "n.db"};
  const Outcome by_gpu = sim(run);
  ASSERT_EQ(by_gpu.status, 0) << by_gpu.output;
  EXPECT_NE(by_gpu.output.find("3 replicas x tp 4 = 12 GPUs (2 nodes)"), std::string::npos) << by_gpu.output;
  EXPECT_EQ(query("SELECT round(value, 2) FROM metrics WHERE name = 'cost_per_hour'", "n.db"), "82.56");
  std::vector<std::string> node = run;
  node.insert(node.end(), {"--price-by", "node"});
  const Outcome by_node = sim(node);
  ASSERT_EQ(by_node.status, 0) << by_node.output;
  EXPECT_NE(by_node.output.find("Cost (USD/hour, by node):"), std::string::npos) << by_node.output;
  EXPECT_EQ(query("SELECT round(value, 2) FROM metrics WHERE name = 'cost_per_hour' AND run_id = 2", "n.db"),
            "110.08");
  EXPECT_EQ(query("SELECT value FROM metrics WHERE name = 'nodes' AND run_id = 2", "n.db"), "2.0");
  // A hardware file without gpus_per_node cannot be priced by node: refused before anything runs.
  write("gpu.toml", "name = 'x'\nmemory_gib = 80\nmemory_bandwidth_gbs = 2000\nfp16_tflops = 300\n"
                    "fp32_tflops = 20\ninterconnect_gbs = 300\nprice_per_hour_usd = 2\n");
  const Outcome unknown = sim({"--trace", "w.toml", "--hardware", "gpu.toml", "--price-by", "node", "--db", "u.db"});
  EXPECT_EQ(unknown.status, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("gives no gpus_per_node"), std::string::npos) << unknown.output;
  const Outcome set = sim({"--trace", "w.toml", "--hardware", "gpu.toml", "--price-by", "node", "--set",
                           "gpus_per_node=4", "--replicas", "5", "--log", "summary", "--db", "u.db"});
  ASSERT_EQ(set.status, 0) << set.output;
  EXPECT_EQ(query("SELECT value FROM metrics WHERE name = 'cost_per_hour'", "u.db"), "16.0");  // 2 nodes x 4 x $2
  // A search minimising nodes says how many GPUs that is.
  const Outcome search = sim({"search", "--trace", "w.toml", "--request-rate", "20", "--slo", "p99_ttft=300ms",
                              "--grid", "tp=2,1", "--grid", "replicas=1,2,3,4,5,6,7,8", "--minimize", "nodes",
                              "--db", "s.db"});
  ASSERT_EQ(search.status, 0) << search.output;
  EXPECT_NE(search.output.find("(1 node = 4 GPUs)"), std::string::npos) << search.output;
}

// Regression: the sweep's pre-check let request_rate=1e300 and an unknown router through (they
// failed point by point); --start-rate's message gave no bound.
TEST_F(PlanningCli, BadRatesAndRoutersStopASweepBeforeItRuns) {
  for (const char* grid : {"request_rate=1,1e300", "router.name=round-robin,nosuch"}) {
    const Outcome o = sim({"sweep", "--trace", "pareto.toml", "--grid", grid, "--db", "never.db"});
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_NE(o.output.find("point 1"), std::string::npos) << o.output;
    EXPECT_FALSE(fs::exists(dir_ / "never.db")) << grid;
  }
  const Outcome start = sim({"search", "--trace", "pareto.toml", "--slo", "p99_ttft=2s", "--start-rate", "0"});
  EXPECT_EQ(start.status, 2);
  EXPECT_NE(start.output.find("expected a rate from 1e-06 to below 1e+06 requests per second, got 0"), std::string::npos)
      << start.output;
}

// Regression: eight replicas at 2 req/s (p99 queueing 10 ms) were "overloaded" on a short run:
// the outstanding count still climbed toward its level (long responses) while nothing waited, and
// a search answered a rate far too low. Overload needs the queue to grow too.
TEST_F(PlanningCli, AShortRunOfLongResponsesWithNoQueueIsNotOverloaded) {
  const Outcome idle = sim({"--trace", "azure-conv.csv", "--num-prompts", "200", "--replicas", "8",
                            "--request-rate", "2", "--log", "summary", "--db", "o.db"});
  ASSERT_EQ(idle.status, 0) << idle.output;
  EXPECT_EQ(idle.output.find("OVERLOADED"), std::string::npos) << idle.output;
  EXPECT_EQ(query("SELECT value FROM metrics WHERE name = 'overloaded'", "o.db"), "0.0");
  // One replica at 20 req/s is.
  const Outcome over = sim({"--trace", "azure-conv.csv", "--num-prompts", "2000", "--request-rate", "20",
                            "--log", "summary", "--db", "o.db"});
  ASSERT_EQ(over.status, 0) << over.output;
  EXPECT_NE(over.output.find("OVERLOADED"), std::string::npos) << over.output;
}

// Regressions of the third hostile pass. A top-level policy that every group's own policy
// replaces was used by none (the table named it); a preset name stored by a sweep was read as a
// file of that name in the folder of the resume.
TEST_F(PlanningCli, APolicyEveryGroupReplacesAndAShadowedPresetAreRefused) {
  write("groups.toml",
        "trace = 'pareto.toml'\nnum_prompts = 50\n[[replicas]]\ncount = 1\n[replicas.policy]\nname = 'continuous'\n"
        "[[replicas]]\ncount = 1\n[replicas.policy]\nname = 'static'\n");
  const Outcome policy = sim({"--config", "groups.toml", "--policy", "chunked-prefill", "--db", "g.db"});
  EXPECT_EQ(policy.status, 2) << policy.output;
  EXPECT_NE(policy.output.find("every [[replicas]] group names its own policy"), std::string::npos) << policy.output;
  EXPECT_EQ(sim({"--config", "groups.toml", "--db", "g.db", "--log", "summary"}).status, 0);
  ASSERT_EQ(sim({"sweep", "--trace", "pareto.toml", "--num-prompts", "20", "--hardware", "h100-sxm", "--grid",
                 "replicas=1,2", "--db", "p.db"})
                .status,
            0);
  write("h100-sxm", "not a hardware file\n");
  const Outcome shadowed = sim({"sweep", "--resume", "1", "--db", "p.db"});
  EXPECT_EQ(shadowed.status, 2) << shadowed.output;
  EXPECT_NE(shadowed.output.find("named a preset when the sweep was defined"), std::string::npos) << shadowed.output;
}

// Regressions of the third hostile pass: a cheapest search over traffic (each combination sized
// for other load), configuration errors every point shares found only after the sweep had begun
// (each point failed, exit 1), one value in two spellings, and a damaged merge target.
TEST_F(PlanningCli, SharedMistakesAreRefusedBeforeAnythingRuns) {
  const Outcome traffic = sim({"search", "--trace", "pareto.toml", "--request-rate", "5", "--slo", "p99_ttft=2s",
                               "--grid", "num_prompts=100,200", "--grid", "replicas=1,2", "--db", "t.db"});
  EXPECT_EQ(traffic.status, 2) << traffic.output;
  EXPECT_NE(traffic.output.find("grid key 'num_prompts' changes the traffic"), std::string::npos) << traffic.output;
  const Outcome bursty = sim({"sweep", "--trace", "azure-conv.csv", "--burstiness", "2", "--grid", "replicas=1,2",
                              "--db", "b.db"});
  EXPECT_EQ(bursty.status, 2) << bursty.output;
  EXPECT_NE(bursty.output.find("burstiness: applies to generated workloads"), std::string::npos) << bursty.output;
  const Outcome router = sim({"sweep", "--trace", "pareto.toml", "--router", "prefix-aware", "--grid",
                              "replicas=1,2", "--db", "b.db"});
  EXPECT_EQ(router.status, 2) << router.output;
  EXPECT_NE(router.output.find("routes by the replicas' prefix caches"), std::string::npos) << router.output;
  EXPECT_FALSE(fs::exists("b.db"));
  const Outcome twice = sim({"sweep", "--trace", "pareto.toml", "--grid", "request_rate=10,1e1", "--db", "b.db"});
  EXPECT_EQ(twice.status, 2) << twice.output;
  EXPECT_NE(twice.output.find("is given twice"), std::string::npos) << twice.output;
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--num-prompts", "20", "--db", "src.db", "--log", "summary"}).status, 0);
  write("damaged.db", std::string("SQLite format 3") + std::string(1, '\0') + std::string(4000, 'x'));
  const Outcome into = sim({"merge", "src.db", "--into", "damaged.db"});
  EXPECT_EQ(into.status, 2) << into.output;
  EXPECT_NE(into.output.find("--into: damaged.db"), std::string::npos) << into.output;
}

// Regressions of the second hostile pass: inputs that were dropped or misread without a word.
TEST_F(PlanningCli, InputsThatWouldBeDroppedAreRefused) {
  write("mixed.toml",
        "trace = 'pareto.toml'\nnum_prompts = 100\n[[replicas]]\ncount = 1\nhardware = 'h100-sxm'\n"
        "[[replicas]]\ncount = 1\nhardware = 'l4'\ntp = 2\n");
  // A --hardware, or a grid over it, that every group overrides.
  const Outcome hw = sim({"--config", "mixed.toml", "--hardware", "a100-80gb", "--db", "m.db"});
  EXPECT_EQ(hw.status, 2) << hw.output;
  EXPECT_NE(hw.output.find("every [[replicas]] group sets its own hardware"), std::string::npos) << hw.output;
  const Outcome grid = sim({"sweep", "--config", "mixed.toml", "--grid", "hardware=a100-80gb,l4", "--db", "m.db"});
  EXPECT_EQ(grid.status, 2) << grid.output;
  // Run options beside --resume.
  ASSERT_EQ(sim({"sweep", "--trace", "pareto.toml", "--num-prompts", "50", "--grid", "replicas=1,2", "--db", "r.db"})
                .status,
            0);
  const Outcome resume = sim({"sweep", "--resume", "1", "--db", "r.db", "--num-prompts", "5"});
  EXPECT_EQ(resume.status, 2) << resume.output;
  EXPECT_NE(resume.output.find("it takes no run options (--num-prompts)"), std::string::npos) << resume.output;
  // The same --goodput SLO twice.
  const Outcome goodput = sim({"--trace", "pareto.toml", "--goodput", "ttft:100", "ttft:5000"});
  EXPECT_EQ(goodput.status, 2) << goodput.output;
  EXPECT_NE(goodput.output.find("ttft is given twice"), std::string::npos) << goodput.output;
  // A device is no database: nothing is made beside it.
  const Outcome device = sim({"--trace", "pareto.toml", "--db", "/dev/full"});
  EXPECT_EQ(device.status, 2) << device.output;
  EXPECT_NE(device.output.find("is not a regular file"), std::string::npos) << device.output;
  EXPECT_FALSE(fs::exists("/dev/full-journal"));
  // SLO units as written.
  for (const auto& [slo, said] : std::vector<std::pair<std::string, std::string>>{
           {"p99_ttft=2S", "unknown unit 'S'"}, {"p99_ttft=0x10s", "unknown unit 'x10s'"},
           {"p99_ttft=2sec", "unknown unit 'sec'"}}) {
    const Outcome o = sim({"search", "--trace", "pareto.toml", "--slo", slo});
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_NE(o.output.find(said), std::string::npos) << o.output;
  }
}

// --rate-scale F replays F times the rate: the arrivals' span divided by F.
TEST_F(PlanningCli, RateScaleMultipliesTheRate) {
  write("w.toml", kThreeHundred);
  ASSERT_EQ(sim({"--trace", "w.toml", "--log", "requests", "--db", "a.db"}).status, 0);
  ASSERT_EQ(sim({"--trace", "w.toml", "--rate-scale", "3", "--log", "requests", "--db", "b.db"}).status, 0);
  const double a = std::stod(query("SELECT max(arrival) FROM requests", "a.db"));
  const double b = std::stod(query("SELECT max(arrival) FROM requests", "b.db"));
  EXPECT_NEAR(b, a / 3, 1e-6);
  const Outcome both = sim({"--trace", "w.toml", "--rate-scale", "3", "--time-scale", "0.5"});
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.output.find("rate_scale: cannot be combined with time_scale"), std::string::npos) << both.output;
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
