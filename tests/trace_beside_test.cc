// Tests of workloads/trace_beside.h: a trace read on its own thread gives the rows replay_trace
// gives, in place, and stops at a bad row (kFailed) or an unsorted one (kReadAgain); and of `sim`
// reading a trace beside the run: the same rows as reading it first, and nothing recorded when the
// trace turns out bad.
#include "workloads/trace_beside.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli_harness.h"
#include "tests/test_util.h"
#include "workloads/replay.h"
#include "workloads/vidur_trace.h"

namespace servesim {
namespace {

using namespace servesim::testing;

// A Vidur trace of `rows` rows (more than a block of the reader's and than one publication), row
// `bad` (0-based; -1: none) with an output of "x", rows `swap` and `swap + 1` swapped (-1: none).
std::string vidur_text(int rows, int bad = -1, int swap = -1) {
  std::vector<std::string> lines;
  for (int i = 0; i < rows; ++i) {
    const std::string output = i == bad ? "x" : std::to_string(1 + i % 37);
    lines.push_back(std::to_string(1.5 + i * 0.25) + "," + std::to_string(1 + (i * 7919) % 900) + "," + output);
  }
  if (swap >= 0) std::swap(lines[static_cast<size_t>(swap)], lines[static_cast<size_t>(swap) + 1]);
  std::string text = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

// An Azure trace of `rows` rows a quarter second apart from 2023-11-16 18:15:46.68059, rows `swap`
// and `swap + 1` swapped (-1: none).
std::string azure_text(int rows, int swap = -1) {
  std::vector<std::string> lines;
  for (int i = 0; i < rows; ++i) {
    const int64_t ns = 46'680'590'000 + int64_t{i} * 250'000'000;  // since 18:15:00
    const int64_t minutes = ns / 60'000'000'000, seconds = ns / 1'000'000'000 % 60, nanos = ns % 1'000'000'000;
    char time[64];
    std::snprintf(time, sizeof time, "2023-11-16 %02d:%02d:%02d.%09d", static_cast<int>(18 + (15 + minutes) / 60),
                  static_cast<int>((15 + minutes) % 60), static_cast<int>(seconds), static_cast<int>(nanos));
    lines.push_back(std::string(time) + "," + std::to_string(1 + (i * 7919) % 900) + "," + std::to_string(1 + i % 37));
  }
  if (swap >= 0) std::swap(lines[static_cast<size_t>(swap)], lines[static_cast<size_t>(swap) + 1]);
  std::string text = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

ReplayOptions beside_options(const std::string& path) {
  ReplayOptions o;
  o.path = path;
  o.format = TraceFormat::kVidur;
  o.columns = vidur_columns();
  return o;
}

// Every row the stream gives, until it gives nullptr.
std::vector<RequestSpec> drain(TraceReadBeside& t) {
  std::vector<RequestSpec> rows;
  while (const RequestSpec* r = t.next_in_place()) rows.push_back(*r);
  return rows;
}

// Reads options.path beside, to its end, and expects replay_trace's rows of it (ids, lines,
// arrivals shifted to start at 0, tokens). Returns them.
std::vector<RequestSpec> expect_replay_rows(const ReplayOptions& options) {
  ReplayOptions replay;
  replay.path = options.path;
  auto whole = replay_trace(replay);
  EXPECT_TRUE(whole.ok()) << whole.error().message;
  auto started = TraceReadBeside::start(options);
  EXPECT_TRUE(started.ok()) << started.error().message;
  if (!whole.ok() || !started.ok()) return {};
  TraceReadBeside& t = *started.value();
  const int64_t expected = t.expected_rows();  // judged from the first 1,024 rows
  EXPECT_GT(expected, 1024);
  const std::vector<RequestSpec> rows = drain(t);
  EXPECT_EQ(t.error(), "");
  EXPECT_EQ(t.wait(), TraceReadBeside::Outcome::kRead);
  EXPECT_EQ(t.rows(), static_cast<int64_t>(rows.size()));
  EXPECT_EQ(t.expected_rows(), t.rows());  // exact once read
  EXPECT_EQ(rows.size(), whole.value().requests.size());
  for (size_t i = 0; i < rows.size() && i < whole.value().requests.size(); ++i) {
    const RequestSpec& a = rows[i];
    const RequestSpec& b = whole.value().requests[i];
    EXPECT_EQ(a.id, b.id) << i;
    EXPECT_EQ(a.line, b.line) << i;
    EXPECT_EQ(a.arrival, b.arrival) << i;
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens) << i;
    EXPECT_EQ(a.output_tokens, b.output_tokens) << i;
  }
  return rows;
}

TEST(TraceReadBeside, GivesTheRowsReplayTraceGives) {
  const std::vector<RequestSpec> rows = expect_replay_rows(beside_options(write_temp("beside.csv", vidur_text(10'000))));
  ASSERT_EQ(rows.size(), 10'000u);
  EXPECT_EQ(rows.front().arrival, 0);
  EXPECT_EQ(rows.back().id, "r9999");
}

TEST(TraceReadBeside, GivesTheRowsOfAnAzureTrace) {
  ReplayOptions o;
  o.path = write_temp("beside_azure.csv", azure_text(9'000));
  o.format = TraceFormat::kAzure;
  const std::vector<RequestSpec> rows = expect_replay_rows(o);
  ASSERT_EQ(rows.size(), 9'000u);
  EXPECT_EQ(rows.back().arrival, int64_t{8'999} * 250'000'000);
}

TEST(TraceReadBeside, StopsAtABadRow) {
  const std::string path = write_temp("beside_bad.csv", vidur_text(9'000, 8'500));
  auto started = TraceReadBeside::start(beside_options(path));
  ASSERT_TRUE(started.ok()) << started.error().message;
  TraceReadBeside& t = *started.value();
  const std::vector<RequestSpec> rows = drain(t);
  EXPECT_EQ(rows.size(), 8'500u);  // never the bad row, nor any after it
  EXPECT_EQ(t.wait(), TraceReadBeside::Outcome::kFailed);
  EXPECT_EQ(t.failure(), path + ":8502: num_decode_tokens: expected an integer >= 1, got 'x'");
  EXPECT_EQ(t.error(), t.failure());
  EXPECT_EQ(t.next_in_place(), nullptr);
}

TEST(TraceReadBeside, StopsAtAnUnsortedRow) {
  const std::string path = write_temp("beside_unsorted.csv", vidur_text(9'000, -1, 7'000));
  auto started = TraceReadBeside::start(beside_options(path));
  ASSERT_TRUE(started.ok()) << started.error().message;
  TraceReadBeside& t = *started.value();
  const std::vector<RequestSpec> rows = drain(t);
  EXPECT_EQ(rows.size(), 7'001u);  // row 7,001 arrives before row 7,000, which is given
  EXPECT_EQ(t.wait(), TraceReadBeside::Outcome::kReadAgain);
  EXPECT_EQ(t.error(), "the trace is not in arrival order: read again, sorted");
}

TEST(TraceReadBeside, AnEmptyTraceFails) {
  const std::string path = write_temp("beside_empty.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n\n");
  auto started = TraceReadBeside::start(beside_options(path));
  ASSERT_TRUE(started.ok()) << started.error().message;
  TraceReadBeside& t = *started.value();
  EXPECT_EQ(t.next_in_place(), nullptr);
  EXPECT_EQ(t.wait(), TraceReadBeside::Outcome::kFailed);
  EXPECT_EQ(t.failure(), path + ": empty trace (no rows)");
  EXPECT_EQ(t.expected_rows(), 0);
}

TEST(TraceReadBeside, SaysOnceWhenTheReadingIsOver) {
  const std::string path = write_temp("beside_done.csv", vidur_text(20'000, 19'000));
  for (const bool late : {false, true}) {
    auto started = TraceReadBeside::start(beside_options(path));
    ASSERT_TRUE(started.ok()) << started.error().message;
    TraceReadBeside& t = *started.value();
    if (late) t.wait();  // over already: called at once, here
    std::atomic<int> calls{0};
    std::atomic<int> outcome{-1};
    t.when_read([&](TraceReadBeside::Outcome o) {
      outcome = static_cast<int>(o);
      ++calls;
    });
    t.wait();
    t.join();  // the call, on the reader's thread, is over too
    EXPECT_EQ(calls.load(), 1) << late;
    EXPECT_EQ(outcome.load(), static_cast<int>(TraceReadBeside::Outcome::kFailed)) << late;
  }
}

TEST(TraceReadBeside, ACutStopsTheRows) {
  const std::string path = write_temp("beside_cut.csv", vidur_text(5'000));
  auto started = TraceReadBeside::start(beside_options(path));
  ASSERT_TRUE(started.ok()) << started.error().message;
  TraceReadBeside& t = *started.value();
  ASSERT_NE(t.next_in_place(), nullptr);
  t.cut("cannot open database x.db");
  EXPECT_EQ(t.next_in_place(), nullptr);
  EXPECT_EQ(t.error(), "cannot open database x.db");
  EXPECT_EQ(t.wait(), TraceReadBeside::Outcome::kRead);  // the reading itself went on
}

TEST(TraceReadBeside, StoppedEarlyWhenDestroyed) {
  // The destructor stops the reader and waits for it, whatever it was doing.
  const std::string path = write_temp("beside_destroyed.csv", vidur_text(50'000));
  for (int i = 0; i < 3; ++i) {
    auto started = TraceReadBeside::start(beside_options(path));
    ASSERT_TRUE(started.ok()) << started.error().message;
    if (i == 1) {
      EXPECT_NE(started.value()->next_in_place(), nullptr);
    }
  }
}

// `sim` on a trace given as it is reads it beside the run; a [replay] table names the same trace
// read first. The rows and metrics are the same.
class TraceBesideCli : public Cli {
 protected:
  std::vector<std::string> run_args(const std::string& trace, const std::string& db) const {
    return {"--trace", trace, "--model", "llama-2-7b", "--hardware", "a100-80gb", "--replicas", "2",
            "--db", db};
  }
  std::string table(const std::string& sql, const std::string& db) const {
    return query("SELECT group_concat(x, ';') FROM (" + sql + ")", db);
  }
  // Runs `sim` on the trace `name` (holding `text`) given as it is, and on a [replay] file that
  // names it (read first): the same requests, timeline and metrics rows, one run each, and the
  // timeline's resolution `resolution` (auto: by the trace's span) in both runs' config.
  void expect_as_read_first(const std::string& name, const std::string& text, int rows,
                            const std::string& resolution = "1.0") {
    write(name, text);
    write("w.toml", "[replay]\npath = \"" + name + "\"\n");
    fs::remove(dir_ / "beside.db");
    fs::remove(dir_ / "first.db");
    const Outcome beside = sim(run_args(name, "beside.db"));
    ASSERT_EQ(beside.status, 0) << beside.output;
    const Outcome first = sim(run_args("w.toml", "first.db"));
    ASSERT_EQ(first.status, 0) << first.output;
    const std::string requests =
        "SELECT id || ',' || replica || ',' || arrival || ',' || first_token || ',' || finished AS x FROM requests "
        "ORDER BY id";
    const std::string metrics = "SELECT name || '=' || value AS x FROM metrics WHERE name NOT LIKE '%wall%' ORDER BY name";
    EXPECT_EQ(query("SELECT count(*) FROM requests", "beside.db"), std::to_string(rows));
    EXPECT_EQ(table(requests, "beside.db"), table(requests, "first.db"));
    EXPECT_EQ(table(metrics, "beside.db"), table(metrics, "first.db"));
    // Beside the reading, the simulation buckets by the second until the trace's span is known,
    // and the writer merges those buckets into the resolution found then.
    const std::string timeline =
        "SELECT replica || ',' || bucket || ',' || start || ',' || iterations || ',' || busy || ',' || "
        "prefill_tokens || ',' || decode_tokens || ',' || emitted || ',' || seqs_max || ',' || waiting_max || "
        "',' || kv_blocks_mean || ',' || kv_blocks_max || ',' || kv_blocks_total || ',' || preemptions AS x "
        "FROM timeline ORDER BY bucket, replica";
    EXPECT_EQ(table(timeline, "beside.db"), table(timeline, "first.db"));
    EXPECT_NE(query("SELECT count(*) FROM timeline", "beside.db"), "0");
    for (const char* db : {"beside.db", "first.db"}) {
      EXPECT_EQ(query("SELECT count(*) FROM runs WHERE instr(config, 'log_resolution = " + resolution + "\n') > 0", db),
                "1")
          << db << ": " << query("SELECT config FROM runs", db);
    }
    EXPECT_EQ(query("SELECT count(*) || ' ' || status FROM runs", "beside.db"), "1 done");
  }
};

TEST_F(TraceBesideCli, GivesTheRowsOfTheTraceReadFirst) { expect_as_read_first("t.csv", vidur_text(6'000), 6'000); }

TEST_F(TraceBesideCli, ALongTracesTimelineHasTheBucketsOfTheTraceReadFirst) {
  // 3,000 s of arrivals: 2 s buckets (auto_timeline_resolution).
  expect_as_read_first("long.csv", vidur_text(12'000), 12'000, "2.0");
}

TEST_F(TraceBesideCli, AnAzureTraceGivesTheRowsOfTheTraceReadFirst) {
  // Rows 3,000 and 3,001 swapped too: read again, sorted, as the [replay] file's trace is.
  for (const int swap : {-1, 3'000}) {
    SCOPED_TRACE(swap);
    expect_as_read_first("a.csv", azure_text(6'000, swap), 6'000);
  }
}

TEST_F(TraceBesideCli, ABadRowLeavesNoDatabase) {
  write("t.csv", vidur_text(6'000, 5'990));
  const Outcome o = sim(run_args("t.csv", "sim.db"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("t.csv:5992: num_decode_tokens: expected an integer >= 1, got 'x'"), std::string::npos)
      << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "sim.db"));
}

TEST_F(TraceBesideCli, ABadRowLeavesAnOlderDatabaseAsItWas) {
  write("good.csv", vidur_text(3'000));
  write("bad.csv", vidur_text(6'000, 5'990));
  ASSERT_EQ(sim(run_args("good.csv", "sim.db")).status, 0);
  const Outcome o = sim(run_args("bad.csv", "sim.db"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "1");
  EXPECT_EQ(query("SELECT count(*) FROM requests"), "3000");
}

TEST_F(TraceBesideCli, AnUnsortedTraceIsRunSortedOnce) {
  // Rows 4,000 and 4,001 swapped: the run found out at row 4,001 starts again from the sorted trace.
  expect_as_read_first("unsorted.csv", vidur_text(6'000, -1, 4'000), 6'000);
  // r4001 (line 4,003) arrives before r4000: the sorted trace's order.
  EXPECT_LT(std::stod(query("SELECT arrival FROM requests WHERE id = 'r4001'", "beside.db")),
            std::stod(query("SELECT arrival FROM requests WHERE id = 'r4000'", "beside.db")));
}

TEST_F(TraceBesideCli, ADatabaseThatCannotBeOpenedStopsTheRun) {
  // The database is opened once the trace is read; the run stops there, with open's message.
  write("t.csv", vidur_text(20'000));
  const Outcome o = sim(run_args("t.csv", "no/such/folder/sim.db"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("cannot open database no/such/folder/sim.db"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("Successful requests"), std::string::npos) << o.output;
}

TEST_F(TraceBesideCli, ASignalMidRunKeepsWhatWasLogged) {
  // 200,000 requests of 2,000 output tokens: the signal lands mid-run, after the trace was read
  // (the run's row is there once it is).
  std::string text = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  for (int i = 0; i < 200'000; ++i) text += std::to_string(i) + "e-3,100,2000\n";
  const std::string trace = write("long.csv", text);
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir_.c_str()) != 0) _exit(99);
    if (freopen("/dev/null", "w", stdout) == nullptr) _exit(97);
    if (freopen("/dev/null", "w", stderr) == nullptr) _exit(96);
    execl(kSim.c_str(), kSim.c_str(), "--trace", trace.c_str(), "--max-num-seqs", "64", nullptr);
    _exit(98);
  }
  for (int i = 0; i < 400 && query("SELECT status FROM runs") != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(query("SELECT status FROM runs"), "running");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGINT);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 130);
  EXPECT_EQ(query("SELECT status FROM runs"), "interrupted");
  EXPECT_NE(query("SELECT count(*) FROM timeline"), "0");
  EXPECT_NE(query("SELECT count(*) FROM requests WHERE status = 'unfinished'"), "0");
}

}  // namespace
}  // namespace servesim
