#include "analysis/metrics/metrics.h"
#include "analysis/metrics/token_gaps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace servesim {
namespace {

std::map<std::string, double> by_name(const std::vector<Metric>& metrics) {
  std::map<std::string, double> out;
  for (const Metric& m : metrics) out[m.name] = m.value;
  return out;
}

TEST(Percentile, MatchesNumpyLinear) {
  // Expected values from numpy 2.4: np.percentile(a, p) with the default method="linear".
  const std::vector<double> ps = {0, 10, 33.3, 50, 90, 99, 100};
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> cases = {
      {{1, 2, 3, 4}, {1.0, 1.3, 1.9989999999999999, 2.5, 3.7, 3.9699999999999998, 4.0}},
      {{15, 20, 35, 40, 50}, {15.0, 17.0, 24.979999999999997, 35.0, 46.0, 49.6, 50.0}},
      {{0.5}, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
      {{0.3, 1.1, 2.0, 3.2, 4.4, 7.7, 9.9},
       {0.3, 0.7800000000000001, 1.9981999999999998, 3.2, 8.580000000000002, 9.767999999999999,
        9.9}},
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {1.0, 1.9, 3.997, 5.5, 9.1, 9.91, 10.0}},
      {{0.1, 0.2, 0.3}, {0.1, 0.12000000000000001, 0.1666, 0.2, 0.28, 0.298, 0.3}},
  };
  for (const auto& [values, expected] : cases) {
    for (size_t i = 0; i < ps.size(); ++i) {
      EXPECT_DOUBLE_EQ(percentile(values, ps[i]), expected[i]) << "p" << ps[i];
    }
  }
}

TEST(WeightedPercentile, EqualsPercentileOfExpandedSample) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<WeightedValue> runs;
    std::vector<double> expanded;
    double value = 0;
    const int num_runs = 1 + static_cast<int>(rng() % 20);
    for (int r = 0; r < num_runs; ++r) {
      value += 0.001 * static_cast<double>(1 + rng() % 100);
      const int64_t count = 1 + static_cast<int64_t>(rng() % (trial % 2 ? 3 : 500));
      runs.push_back({value, count});
      expanded.insert(expanded.end(), static_cast<size_t>(count), value);
    }
    for (double p : {0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
      EXPECT_DOUBLE_EQ(weighted_percentile(runs, p), percentile(expanded, p))
          << "trial " << trial << " p" << p;
    }
  }
}

// A hand-built run of the seeds' five-request example with the unit backend (one iteration = 1 s,
// prompts of one token, the prefill iteration emits the first token). Each request emits one token
// per iteration from `scheduled` until its output is complete.
struct ToyRequest {
  const char* id;
  int arrival, output, scheduled;
};

std::vector<Metric> run_toy(const std::vector<ToyRequest>& toy, int max_num_seqs) {
  constexpr Time kStep = kNsPerSecond;
  std::deque<RequestSpec> specs;
  std::vector<Request> requests(toy.size());
  int end = 0;
  for (size_t i = 0; i < toy.size(); ++i) {
    const ToyRequest& t = toy[i];
    specs.push_back({t.id, t.arrival * kStep, 1, t.output, 0, 0});
    Request& r = requests[i];
    r.spec = &specs.back();
    r.index = static_cast<int32_t>(i);
    r.prompt_tokens = 1;
    r.arrival = t.arrival * kStep;
    r.output_tokens = t.output;
    r.replica = 0;
    end = std::max(end, t.scheduled + t.output);
  }
  MetricsAccumulator acc({.max_num_seqs = max_num_seqs, .replicas = 1});
  for (int step = 0; step < end; ++step) {
    IterationRecord it;
    it.step = step;
    it.start = step * kStep;
    it.duration = kStep;
    std::vector<BatchItem> items;
    for (size_t i = 0; i < toy.size(); ++i) {
      const ToyRequest& t = toy[i];
      if (step < t.scheduled || step >= t.scheduled + t.output) continue;
      Request& r = requests[i];
      BatchItem item;
      item.seq = &r;
      item.new_tokens = 1;
      item.emitted = true;
      item.token_gap = step == t.scheduled ? -1 : kStep;  // the first token has no gap
      if (step == t.scheduled) r.scheduled = it.start;
      if (step == t.scheduled) r.first_token = it.start + kStep;
      ++r.num_output;
      items.push_back(item);
      ++it.emitted;
    }
    it.num_seqs = it.emitted;
    acc.on_iteration(it, items);
    for (size_t i = 0; i < toy.size(); ++i) {
      Request& r = requests[i];
      if (step == toy[i].scheduled + toy[i].output - 1) {
        r.status = RequestStatus::kDone;
        r.last_token = r.finished = it.start + kStep;
        acc.on_request(r);
      }
    }
  }
  return acc.compute();
}

TEST(MetricsAccumulator, SeedToyStatic) {
  const auto m = by_name(
      run_toy({{"A", 0, 3, 0}, {"B", 0, 8, 0}, {"C", 0, 5, 0}, {"D", 2, 4, 8}, {"E", 4, 3, 8}}, 3));
  EXPECT_NEAR(m.at("duration"), 12, 1e-4);
  EXPECT_NEAR(m.at("queue_mean"), 2.0, 1e-4);
  EXPECT_NEAR(m.at("e2el_mean"), 6.6, 1e-4);
  EXPECT_NEAR(m.at("slot_utilization"), 23.0 / 36, 1e-4);
  EXPECT_NEAR(m.at("output_throughput"), 23.0 / 12, 1e-4);
  EXPECT_EQ(m.at("completed"), 5);
  EXPECT_EQ(m.at("total_output_tokens"), 23);
  EXPECT_EQ(m.at("total_input_tokens"), 5);
  EXPECT_EQ(m.at("iterations"), 12);
  EXPECT_NEAR(m.at("ttft_mean"), (1 + 1 + 1 + 7 + 5) / 5.0, 1e-4);
  EXPECT_NEAR(m.at("itl_mean"), 1.0, 1e-9);
  EXPECT_NEAR(m.at("tpot_mean"), 1.0, 1e-9);
}

TEST(MetricsAccumulator, SeedToyContinuous) {
  const auto m = by_name(
      run_toy({{"A", 0, 3, 0}, {"B", 0, 8, 0}, {"C", 0, 5, 0}, {"D", 2, 4, 3}, {"E", 4, 3, 5}}, 3));
  EXPECT_NEAR(m.at("duration"), 8, 1e-4);
  EXPECT_NEAR(m.at("queue_mean"), 0.4, 1e-4);
  EXPECT_NEAR(m.at("e2el_mean"), 5.0, 1e-4);
  EXPECT_NEAR(m.at("slot_utilization"), 23.0 / 24, 1e-4);
  EXPECT_NEAR(m.at("output_throughput"), 2.875, 1e-4);
  EXPECT_NEAR(m.at("request_throughput"), 5.0 / 8, 1e-4);
  EXPECT_NEAR(m.at("total_token_throughput"), 28.0 / 8, 1e-4);
  EXPECT_NEAR(m.at("ttft_mean"), 1.4, 1e-4);
  EXPECT_NEAR(m.at("e2el_p50"), 5.0, 1e-4);  // e2el values 3, 8, 5, 5, 4
  EXPECT_NEAR(m.at("e2el_p90"), 6.8, 1e-4);
  EXPECT_EQ(m.count("kv_utilization_mean"), 0u);  // unit backend: KV unlimited
}

TEST(MetricsAccumulator, MetricsComeInCanonicalOrder) {
  const auto metrics = run_toy({{"A", 0, 3, 0}, {"B", 1, 2, 1}}, 2);
  const auto names = metric_names();
  size_t last = 0;
  for (const Metric& m : metrics) {
    const auto it = std::find(names.begin(), names.end(), m.name);
    ASSERT_NE(it, names.end()) << m.name;
    const auto pos = static_cast<size_t>(it - names.begin());
    EXPECT_GE(pos, last) << m.name;
    last = pos;
  }
  // All but kv_utilization_mean and the kv_*_per_replica (KV unlimited), the four rejected_<cause>
  // (none rejected), goodput and attainment (no SLOs), prefix_cacheable_requests (no prefix
  // caching), overloaded and the two backlog_growth (too few requests to tell), the two costs (no
  // price), replica_groups and kv_blocks_total (one group), and the eight of disaggregated serving
  // (kv_transfer*, the pools' utilizations).
  EXPECT_EQ(metrics.size(), names.size() - 26) << [&] { std::string s; for (const Metric& m : metrics) s += m.name + " "; return s; }();
}

// The percentiles (standard, and asked for), the std and the quantile grid equal those of the
// fully sorted values (numpy's linear percentile, population std), exactly, with ties, on both
// sides of the radix sort's threshold.
// A completed request of one output token (its spec kept in `specs`), arriving and scheduled at
// `arrival`, its token and finish at `finished`.
Request completed_request(std::deque<RequestSpec>& specs, int i, Time arrival, Time finished) {
  specs.push_back({"r" + std::to_string(i), 0, 1, 1, 0, 0});
  Request r;
  r.spec = &specs.back();
  r.status = RequestStatus::kDone;
  r.replica = 0;
  r.arrival = r.scheduled = arrival;
  r.first_token = r.finished = finished;
  r.num_output = 1;
  return r;
}

TEST(MetricsAccumulator, SelectedPercentilesEqualSortedOnes) {
  for (int n : {1, 2, 3, 10, 101, 1000, 4097}) {
    MetricsAccumulator acc({.percentiles = {99.9, 12.5}});
    std::vector<double> e2el;
    std::deque<RequestSpec> specs;
    uint64_t x = 88172645463325252ULL + static_cast<uint64_t>(n);
    for (int i = 0; i < n; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const Request r = completed_request(specs, i, 0, static_cast<Time>(x % 977) * 1000 + 1);  // many ties
      acc.on_request(r);
      e2el.push_back(to_seconds(r.finished));
    }
    std::sort(e2el.begin(), e2el.end());
    std::vector<QuantilePoint> quantiles;
    const auto m = by_name(acc.compute(&quantiles));
    for (double p : {12.5, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9}) {
      EXPECT_EQ(m.at("e2el" + percentile_suffix(p)), percentile(e2el, p)) << n << " p" << p;
    }
    double mean = 0, sq = 0;
    for (double v : e2el) mean += v / n;
    for (double v : e2el) sq += (v - mean) * (v - mean);
    EXPECT_NEAR(m.at("e2el_std"), std::sqrt(sq / n), 1e-12) << n;
    size_t seen = 0;
    for (const QuantilePoint& q : quantiles) {
      if (q.metric != "e2el") continue;
      EXPECT_EQ(q.value, percentile(e2el, 100 * q.quantile)) << n << " q" << q.quantile;
      ++seen;
    }
    EXPECT_EQ(seen, quantile_grid().size());
  }
}

// A latency's mean is exact: the values summed in fixed point of 2^-64 s, each truncated as
// static_cast<Wide>(std::ldexp(v, 64)) truncates it, over values from a nanosecond to 10^6 s
// (every binary exponent between) and their radix sort's every digit.
TEST(MetricsAccumulator, LatencyMeansAreTheFixedPointSums) {
  MetricsAccumulator acc({});
  std::deque<RequestSpec> specs;
  Wide sum = 0;
  int n = 0;
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (Time t = 1; t < from_seconds(1e6); t = t * 3 / 2 + 1) {
    for (int k = 0; k < 40; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const Time e2el = t + static_cast<Time>(x % static_cast<uint64_t>(t));
      acc.on_request(completed_request(specs, n++, 0, e2el));
      sum += static_cast<Wide>(std::ldexp(to_seconds(e2el), 64));
    }
  }
  const double expected = std::ldexp(static_cast<double>(sum), -64) / n;
  EXPECT_EQ(by_name(acc.compute()).at("e2el_mean"), expected) << n << " requests";
}

// The backlog metrics, whether the test runs on this thread (few requests) or on a thread of its
// own beside the percentiles (from 2^14 requests), are backlog_trend's over the sorted intervals,
// whatever order the requests settled in.
TEST(MetricsAccumulator, BacklogMetricsAreTheTrendOfTheSortedIntervals) {
  for (int n : {500, 20'000}) {
    MetricsAccumulator acc({});
    std::deque<RequestSpec> specs;
    std::vector<Sojourn> intervals;
    uint64_t x = 2463534242ULL + static_cast<uint64_t>(n);
    for (int i = 0; i < n; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      // Settled latest first, and served at half the arrival rate: the backlog grows.
      const Time arrival = static_cast<Time>(n - i) * 1'000'000;
      const Request r = completed_request(specs, i, arrival,
                                          static_cast<Time>(n) * 1'000'000 + arrival + static_cast<Time>(x % 1000));
      acc.on_request(r);
      intervals.push_back({to_seconds(r.arrival), to_seconds(r.finished), to_seconds(r.scheduled)});
    }
    std::sort(intervals.begin(), intervals.end());
    const BacklogTrend want = backlog_trend(intervals);
    ASSERT_TRUE(want.known);
    const auto m = by_name(acc.compute(nullptr));
    EXPECT_EQ(m.at("overloaded"), want.overloaded ? 1.0 : 0.0) << n;
    EXPECT_EQ(m.at("backlog_growth"), want.growth) << n;
    EXPECT_EQ(m.at("backlog_growth_share"), want.share()) << n;
  }
}

// sort_intervals orders as Sojourns compare, ties in due time (and never-finished requests)
// included, on both sides of its radix sort's threshold.
TEST(SortIntervals, OrdersAsSojournsCompare) {
  for (int n : {0, 1, 300, 5000}) {
    std::vector<Sojourn> intervals;
    uint64_t x = 0x2545F4914F6CDD1DULL + static_cast<uint64_t>(n);
    for (int i = 0; i < n; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const double due = static_cast<double>(x % 97) * 0.25;  // many ties
      const double fin = x % 11 == 0 ? std::numeric_limits<double>::infinity() : due + static_cast<double>(x % 1013);
      intervals.push_back({due, fin, due + static_cast<double>(x % 7)});
    }
    std::vector<Sojourn> want = intervals;
    std::sort(want.begin(), want.end());
    sort_intervals(intervals);
    EXPECT_EQ(intervals, want) << n;
  }
}

// A sharded run's accumulators, each sorting its samples when its group ends (or not: a shard
// that did not end is merged unsorted), absorbed in turn, give exactly the metrics and quantiles
// of one accumulator that saw everything; so does computing twice, and counting more after.
TEST(MetricsAccumulator, AbsorbedShardsGiveExactlyTheWholeRunsMetrics) {
  const MetricsOptions options{.percentiles = {99.9, 12.5}};
  for (int shards : {1, 2, 3, 5}) {
    for (bool all_ended : {true, false}) {
      MetricsAccumulator whole(options), parent(options);
      std::vector<std::unique_ptr<Recorder>> parts;
      for (int k = 0; k < shards; ++k) parts.push_back(parent.shard());
      std::deque<Request> requests;
      std::deque<RequestSpec> specs;
      uint64_t x = 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(shards);
      const auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
      for (int i = 0; i < 30'000; ++i) {
        const auto k = static_cast<size_t>(next() % static_cast<uint64_t>(shards));
        // An iteration whose items' gaps repeat (many ties), then a request that finished.
        IterationRecord it;
        it.replica = static_cast<int32_t>(k);
        it.duration = 1000 + static_cast<Time>(next() % 5000);
        std::vector<BatchItem> items(1 + next() % 3);
        for (BatchItem& item : items) {
          item.emitted = true;
          item.token_gap = static_cast<Time>(next() % 400) * 1000;
        }
        it.num_seqs = it.emitted = static_cast<int32_t>(items.size());
        whole.on_iteration(it, items);
        parts[k]->on_iteration(it, items);
        specs.push_back({"r" + std::to_string(i), 0, 1, 1, 0, 0});
        Request& r = requests.emplace_back();
        r.spec = &specs.back();
        r.status = RequestStatus::kDone;
        r.replica = static_cast<int16_t>(k);
        r.arrival = static_cast<Time>(i / 3) * 1'000'000;  // ties in due time
        r.scheduled = r.arrival + static_cast<Time>(next() % 50) * 1'000;
        r.first_token = r.scheduled + static_cast<Time>(next() % 700) * 1'000;
        r.num_output = 1 + static_cast<int32_t>(next() % 9);
        r.finished = r.first_token + static_cast<Time>(next() % 3000) * 1'000;
        whole.on_request(r);
        parts[k]->on_request(r);
      }
      for (size_t k = 0; k < parts.size(); ++k) {
        if (all_ended || k % 2 == 0) parts[k]->on_run_end(RunOutcome::kDone, "");
      }
      for (const auto& part : parts) parent.absorb(*part);
      std::vector<QuantilePoint> want_q, got_q;
      const std::vector<Metric> want = whole.compute(&want_q);
      const auto same = [&](const std::vector<Metric>& got, const std::string& when) {
        ASSERT_EQ(got.size(), want.size()) << when;
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i].name, want[i].name) << when;
          EXPECT_EQ(got[i].value, want[i].value) << when << ": " << got[i].name;
        }
      };
      const std::string what = std::to_string(shards) + " shards" + (all_ended ? "" : ", some unsorted");
      same(parent.compute(&got_q), what);
      ASSERT_EQ(got_q.size(), want_q.size());
      for (size_t i = 0; i < got_q.size(); ++i) {
        EXPECT_EQ(got_q[i].metric, want_q[i].metric);
        EXPECT_EQ(got_q[i].value, want_q[i].value) << what << ": " << got_q[i].metric << " at " << got_q[i].quantile;
      }
      same(parent.compute(), what + ", computed again");
      // One more request, to both: the samples are in no order again.
      Request late = requests.front();
      late.finished += 123'456'789;
      whole.on_request(late);
      parent.on_request(late);
      const std::vector<Metric> want_late = whole.compute();
      const std::vector<Metric> got_late = parent.compute();
      ASSERT_EQ(got_late.size(), want_late.size());
      for (size_t i = 0; i < got_late.size(); ++i) EXPECT_EQ(got_late[i].value, want_late[i].value) << got_late[i].name;
    }
  }
}

TEST(PercentileSuffix, NamesAsVllmDoes) {
  EXPECT_EQ(percentile_suffix(99), "_p99");
  EXPECT_EQ(percentile_suffix(50.0), "_p50");
  EXPECT_EQ(percentile_suffix(99.9), "_p99.9");
  EXPECT_EQ(percentile_suffix(12.5), "_p12.5");
  EXPECT_EQ(percentile_suffix(0), "_p0");
}

TEST(QuantileGrid, AscendsFromZeroToOneWithATail) {
  const auto g = quantile_grid();
  EXPECT_EQ(g.front(), 0.0);
  EXPECT_EQ(g.back(), 1.0);
  EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
  EXPECT_EQ(std::adjacent_find(g.begin(), g.end()), g.end());
  EXPECT_NE(std::find(g.begin(), g.end(), 0.999), g.end());
  EXPECT_NE(std::find(g.begin(), g.end(), 0.9999), g.end());
}

TEST(MetricsAccumulator, OmitsMetricsWithoutData) {
  MetricsAccumulator acc({});
  auto m = by_name(acc.compute());
  EXPECT_EQ(m.at("completed"), 0);
  EXPECT_EQ(m.count("duration"), 0u);
  EXPECT_EQ(m.count("ttft_mean"), 0u);
  EXPECT_EQ(m.count("itl_mean"), 0u);
  EXPECT_EQ(m.count("slot_utilization"), 0u);

  // One-token responses: no TPOT, no ITL. A rejected request counts, with its preemptions.
  RequestSpec spec{"a", 0, 4, 1, 0, 0};
  Request r;
  r.spec = &spec;
  r.prompt_tokens = 4;
  r.num_output = r.output_tokens = 1;
  r.status = RequestStatus::kDone;
  r.scheduled = 0;
  r.first_token = r.finished = 2 * kNsPerSecond;
  r.capped = true;
  r.preemptions = 2;
  acc.on_request(r);
  Request rejected = r;
  rejected.status = RequestStatus::kRejected;
  rejected.finished = -1;
  acc.on_request(rejected);
  Request unfinished = r;
  unfinished.status = RequestStatus::kRunning;
  unfinished.finished = -1;
  acc.on_request(unfinished);
  m = by_name(acc.compute());
  EXPECT_EQ(m.at("completed"), 1);
  EXPECT_EQ(m.at("rejected"), 1);
  EXPECT_EQ(m.at("capped"), 1);
  EXPECT_EQ(m.at("preemptions"), 6);
  EXPECT_EQ(m.count("tpot_mean"), 0u);
  EXPECT_EQ(m.count("itl_mean"), 0u);
  EXPECT_DOUBLE_EQ(m.at("ttft_p99"), 2.0);
}

TEST(MetricsAccumulator, KvUtilizationIsDurationWeighted) {
  MetricsAccumulator acc({});
  IterationRecord it;
  it.kv_blocks_total = 100;
  it.duration = 3 * kNsPerSecond;
  it.kv_blocks_used = 10;
  acc.on_iteration(it, {});
  it.duration = 1 * kNsPerSecond;
  it.kv_blocks_used = 50;
  acc.on_iteration(it, {});
  EXPECT_DOUBLE_EQ(by_name(acc.compute()).at("kv_utilization_mean"), (0.1 * 3 + 0.5) / 4);
}

// The run-length encoded ITL gives exactly the percentiles of the pooled gaps, through compaction.
TEST(MetricsAccumulator, ItlEqualsUnweightedComputation) {
  std::mt19937_64 rng(7);
  MetricsAccumulator acc({});
  std::vector<double> gaps;
  std::vector<BatchItem> items(64);
  for (int step = 0; step < 3000; ++step) {
    IterationRecord it;
    it.duration = 1'000'000 + static_cast<Time>(rng() % 50'000);
    for (BatchItem& item : items) {
      const uint64_t kind = rng() % 10;
      item.token_gap = kind == 0   ? -1
                       : kind == 1 ? it.duration + static_cast<Time>(rng() % 9000)
                                   : it.duration;
      if (item.token_gap >= 0) gaps.push_back(to_seconds(item.token_gap));
    }
    acc.on_iteration(it, items);
  }
  std::sort(gaps.begin(), gaps.end());
  double sum = 0;
  for (double g : gaps) sum += g;
  const auto m = by_name(acc.compute());
  EXPECT_NEAR(m.at("itl_mean"), sum / static_cast<double>(gaps.size()), 1e-12);
  EXPECT_DOUBLE_EQ(m.at("itl_p50"), percentile(gaps, 50));
  EXPECT_DOUBLE_EQ(m.at("itl_p90"), percentile(gaps, 90));
  EXPECT_DOUBLE_EQ(m.at("itl_p99"), percentile(gaps, 99));
  EXPECT_DOUBLE_EQ(m.at("itl_p25"), percentile(gaps, 25));
  EXPECT_DOUBLE_EQ(m.at("itl_p95"), percentile(gaps, 95));
  double sq = 0;
  const double mean = sum / static_cast<double>(gaps.size());
  for (double g : gaps) sq += (g - mean) * (g - mean);
  EXPECT_NEAR(m.at("itl_std"), std::sqrt(sq / static_cast<double>(gaps.size())), 1e-12);
}

}  // namespace
}  // namespace servesim

namespace servesim {
namespace {

// add counts every gap, ascending or not, with repeats, across merges and reports midway.
TEST(TokenGapsTest, AddCountsEveryGapAcrossMerges) {
  std::mt19937_64 rng(5);
  TokenGaps one;
  std::map<Time, int64_t> expected;
  for (int leap = 0; leap < 3000; ++leap) {
    std::vector<Time> gaps;
    Time g = static_cast<Time>(rng() % 50'000);
    const int n = static_cast<int>(rng() % 40);
    for (int j = 0; j < n; ++j) {
      g += static_cast<Time>(rng() % 4 == 0 ? 0 : rng() % 30);  // ascending, with repeats
      if (rng() % 50 == 0) g = static_cast<Time>(rng() % 50'000);  // and now and then not
      gaps.push_back(g);
    }
    const int64_t weight = static_cast<int64_t>(1 + rng() % 3);
    for (Time x : gaps) {
      one.add(x, weight);
      expected[x] += weight;
    }
    if (leap % 700 == 0) (void)one.runs();  // merge midway, as a report in progress would
  }
  const std::vector<TokenGaps::Run> want(expected.begin(), expected.end());
  const std::span<const TokenGaps::Run> by_one = one.runs();
  EXPECT_EQ(std::vector<TokenGaps::Run>(by_one.begin(), by_one.end()), want);
}

// add_decode_run gives exactly the runs of adding each iteration's gap one by one: runs of a few
// kinds sharing tables, overlapping and at different strides; more kinds than tables; contexts
// past the tables' room; and folding midway.
TEST(TokenGapsTest, DecodeRunsCountAsAddingOneByOne) {
  std::mt19937_64 rng(11);
  constexpr int64_t kOne = DecodeDurations::kOne;
  std::vector<DecodeDurations> kinds;
  for (int k = 0; k < static_cast<int>(TokenGaps::kMaxTables) + 10; ++k) {
    const int64_t count = 1 + k % 5;
    kinds.push_back({static_cast<Time>(9'000'000 + 1000 * (k % 7)), static_cast<int64_t>(300 * kOne + rng() % kOne),
                     static_cast<int64_t>(count * (40 * kOne + rng() % kOne) + kOne / 2), count, 0});
  }
  TokenGaps runs, one;
  std::map<Time, int64_t> expected;
  for (int leap = 0; leap < 4000; ++leap) {
    // Mostly a few kinds (shared tables); now and then any, or a context past the tables.
    DecodeDurations d = kinds[rng() % 8 == 0 ? rng() % kinds.size() : rng() % 4];
    d.context_sum = static_cast<int64_t>(rng() % 50 == 0 ? TokenGaps::kMaxTableEntries - 100 + rng() % 200
                                                         : rng() % 20'000);
    const auto iterations = static_cast<int64_t>(1 + rng() % 120);
    const auto n = static_cast<int64_t>(1 + rng() % 3);
    runs.add_decode_run(d, iterations, n);
    for (int64_t j = 0; j < iterations; ++j) {
      one.add(d.at(j), n);
      expected[d.at(j)] += n;
    }
    if (leap % 1500 == 0) (void)runs.runs();  // fold and merge midway
  }
  const std::vector<TokenGaps::Run> want(expected.begin(), expected.end());
  const std::span<const TokenGaps::Run> got = runs.runs();
  EXPECT_EQ(std::vector<TokenGaps::Run>(got.begin(), got.end()), want);
  const std::span<const TokenGaps::Run> by_one = one.runs();
  EXPECT_EQ(std::vector<TokenGaps::Run>(by_one.begin(), by_one.end()), want);
}

}  // namespace
}  // namespace servesim
