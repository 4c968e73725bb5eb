// End-to-end tests of the `sim` executable, run as a user would run it.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/cli_harness.h"

namespace {
using namespace servesim::testing;
namespace fs = std::filesystem;

const std::string kToy = kData + "/workloads/seed-toy.toml";

TEST_F(Cli, StaticReproducesTheFirstSeed) {
  Outcome o = sim({"--backend", "unit", "--policy", "static", "--max-num-seqs", "3", "--trace", kToy});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Serving Benchmark Result"), std::string::npos);
  EXPECT_EQ(query("SELECT count(*) FROM requests"), "5");
  EXPECT_EQ(query("SELECT status FROM runs"), "done");
  for (const char* id : {"A", "B", "C"}) EXPECT_EQ(req(id, "scheduled"), 0) << id;
  EXPECT_EQ(req("D", "scheduled"), 8);
  EXPECT_EQ(req("E", "scheduled"), 8);
  EXPECT_EQ(req("D", "finished"), 12);
  EXPECT_EQ(req("E", "finished"), 11);
  EXPECT_NEAR(metric("duration"), 12, 1e-9);
  EXPECT_NEAR(metric("queue_mean"), 2.0, 1e-9);
  EXPECT_NEAR(metric("e2el_mean"), 6.6, 1e-9);
  EXPECT_NEAR(metric("slot_utilization"), 0.6389, 1e-4);
  EXPECT_NEAR(metric("output_throughput"), 1.9167, 1e-4);
}

TEST_F(Cli, ContinuousReproducesTheFirstSeed) {
  Outcome o = sim({"--backend", "unit", "--policy", "continuous", "--max-num-seqs", "3", "--trace", kToy});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(req("D", "scheduled"), 3);
  EXPECT_EQ(req("E", "scheduled"), 5);
  EXPECT_NEAR(metric("duration"), 8, 1e-9);
  EXPECT_NEAR(metric("queue_mean"), 0.4, 1e-9);
  EXPECT_NEAR(metric("e2el_mean"), 5.0, 1e-9);
  EXPECT_NEAR(metric("slot_utilization"), 0.9583, 1e-4);
  EXPECT_NEAR(metric("output_throughput"), 2.875, 1e-4);
}

TEST_F(Cli, StaticReproducesTheSecondSeedsBatcher) {
  Outcome o = sim({"--backend", "unit", "--policy", "static", "--max-num-seqs", "3", "--set", "policy.max_wait=inf",
                   "--set", "policy.release=batch", "--trace", kToy});
  ASSERT_EQ(o.status, 0) << o.output;
  for (const char* id : {"A", "B", "C"}) EXPECT_EQ(req(id, "finished"), 8) << id;
  for (const char* id : {"D", "E"}) EXPECT_EQ(req(id, "finished"), 12) << id;
  const std::string config = query("SELECT config FROM runs");
  EXPECT_NE(config.find("release = 'batch'"), std::string::npos) << config;
}

TEST_F(Cli, PresetsAreFoundFromAnyDirectory) {
  Outcome o = sim({"--backend", "unit", "--policy", "continuous", "--trace", "pareto.toml"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(query("SELECT count(*) FROM requests WHERE status = 'finished'"), "1000");
  Outcome missing = sim({"--trace", "nope.toml"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("pareto.toml"), std::string::npos) << missing.output;
}

TEST_F(Cli, TheSameSeedGivesTheSameRowsAndAnotherSeedOthers) {
  const std::string rows =
      "SELECT group_concat(id || ',' || arrival || ',' || scheduled || ',' || first_token || ',' || "
      "finished || ',' || output_tokens, ';') FROM (SELECT * FROM requests ORDER BY id)";
  const std::string iters =
      "SELECT group_concat(step || ',' || start || ',' || num_seqs || ',' || prefill_tokens, ';') "
      "FROM iterations";
  const std::string metrics = "SELECT group_concat(name || '=' || value, ';') FROM metrics";
  const std::string timeline =
      "SELECT group_concat(replica || ',' || bucket || ',' || iterations || ',' || busy || ',' || "
      "emitted || ',' || waiting_max || ',' || kv_blocks_mean, ';') FROM timeline";
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--db", "a.db", "--log", "iterations"}).status, 0);
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--db", "b.db", "--log", "iterations"}).status, 0);
  ASSERT_EQ(sim({"--trace", "pareto.toml", "--db", "c.db", "--seed", "7", "--log", "iterations"}).status, 0);
  for (const std::string& q : {rows, iters, metrics, timeline}) {
    EXPECT_FALSE(query(q, "a.db").empty());
    EXPECT_EQ(query(q, "a.db"), query(q, "b.db"));
    EXPECT_NE(query(q, "a.db"), query(q, "c.db"));
  }
  EXPECT_EQ(query("SELECT seed FROM runs", "c.db"), "7");
}

TEST_F(Cli, RunsAppendAndReportReadsThemBack) {
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "static", "--max-num-seqs", "3", "--trace", kToy}).status, 0);
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "continuous", "--max-num-seqs", "3", "--trace", kToy,
                 "--name", "second"}).status, 0);
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "2");
  Outcome text = sim({"report"});
  ASSERT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("continuous"), std::string::npos);
  Outcome json = sim({"report", "--run", "1", "--format", "json"});
  ASSERT_EQ(json.status, 0) << json.output;
  EXPECT_NE(json.output.find("\"duration\": 12"), std::string::npos) << json.output;
  Outcome csv = sim({"report", "--format", "csv"});
  EXPECT_NE(csv.output.find("duration,8"), std::string::npos) << csv.output;
  EXPECT_EQ(sim({"report", "--run", "9"}).status, 2);
}

// The seeds' two schedules side by side: static takes 12 steps, continuous 8 (DESIGN.md).
TEST_F(Cli, CompareAndListRunsPutRunsSideBySide) {
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "static", "--max-num-seqs", "3", "--trace", kToy}).status, 0);
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "continuous", "--max-num-seqs", "3", "--trace", kToy,
                 "--name", "second"}).status, 0);
  Outcome text = sim({"compare", "1", "2"});
  ASSERT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("Runs 1 and 2 of sim.db; differences are from run 1"), std::string::npos) << text.output;
  EXPECT_EQ(text.output.find("Warning"), std::string::npos) << text.output;  // the same workload
  // duration: 12 -> 8 steps, -4, -33.33 %.
  const size_t at = text.output.find("\nduration ");
  ASSERT_NE(at, std::string::npos) << text.output;
  std::istringstream duration(text.output.substr(at + 1, text.output.find('\n', at + 1) - at - 1));
  std::vector<std::string> cells{std::istream_iterator<std::string>(duration), {}};
  EXPECT_EQ(cells, (std::vector<std::string>{"duration", "12", "8", "-4", "-33.33%"}));
  Outcome csv = sim({"compare", "1", "2", "--format", "csv"});
  ASSERT_EQ(csv.status, 0) << csv.output;
  EXPECT_EQ(csv.output.rfind("metric,run_1,run_2,diff_2,relative_2\ncompleted,5,5,0,0\n", 0), 0u) << csv.output;
  EXPECT_NE(csv.output.find("\nduration,12,8,-4,-0.33333333333333331\n"), std::string::npos) << csv.output;
  Outcome json = sim({"compare", "2", "1", "--format", "json"});
  ASSERT_EQ(json.status, 0) << json.output;
  EXPECT_NE(json.output.find("\"baseline\": 2"), std::string::npos) << json.output;
  EXPECT_EQ(sim({"compare", "1"}).status, 2);
  EXPECT_EQ(sim({"compare", "1", "1"}).status, 2);
  Outcome missing = sim({"compare", "1", "7"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("no run 7 in sim.db; its runs are 1-2"), std::string::npos) << missing.output;

  Outcome list = sim({"list", "runs"});
  ASSERT_EQ(list.status, 0) << list.output;
  EXPECT_NE(list.output.find("\n 1          done    static      unit"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("\n 2  second  done    continuous  unit"), std::string::npos) << list.output;
  Outcome empty = sim({"list", "runs", "--db", "missing.db"});
  EXPECT_EQ(empty.status, 2) << empty.output;
}

struct BadInput {
  const char* name;
  const char* toml;
  const char* expect[3];  // substrings of the message: file, line, key
};

TEST_F(Cli, BadInputExitsTwoWithFileLineKeyAndWritesNoRun) {
  const BadInput cases[] = {
      {"malformed", "[[request]]\noutput_tokens = = 3\n", {"malformed.toml:2", "", ""}},
      {"negative", "[[request]]\nid = \"A\"\noutput_tokens = 2\n\n[[request]]\noutput_tokens = -3\n",
       {"negative.toml:6", "request[1].output_tokens", ""}},
      {"missing", "[[request]]\nprompt_tokens = 4\n", {"missing.toml:", "output_tokens", ""}},
      {"unknown_key", "[[request]]\noutput_tokens = 3\noutptu = 1\n", {"unknown_key.toml:3", "outptu", ""}},
      {"unknown_dist",
       "[generate]\nrequests = 5\n[generate.arrival]\nprocess = \"poisson\"\nrate = 1.0\n"
       "[generate.output_tokens]\ndist = \"gauss\"\n",
       {"unknown_dist.toml:7", "dist", "pareto"}},
      {"zero_rate",
       "[generate]\nrequests = 5\n[generate.arrival]\nprocess = \"poisson\"\nrate = 0\n"
       "[generate.output_tokens]\ndist = \"fixed\"\nvalue = 3\n",
       {"zero_rate.toml:5", "rate", ""}},
  };
  for (const BadInput& c : cases) {
    const std::string path = write(std::string(c.name) + ".toml", c.toml);
    Outcome o = sim({"--trace", path, "--db", "bad.db"});
    EXPECT_EQ(o.status, 2) << c.name << ": " << o.output;
    for (const char* s : c.expect) EXPECT_NE(o.output.find(s), std::string::npos) << c.name << ": " << o.output;
    EXPECT_EQ(o.output.find("Serving Benchmark"), std::string::npos) << c.name;
  }
  EXPECT_FALSE(fs::exists(dir_ / "bad.db")) << "bad input must not create a run";

  Outcome policy = sim({"--policy", "fifo", "--trace", kToy});
  EXPECT_EQ(policy.status, 2);
  EXPECT_NE(policy.output.find("known: static, continuous, chunked-prefill, prefix-cached"), std::string::npos) << policy.output;
  Outcome option = sim({"--policy", "static", "--set", "policy.release=never", "--trace", kToy});
  EXPECT_EQ(option.status, 2);
  EXPECT_NE(option.output.find("policy.release"), std::string::npos) << option.output;
  Outcome flag = sim({"--max-num-seqs", "lots", "--trace", kToy});
  EXPECT_EQ(flag.status, 2);
  Outcome config = sim({"--config", write("c.toml", "polcy = 3\n"), "--trace", kToy});
  EXPECT_EQ(config.status, 2);
  EXPECT_NE(config.output.find("c.toml:1:"), std::string::npos) << config.output;
  EXPECT_FALSE(fs::exists(dir_ / "sim.db"));
}

TEST_F(Cli, HelpAndListAreUseful) {
  Outcome help = sim({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("sim report"), std::string::npos);
  Outcome run_help = sim({"run", "--help"});
  EXPECT_EQ(run_help.status, 0);
  EXPECT_NE(run_help.output.find("--max-num-seqs"), std::string::npos);
  Outcome list = sim({"list", "policies"});
  EXPECT_EQ(list.status, 0);
  EXPECT_NE(list.output.find("kv_reserve"), std::string::npos);
  EXPECT_EQ(sim({"list", "things"}).status, 2);
  EXPECT_EQ(sim({"frobnicate"}).status, 2);
}

class CliSignals : public Cli {
 protected:
  // Starts `sim` on a long run in the background; returns its pid once the run is recorded as
  // running. Long enough that a signal lands mid-run: 200,000 requests of 1,000 output tokens.
  pid_t start_long_run() {
    const std::string workload =
        write("long.toml", "[generate]\nrequests = 200000\n[generate.arrival]\nprocess = "
                           "\"poisson\"\nrate = 1000.0\n[generate.output_tokens]\ndist = \"fixed\"\n"
                           "value = 1000\n");
    const pid_t pid = fork();
    if (pid == 0) {
      if (chdir(dir_.c_str()) != 0) _exit(99);
      if (freopen("/dev/null", "w", stdout) == nullptr) _exit(97);
      if (freopen("/dev/null", "w", stderr) == nullptr) _exit(96);
      signal(SIGINT, SIG_IGN);  // as a job started with & from a script inherits it
      execl(kSim.c_str(), kSim.c_str(), "--trace", workload.c_str(), "--max-num-seqs", "64", nullptr);
      _exit(98);
    }
    for (int i = 0; i < 400 && query("SELECT status FROM runs") != "running"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return pid;
  }
};

// SIGINT (Ctrl-C, even when inherited as ignored), SIGTERM (job schedulers), SIGHUP (a closed
// terminal), and a second Ctrl-C while the run closes, all leave the run `interrupted` with what it
// logged. Regression: SIGTERM, SIGHUP and a second Ctrl-C used to leave it `running` forever.
TEST_F(CliSignals, StopSignalsMarkTheRunInterruptedAndKeepWhatWasLogged) {
  const std::vector<std::vector<int>> cases = {{SIGINT}, {SIGTERM}, {SIGHUP}, {SIGINT, SIGINT}};
  for (const std::vector<int>& signals : cases) {
    SCOPED_TRACE(strsignal(signals.front()) + std::string(signals.size() > 1 ? " twice" : ""));
    std::filesystem::remove(dir_ / "sim.db");
    const pid_t pid = start_long_run();
    ASSERT_EQ(query("SELECT status FROM runs"), "running");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (int sig : signals) {
      kill(pid, sig);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 130);
    EXPECT_EQ(query("SELECT status FROM runs"), "interrupted");
    EXPECT_NE(query("SELECT finished_at FROM runs"), "");
    EXPECT_NE(query("SELECT count(*) FROM timeline"), "0");
    EXPECT_NE(query("SELECT count(*) FROM requests WHERE status = 'unfinished'"), "0");
  }
}

// SIGKILL cannot be handled: the row stays `running`, and `sim report` shows it as abandoned.
TEST_F(CliSignals, ARunKilledOutrightIsReportedAsAbandoned) {
  const pid_t pid = start_long_run();
  ASSERT_EQ(query("SELECT status FROM runs"), "running");
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  const Outcome o = sim({"report"});
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Status:                                  abandoned"), std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("Abandoned: process " + std::to_string(pid)), std::string::npos) << o.output;
}

}  // namespace
