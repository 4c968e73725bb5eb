// Tests of workloads/arrival.h: each process's rate and burstiness, the first arrival at 0, and the
// messages for bad [generate.arrival] tables.
#include "workloads/arrival.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace servesim {
namespace {

constexpr int kArrivals = 200'000;

Result<ArrivalProcess> make(const std::string& body) {
  const toml::table table = toml::parse(body, std::string_view("a.toml"));
  return make_arrival_process(table, "a.toml", "generate.arrival");
}

ArrivalProcess make_ok(const std::string& body) {
  auto p = make(body);
  EXPECT_TRUE(p.ok()) << p.error().message;
  return std::move(p).value();
}

std::string make_error(const std::string& body) {
  auto p = make(body);
  EXPECT_FALSE(p.ok());
  return p.ok() ? std::string() : p.error().message;
}

std::vector<Time> arrivals(const ArrivalProcess& process, int n, uint64_t seed = 1) {
  ArrivalClock clock(process, Rng(seed));
  std::vector<Time> out(n);
  for (Time& t : out) t = clock.next();
  return out;
}

struct GapStats {
  double mean = 0.0;  // seconds
  double cv = 0.0;
};

GapStats gap_stats(const std::vector<Time>& times) {
  double sum = 0.0;
  double sum_sq = 0.0;
  const double n = static_cast<double>(times.size() - 1);
  for (size_t i = 1; i < times.size(); ++i) {
    const double gap = to_seconds(times[i] - times[i - 1]);
    sum += gap;
    sum_sq += gap * gap;
  }
  const double mean = sum / n;
  return {mean, std::sqrt(sum_sq / n - mean * mean) / mean};
}

TEST(Arrival, FirstArrivalIsAtZeroAndTimesNeverDecrease) {
  for (const char* body : {"process = 'poisson'\nrate = 2", "process = 'gamma'\nrate = 2\ncv = 3",
                           "process = 'constant'\nrate = 2", "process = 'all-at-once'"}) {
    const std::vector<Time> t = arrivals(make_ok(body), 1000);
    EXPECT_EQ(t[0], 0) << body;
    for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]) << body;
  }
}

TEST(Arrival, PoissonRateAndCv) {
  const ArrivalProcess p = make_ok("process = 'poisson'\nrate = 5.0");
  EXPECT_EQ(p.kind(), ArrivalProcess::Kind::kPoisson);
  EXPECT_EQ(p.rate(), 5.0);
  const GapStats s = gap_stats(arrivals(p, kArrivals));
  EXPECT_NEAR(1.0 / s.mean, 5.0, 5.0 * 0.01);
  EXPECT_NEAR(s.cv, 1.0, 0.02);
}

TEST(Arrival, GammaRateAndCv) {
  for (const double cv : {0.5, 3.0}) {
    const ArrivalProcess p =
        make_ok("process = 'gamma'\nrate = 10\ncv = " + std::to_string(cv));
    const GapStats s = gap_stats(arrivals(p, kArrivals, 2));
    EXPECT_NEAR(1.0 / s.mean, 10.0, 10.0 * 0.02) << "cv " << cv;
    EXPECT_NEAR(s.cv, cv, cv * 0.03) << "cv " << cv;
  }
}

TEST(Arrival, ConstantIsExactWithoutDrift) {
  const std::vector<Time> t = arrivals(make_ok("process = 'constant'\nrate = 3"), 3001);
  EXPECT_EQ(t[1], 333'333'333);
  EXPECT_EQ(t[3], kNsPerSecond);
  EXPECT_EQ(t[3000], 1000 * kNsPerSecond);
}

TEST(Arrival, AllAtOnce) {
  const ArrivalProcess p = make_ok("process = 'all-at-once'");
  EXPECT_EQ(p.kind(), ArrivalProcess::Kind::kAllAtOnce);
  for (Time t : arrivals(p, 100)) EXPECT_EQ(t, 0);
}

TEST(Arrival, SameSeedSameTimes) {
  const ArrivalProcess p = make_ok("process = 'gamma'\nrate = 1\ncv = 2");
  EXPECT_EQ(arrivals(p, 100, 7), arrivals(p, 100, 7));
  EXPECT_NE(arrivals(p, 100, 7), arrivals(p, 100, 8));
}

TEST(Arrival, ClockStopsAtTheHorizon) {
  ArrivalClock clock(make_ok("process = 'constant'\nrate = 1e-9"), Rng(1));
  EXPECT_EQ(clock.next(), 0);
  const Time second = clock.next();  // 1 / 1e-9 s: kMaxArrivalSeconds, give or take rounding
  EXPECT_GT(second, 999'999'999 * kNsPerSecond);
  EXPECT_LE(second, 1'000'000'000 * kNsPerSecond);
  EXPECT_EQ(clock.next(), kNever);
}

TEST(ArrivalErrors, ProcessMissingUnknownOrMistyped) {
  EXPECT_EQ(make_error("rate = 3"),
            "a.toml:1:1: generate.arrival: missing required key 'process' (one of: poisson, gamma, "
            "constant, all-at-once)");
  EXPECT_EQ(make_error("process = 'bursty'"),
            "a.toml:1:11: generate.arrival.process: unknown arrival process 'bursty' (known: "
            "poisson, gamma, constant, all-at-once)");
  EXPECT_NE(make_error("process = 1").find("a.toml:1:11: generate.arrival.process: expected an "
                                           "arrival process"),
            std::string::npos);
}

TEST(ArrivalErrors, RateMustBePositive) {
  EXPECT_EQ(make_error("process = 'poisson'\nrate = 0"),
            "a.toml:2:8: generate.arrival.rate: expected a number > 0, got 0");
  EXPECT_EQ(make_error("process = 'constant'\nrate = -1.5"),
            "a.toml:2:8: generate.arrival.rate: expected a number > 0, got -1.5");
  EXPECT_EQ(make_error("process = 'poisson'\nrate = '4/s'"),
            "a.toml:2:8: generate.arrival.rate: expected a number > 0, got \"4/s\"");
  EXPECT_EQ(make_error("process = 'poisson'"),
            "a.toml:1:1: generate.arrival: missing required key 'rate'");
}

TEST(ArrivalErrors, KeysBelongToTheirProcess) {
  EXPECT_EQ(make_error("process = 'poisson'\nrate = 1\ncv = 2"),
            "a.toml:3:1: generate.arrival.cv: unknown key for process = \"poisson\" (known: "
            "process, rate)");
  EXPECT_EQ(make_error("process = 'all-at-once'\nrate = 1"),
            "a.toml:2:1: generate.arrival.rate: unknown key for process = \"all-at-once\" "
            "(known: process)");
  EXPECT_EQ(make_error("process = 'gamma'\nrate = 1"),
            "a.toml:1:1: generate.arrival: missing required key 'cv'");
  EXPECT_EQ(make_error("process = 'gamma'\nrate = 1\ncv = 0"),
            "a.toml:3:6: generate.arrival.cv: expected a number > 0, got 0");
  EXPECT_EQ(make_error("process = 'gamma'\nrate = 1\ncv = 1000"),
            "a.toml:3:6: generate.arrival.cv: expected a number <= 100, got 1000");
}

}  // namespace
}  // namespace servesim
