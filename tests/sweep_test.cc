// Sweeps and searches (runner/sweep.h, runner/search.h): grids, parallel points, resume, shards
// merged, and a search whose answer equals the brute-force sweep's.
#include "runner/sweep.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "analysis/storage/merge.h"
#include "analysis/storage/sweep_db.h"
#include "runner/search.h"
#include "tests/sweep_fixture.h"

namespace servesim {
namespace {

TEST_F(SweepTest, ParallelPointsEqualSerialOnesAndFailedPointsSayWhy) {
  SweepSpec s = spec("a.db");
  s.grid = {axis("replicas", {1, 2}), axis("tp", {1, 3}), axis("request_rate", {5, 20})};
  ASSERT_TRUE(check_sweep(s).ok());
  EXPECT_EQ(s.num_points(), 8);
  EXPECT_EQ(s.describe(5), "replicas=2 tp=1 request_rate=20");
  auto serial = run_sweep(s, {.jobs = 1});
  ASSERT_TRUE(serial.ok()) << serial.error().message;
  s.fixed.insert_or_assign("db", db("b.db"));
  auto parallel = run_sweep(s, {.jobs = 3});
  ASSERT_TRUE(parallel.ok()) << parallel.error().message;
  ASSERT_EQ(serial.value().points.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const PointOutcome& a = serial.value().points[i];
    const PointOutcome& b = parallel.value().points[i];
    EXPECT_EQ(a.point, static_cast<int64_t>(i));
    EXPECT_EQ(a.status, b.status);
    ASSERT_EQ(a.metrics.size(), b.metrics.size());
    for (size_t k = 0; k < a.metrics.size(); ++k) EXPECT_EQ(a.metrics[k].value, b.metrics[k].value) << a.metrics[k].name;
    // tp = 3 cannot divide Llama-3-8B's heads: failed, with the reason, and the sweep went on.
    const bool tp3 = (i / 2) % 2 == 1;
    EXPECT_EQ(a.status, tp3 ? "failed" : "done") << i;
    if (tp3) {
      EXPECT_NE(a.error.find("cannot share evenly"), std::string::npos) << a.error;
    }
  }
  // More replicas never make TTFT worse here; a higher rate never makes it better.
  const auto ttft = metric_by_point(serial.value(), "ttft_p99");
  EXPECT_LE(ttft.at(4), ttft.at(0));
  EXPECT_GE(ttft.at(1), ttft.at(0));
}

TEST_F(SweepTest, ABadKeyOrValueIsAnErrorBeforeAnythingRuns) {
  SweepSpec s = spec("c.db");
  s.grid = {axis("replica", {1, 2})};
  const Status bad_key = check_sweep(s);
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.error().message.find("unknown key (known:"), std::string::npos) << bad_key.error().message;
  s.grid = {axis("hardware", {"a100-80gb", "h100-sxn"})};
  const Status bad_preset = check_sweep(s);
  ASSERT_FALSE(bad_preset.ok());
  EXPECT_NE(bad_preset.error().message.find("point 1 (hardware=h100-sxn)"), std::string::npos)
      << bad_preset.error().message;
  s.grid = {axis("max_num_seqs", {int64_t{0}})};
  EXPECT_FALSE(check_sweep(s).ok());
  s.grid.clear();
  EXPECT_NE(check_sweep(s).error().message.find("no grid"), std::string::npos);
  EXPECT_FALSE(fs::exists(db("c.db")));
  auto flag = parse_grid_flag("replicas=1,,2");
  EXPECT_FALSE(flag.ok());
  auto good = parse_grid_flag("hardware=a100-80gb,h100-sxm");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value().values.size(), 2u);
}

TEST_F(SweepTest, AnInterruptedSweepResumesWithoutRerunningItsFinishedPoints) {
  SweepSpec s = spec("r.db");
  s.grid = {axis("replicas", {1, 2, 3}), axis("request_rate", {5, 10})};
  std::atomic<bool> stop{false};
  SweepOptions first{.jobs = 1};
  first.stop = &stop;
  first.on_point = [&](const PointOutcome&, int64_t done, int64_t) {
    if (done == 2) stop = true;  // as a Ctrl-C after two points
  };
  auto cut = run_sweep(s, first);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut.value().interrupted);
  auto db1 = Database::open(db("r.db"));
  auto done = points_with_status(*db1.value(), cut.value().sweep_id, {"done"});
  EXPECT_EQ(done.value(), (std::vector<int64_t>{0, 1}));
  db1.value().reset();
  // Resume from the stored definition, as `sim sweep --resume` does.
  auto stored = [&] {
    auto d = Database::open_read_only(db("r.db"));
    return read_sweep(*d.value(), cut.value().sweep_id).value();
  }();
  auto parsed = parse_sweep_spec(stored.spec, "stored", stored.keys);
  ASSERT_TRUE(parsed.ok());
  SweepSpec again = parsed.value();
  again.fixed.insert_or_assign("db", db("r.db"));
  auto resumed = run_sweep(again, {.jobs = 2, .resume_id = cut.value().sweep_id});
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed.value().skipped, 2);
  ASSERT_EQ(resumed.value().points.size(), 4u);
  EXPECT_EQ(resumed.value().points.front().point, 2);
  auto db2 = Database::open(db("r.db"));
  auto all = points_with_status(*db2.value(), cut.value().sweep_id, {"done"});
  EXPECT_EQ(all.value(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(SweepTest, ShardsMergeIntoTheWholeSweep) {
  SweepSpec whole = spec("whole.db");
  whole.grid = {axis("replicas", {1, 2}), axis("request_rate", {5, 10, 20})};
  auto all = run_sweep(whole, {.jobs = 2});
  ASSERT_TRUE(all.ok());
  std::vector<std::string> parts;
  for (int64_t i = 0; i < 3; ++i) {
    SweepSpec s = whole;
    s.fixed.insert_or_assign("db", db("part" + std::to_string(i) + ".db"));
    auto r = run_sweep(s, {.jobs = 1, .shard = std::pair<int64_t, int64_t>(i, 3)});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().points.size(), 2u);
    parts.push_back(db("part" + std::to_string(i) + ".db"));
  }
  std::ostringstream log;
  ASSERT_TRUE(merge_databases(parts, db("merged.db"), log).ok()) << log.str();
  auto merged = Database::open_read_only(db("merged.db"));
  auto sweep = read_sweep(*merged.value(), std::nullopt);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep.value().id, 1);  // the three shards are one sweep
  auto done = points_with_status(*merged.value(), 1, {"done"});
  EXPECT_EQ(done.value().size(), 6u);
  // The merged points carry the same metrics as the single-file sweep's.
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(merged.value()->handle(),
                     "SELECT p.point, m.value FROM sweep_points p JOIN metrics m ON m.run_id = p.run_id "
                     "AND m.name = 'ttft_p99' ORDER BY p.point", -1, &st, nullptr);
  const auto expected = metric_by_point(all.value(), "ttft_p99");
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    EXPECT_EQ(sqlite3_column_double(st, 1), expected.at(sqlite3_column_int64(st, 0)));
    ++rows;
  }
  sqlite3_finalize(st);
  EXPECT_EQ(rows, 6);
  EXPECT_FALSE(merge_databases({db("merged.db")}, db("merged.db"), log).ok());
}

TEST(Slo, ParsesKeysUnitsAndRefusesUnknownOnes) {
  auto a = parse_slo("p99_ttft=2s");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().metric, "ttft_p99");
  EXPECT_DOUBLE_EQ(a.value().bound, 2.0);
  EXPECT_DOUBLE_EQ(parse_slo("p50_tpot=100ms").value().bound, 0.1);
  EXPECT_TRUE(parse_slo("slo_attainment=99%").value().at_least);
  const auto bad = parse_slo("p99_ttfx=2s");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("known: mean_ttft"), std::string::npos);
  EXPECT_FALSE(parse_slo("p99_ttft=0s").ok());
  EXPECT_FALSE(parse_slo("p99_ttft=fast").ok());
}

// The cheapest configuration a search finds equals the brute-force sweep's: the fewest GPUs (or
// dollars) among the points that pass, ties to the earliest point of the grid.
TEST_F(SweepTest, SearchEqualsBruteForce) {
  std::vector<Slo> slos = {parse_slo("p99_ttft=1s").value(), parse_slo("p99_tpot=60ms").value()};
  for (const std::string minimize : {"gpus", "cost_per_hour"}) {
    SweepSpec brute = spec("brute_" + minimize + ".db");
    brute.fixed.insert("request_rate", 20.0);
    brute.grid = {axis("hardware", {"t4", "a100-80gb", "h100-sxm"}), axis("tp", {1, 2}),
                  axis("replicas", {1, 2, 3, 4, 6})};
    auto all = run_sweep(brute, {.jobs = 2});
    ASSERT_TRUE(all.ok());
    int64_t best = -1;
    double best_cost = 0;
    for (const PointOutcome& p : all.value().points) {
      if (!slo_miss(slos, p).empty()) continue;
      double cost = 0;
      for (const Metric& m : p.metrics) {
        if (m.name == minimize) cost = m.value;
      }
      if (best < 0 || cost < best_cost) {
        best = p.point;
        best_cost = cost;
      }
    }
    ASSERT_GE(best, 0) << "the case needs a passing point";

    SearchSpec search;
    search.fixed = brute.fixed;
    search.fixed.insert_or_assign("db", db("search_" + minimize + ".db"));
    search.grid = brute.grid;
    search.slos = slos;
    search.minimize = minimize;
    ASSERT_TRUE(check_search(search).ok());
    auto found = run_search(search, {.jobs = 2});
    ASSERT_TRUE(found.ok()) << found.error().message;
    ASSERT_TRUE(found.value().found) << found.value().answer;
    const SearchProbe& p = found.value().probes[static_cast<size_t>(found.value().best_point)];
    EXPECT_EQ(brute.describe(best), [&] {
      std::string d;
      for (size_t i = 0; i < found.value().keys.size(); ++i) {
        d += (i ? " " : "") + found.value().keys[i] + "=" +
             (p.values[i]->is_string() ? p.values[i]->as_string()->get() : std::to_string(p.values[i]->value_or(int64_t{0})));
      }
      return d;
    }()) << minimize << ": " << found.value().answer;
    EXPECT_LT(found.value().probes.size(), all.value().points.size()) << "the search pruned nothing";
  }
}

// The largest rate: the answer passes, and a rate above it by more than the precision misses.
TEST_F(SweepTest, MaxRateIsTheEdgeOfPassing) {
  SearchSpec search;
  search.fixed = spec("rate.db").fixed;
  search.slos = {parse_slo("p99_ttft=1s").value()};
  search.precision = 0.02;
  search.start_rate = 2;
  auto found = run_search(search, {.jobs = 2});
  ASSERT_TRUE(found.ok()) << found.error().message;
  ASSERT_TRUE(found.value().found) << found.value().answer;
  const double rate = found.value().rate;
  bool passed_at = false, missed_above = false;
  double lowest_miss = INFINITY;
  for (const SearchProbe& p : found.value().probes) {
    const double r = p.values[0]->value_or(0.0);
    if (r == rate) passed_at = p.miss.empty();
    if (!p.miss.empty()) {
      lowest_miss = std::min(lowest_miss, r);
      missed_above = true;
    }
    // Monotone: every probe below the answer passed, every one above the lowest miss missed.
    if (r <= rate) {
      EXPECT_TRUE(p.miss.empty()) << r;
    }
  }
  EXPECT_TRUE(passed_at);
  EXPECT_TRUE(missed_above);
  EXPECT_LE(lowest_miss / rate - 1, search.precision + 1e-9);
}

}  // namespace
}  // namespace servesim
