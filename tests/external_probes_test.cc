// Probes run by a parent process (runner/external_probes.h), without Ray (the parent is
// tests/external_probes_fixture.h's). The search through it must equal the local one with the same
// jobs: the same probes, the same answer, the same metrics; a probe the parent could not run stops
// the search unanswered; a parent that answers nonsense, or goes away, stops it unanswered.
#include "runner/external_probes.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "sim/config/toml_fields.h"
#include "tests/external_probes_fixture.h"

namespace servesim {
namespace {

using namespace probes_testing;

TEST_F(ExternalProbesTest, MaxRateSearchEqualsTheLocalOne) {
  const SearchSpec local = max_rate_search("local.db");
  ASSERT_TRUE(check_search(local).ok());
  auto a = run_search(local, {.jobs = 2});
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(a.value().found) << a.value().answer;

  SimRunParent p = parent();
  SearchOptions options{.jobs = 2};
  options.execute = external_probe_executor(channel_to(std::ref(p)));
  auto b = run_search(max_rate_search("external.db"), options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  expect_same_search(a.value(), b.value());
  expect_recorded(b.value());
  EXPECT_EQ(b.value().executor_error, "");
  // Round by round, at most -j probes each (the k-ary rounds have two).
  ASSERT_GE(p.requests.size(), 3u);
  size_t probes = 0;
  for (size_t r = 0; r < p.requests.size(); ++r) {
    EXPECT_EQ(p.requests[r]["round"].get<size_t>(), r);
    EXPECT_LE(p.requests[r]["probes"].size(), 2u);
    probes += p.requests[r]["probes"].size();
  }
  EXPECT_EQ(probes, b.value().probes.size());
  EXPECT_EQ(p.requests.back()["probes"].size(), 2u);
  EXPECT_EQ(query(db("external.db"), "SELECT status FROM sweeps"), "done");
  EXPECT_EQ(query(db("external.db"), "SELECT answer FROM sweeps"), b.value().answer);
}

TEST_F(ExternalProbesTest, CheapestSearchEqualsTheLocalOneFailedProbesToo) {
  auto a = run_search(cheapest_search("local.db"), {.jobs = 2});
  ASSERT_TRUE(a.ok()) << a.error().message;
  SimRunParent p = parent();
  SearchOptions options{.jobs = 2};
  options.execute = external_probe_executor(channel_to(std::ref(p)));
  auto b = run_search(cheapest_search("external.db"), options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  expect_same_search(a.value(), b.value());
  expect_recorded(b.value());
  bool failed = false;
  for (const SearchProbe& probe : b.value().probes) {
    failed = failed || (probe.outcome.status == "failed" &&
                        probe.outcome.error.find("cannot share evenly") != std::string::npos);
  }
  EXPECT_TRUE(failed) << "no tp=3 probe failed with its reason";
  EXPECT_EQ(b.value().answer.rfind("cheapest: tp=1", 0), 0u) << b.value().answer;
}

// The parent could not run a probe (its task lost after its retries): that probe is interrupted
// with the parent's message and its row says so. Regression: it counted as a miss and the search
// bisected on it (a lower rate answered); now the search stops, its answer not established.
TEST_F(ExternalProbesTest, AProbeTheParentCouldNotRunStopsTheSearchUnanswered) {
  SimRunParent p = parent();
  p.tamper = [](json answer, const json& request) {
    if (request["round"] == 0) {
      answer["results"][0] = {{"point", 0}, {"error", "its Ray task failed after 3 retries: lost"}, {"lost", true}};
    }
    return answer.dump();
  };
  SearchOptions options{.jobs = 2};
  options.execute = external_probe_executor(channel_to(std::ref(p)));
  auto b = run_search(max_rate_search("external.db"), options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  const SearchResult& r = b.value();
  ASSERT_EQ(r.probes.size(), 1u);
  EXPECT_EQ(r.probes[0].outcome.status, "interrupted");
  EXPECT_EQ(r.probes[0].outcome.error, "its Ray task failed after 3 retries: lost");
  EXPECT_EQ(query(db("external.db"), "SELECT status || ' ' || ifnull(run_id, 'NULL') || ' ' || error FROM sweep_points "
                                     "WHERE point = 0"),
            "interrupted NULL its Ray task failed after 3 retries: lost");
  EXPECT_NE(r.executor_error.find("probe 0 was not run to its end"), std::string::npos) << r.executor_error;
  EXPECT_TRUE(r.interrupted);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.answer.rfind("not answered: the probes could not be run", 0), 0u) << r.answer;
}

// A database that is not the probe's one run interrupts that probe (the parent's doing, not its
// configuration's), nothing of it is merged, and the search stops unanswered.
TEST_F(ExternalProbesTest, ADatabaseWithoutTheProbesRunInterruptsTheProbe) {
  SimRunParent p = parent();
  const std::string empty = db("empty.db");
  ASSERT_TRUE(Database::open(empty).ok());
  p.tamper = [&](json answer, const json& request) {
    if (request["round"] == 0) answer["results"][0]["db"] = empty;
    return answer.dump();
  };
  SearchOptions options{.jobs = 2};
  options.execute = external_probe_executor(channel_to(std::ref(p)));
  auto b = run_search(max_rate_search("external.db"), options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  const SearchResult& r = b.value();
  ASSERT_EQ(r.probes.size(), 1u);
  EXPECT_EQ(r.probes[0].outcome.status, "interrupted");
  EXPECT_NE(r.probes[0].outcome.error.find("expected the probe's one run, found 0"), std::string::npos)
      << r.probes[0].outcome.error;
  EXPECT_EQ(query(db("external.db"), "SELECT count(*) FROM runs"), "0");
  EXPECT_TRUE(r.interrupted);
}

// Regression: the executor merged whatever run a probe's database held: another probe's database
// (a parent that mixed its answers up) was merged and linked as this probe's, and its metrics
// decided this probe's rate. Now the run must be this probe's (its name, its grid values), and one
// already linked to a point is refused.
TEST_F(ExternalProbesTest, AnotherProbesDatabaseIsRefused) {
  SimRunParent p = parent();
  std::string first;
  p.tamper = [&](json answer, const json& request) {
    if (request["round"] == 0) first = answer["results"][0]["db"].get<std::string>();
    if (request["round"] == 1) answer["results"][0]["db"] = first;
    return answer.dump();
  };
  SearchOptions options{.jobs = 2};
  options.execute = external_probe_executor(channel_to(std::ref(p)));
  auto b = run_search(max_rate_search("external.db"), options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  const SearchResult& r = b.value();
  ASSERT_EQ(r.probes.size(), 2u);
  EXPECT_EQ(r.probes[1].outcome.status, "interrupted");
  EXPECT_NE(r.probes[1].outcome.error.find("not this probe's"), std::string::npos) << r.probes[1].outcome.error;
  EXPECT_EQ(query(db("external.db"), "SELECT count(*) FROM runs"), "1");
  EXPECT_TRUE(r.interrupted);
}

// Regression: a search stopped after a pass, before the counts below it were tried, printed that
// count as the fewest that pass. It is an upper bound: "<=N (... not run: the search stopped first)".
TEST_F(ExternalProbesTest, AStoppedCheapestSearchMarksTheCountItCouldNotLower) {
  std::atomic<bool> stop{false};
  SearchOptions options{.jobs = 1};
  options.stop = &stop;
  options.on_probe = [&](const SearchProbe& p) {
    if (p.miss.empty() && p.outcome.status == "done") stop = true;
  };
  auto b = run_search(cheapest_search("stopped.db"), options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  const SearchResult& r = b.value();
  ASSERT_TRUE(r.interrupted);
  const auto row = std::find_if(r.frontier.begin(), r.frontier.end(),
                                [](const SearchResult::FrontierRow& f) { return f.probe >= 0; });
  ASSERT_NE(row, r.frontier.end());
  EXPECT_EQ(row->untried, "1-2");
  EXPECT_EQ(row->note, "the search stopped first");
}

// An answer the executor cannot read stops the search: unanswered, interrupted, with the reason.
TEST_F(ExternalProbesTest, AnAnswerItCannotReadStopsTheSearchUnanswered) {
  const std::pair<std::string, std::string> cases[] = {
      {"not json", "is not JSON"},
      {R"({"results": []})", "point 0 has no result"},
      {R"({"results": [{"point": 7, "db": "x.db"}]})", "point 7 is not a probe of the round"},
      {R"({"results": [{"point": 0, "error": "a"}, {"point": 0, "error": "b"}]})", "point 0 is answered twice"},
      {R"({"results": [{"point": 0}]})", "expected \"db\" or \"error\""},
      {R"({"error": "the cluster went away"})", "round 0: the cluster went away"},
      {R"([1, 2])", "expected an object"},
  };
  int n = 0;
  for (const auto& [answer, says] : cases) {
    const std::string name = "broken" + std::to_string(n++) + ".db";
    SearchOptions options{.jobs = 1};
    options.execute = external_probe_executor(channel_to([answer = answer](const std::string&) { return answer; }));
    auto b = run_search(max_rate_search(name), options);
    ASSERT_TRUE(b.ok()) << b.error().message;
    const SearchResult& r = b.value();
    EXPECT_NE(r.executor_error.find(says), std::string::npos) << answer << " -> " << r.executor_error;
    EXPECT_TRUE(r.interrupted);
    EXPECT_FALSE(r.found);
    EXPECT_EQ(r.answer.rfind("not answered: the probes could not be run (", 0), 0u) << r.answer;
    ASSERT_EQ(r.probes.size(), 1u) << answer;
    EXPECT_EQ(r.probes[0].outcome.status, "interrupted");
    EXPECT_EQ(query(db(name), "SELECT status FROM sweeps"), "interrupted");
    EXPECT_EQ(query(db(name), "SELECT count(*) FROM runs"), "0");
  }
}

// A signal while the search waits for the parent (Ctrl-C): interrupted, not failed; the probes
// answered before it are kept.
TEST_F(ExternalProbesTest, AStopWhileWaitingForTheParentInterruptsTheSearch) {
  SimRunParent p = parent();
  std::atomic<bool> stop{false};
  ProbeChannel c = channel_to(std::ref(p));
  const auto answered = c.receive;
  c.receive = [&, answered]() -> Result<std::string> {
    if (p.requests.size() < 3) return answered();
    stop = true;  // as the signal handler raises it
    return Error{"interrupted"};
  };
  SearchOptions options{.jobs = 2};
  options.stop = &stop;
  options.execute = external_probe_executor(c);
  auto b = run_search(max_rate_search("stopped.db"), options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  const SearchResult& r = b.value();
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.executor_error, "");
  EXPECT_EQ(r.answer, "interrupted");
  ASSERT_EQ(r.probes.size(), 3u);
  EXPECT_EQ(r.probes[2].miss, "interrupted");
  EXPECT_EQ(query(db("stopped.db"), "SELECT status FROM sweeps"), "interrupted");
  EXPECT_EQ(query(db("stopped.db"), "SELECT count(*) FROM sweep_points WHERE status = 'done'"), "2");
}

TEST(ExternalProbesProtocol, TheRequestCarriesEachProbesConfigurationExactly) {
  std::vector<toml::table> tables(2);
  tables[0].insert("trace", "w \"quoted\".toml");
  tables[0].insert("db", "search.db");
  tables[0].insert("request_rate", 0.1 + 0.2);
  tables[0].insert("policy", toml::table{{"name", "chunked-prefill"}, {"max_wait", INFINITY}});
  tables[1].insert("request_rate", 1.0 / 3);
  tables[1].insert("name", "search probe 8\nsecond line");
  const std::vector<int64_t> points = {7, 8};
  const std::vector<std::vector<const toml::node*>> values = {{tables[0].get("request_rate")},
                                                              {tables[1].get("request_rate")}};
  const std::vector<std::string> keys = {"request_rate"};
  const std::string path = "search.db";
  const std::string line = probe_request_line(ProbeRound{3, tables, points, values, keys, 1, path});
  ASSERT_EQ(line.rfind(std::string(kProbesLinePrefix), 0), 0u);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line";
  const json request = json::parse(line.substr(kProbesLinePrefix.size()));
  EXPECT_EQ(request["round"], 3);
  ASSERT_EQ(request["probes"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(request["probes"][i]["point"], points[i]);
    Result<toml::table> parsed = parse_toml(request["probes"][i]["config"].get<std::string>(), "probe.toml");
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    const toml::table& back = parsed.value();
    toml::table expected = tables[i];
    expected.erase("db");  // the parent gives each probe a database of its own
    EXPECT_EQ(back, expected) << request["probes"][i]["config"];
    // Bit for bit: the probe runs at the rate the search chose.
    EXPECT_EQ(back["request_rate"].value_or(0.0), tables[i]["request_rate"].value_or(1.0));
  }
}

// The stream channel: lines however the bytes come, the end of the input, and a stop while waiting.
TEST(ExternalProbesProtocol, TheStreamChannelReadsLinesAndStops) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::ostringstream sent;
  std::atomic<bool> stop{false};
  ProbeChannel c = stream_channel(sent, fds[0], &stop);
  ASSERT_TRUE(c.send("@@servesim-probes {}").ok());
  EXPECT_EQ(sent.str(), "@@servesim-probes {}\n");
  ASSERT_EQ(::write(fds[1], "first\nsec", 9), 9);
  auto first = c.receive();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value(), "first");
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(::write(fds[1], "ond\n", 4), 4);
  });
  auto second = c.receive();
  later.join();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value(), "second");
  // A stop raised while it waits: the wait ends at once, as an interruption.
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop = true;
  });
  const auto started = std::chrono::steady_clock::now();
  auto stopped = c.receive();
  stopper.join();
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().message, "interrupted");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  stop = false;
  ::close(fds[1]);  // the parent went away
  auto closed = c.receive();
  ASSERT_FALSE(closed.ok());
  EXPECT_NE(closed.error().message.find("closed its end"), std::string::npos) << closed.error().message;
  ::close(fds[0]);
}

}  // namespace
}  // namespace servesim
