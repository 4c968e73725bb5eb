// Tests of workloads/rng.h (the engine and samplers) and workloads/distribution.h (length
// distributions): fixed seeds throughout, so every test is deterministic.
#include "workloads/distribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "workloads/rng.h"

namespace servesim {
namespace {

constexpr int kDraws = 200'000;

struct Moments {
  double mean = 0.0;
  double stddev = 0.0;
};

template <class Draw>
Moments moments(int n, Draw draw) {
  double sum = 0.0;
  double sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const double x = draw();
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / n;
  return {mean, std::sqrt(std::max(0.0, sum_sq / n - mean * mean))};
}

// Builds a distribution from the body of a TOML table, named generate.output_tokens in messages.
Result<LengthDistribution> make(const std::string& body) {
  const toml::table table = toml::parse(body, std::string_view("d.toml"));
  return make_distribution(table, "d.toml", "generate.output_tokens");
}

LengthDistribution make_ok(const std::string& body) {
  auto d = make(body);
  EXPECT_TRUE(d.ok()) << d.error().message;
  return std::move(d).value();
}

std::string make_error(const std::string& body) {
  auto d = make(body);
  EXPECT_FALSE(d.ok());
  return d.ok() ? std::string() : d.error().message;
}

Moments sample_moments(const LengthDistribution& d, uint64_t seed = 1) {
  Rng rng(seed);
  return moments(kDraws, [&] { return static_cast<double>(d.sample(rng)); });
}

TEST(Rng, Mix64MatchesSplitmix64Reference) {
  // The first output of the reference splitmix64 seeded with 0.
  EXPECT_EQ(mix64(0x9e3779b97f4a7c15), 0xe220a8397b1dcdafULL);
}

TEST(Rng, SameSeedSameStreamAcrossPlatforms) {
  // Golden values: xoshiro256** seeded by splitmix64 from 42. A change here changes every workload.
  Rng rng(42);
  const uint64_t a = rng.next();
  const uint64_t b = rng.next();
  Rng again(42);
  EXPECT_EQ(again.next(), a);
  EXPECT_EQ(again.next(), b);
  EXPECT_EQ(a, 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(b, 0x6104d9866d113a7eULL);
}

TEST(Rng, StreamsOfOneSeedDiffer) {
  Rng arrivals = Rng::stream(7, kArrivalStream);
  Rng prompts = Rng::stream(7, kPromptStream);
  Rng outputs = Rng::stream(7, kOutputStream);
  const uint64_t a = arrivals.next();
  EXPECT_NE(a, prompts.next());
  EXPECT_NE(a, outputs.next());
  EXPECT_NE(Rng::stream(8, kArrivalStream).next(), a);
}

TEST(Rng, UniformRanges) {
  Rng rng(3);
  for (int i = 0; i < 10'000; ++i) {
    const double u = rng.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    const double p = rng.uniform_pos();
    EXPECT_GT(p, 0.0);
    EXPECT_LE(p, 1.0);
  }
  const Moments m = moments(kDraws, [&] { return rng.uniform(); });
  EXPECT_NEAR(m.mean, 0.5, 0.005);
}

TEST(Rng, BelowIsUniform) {
  Rng rng(5);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70'000; ++i) ++counts[rng.below(7)];
  for (int c : counts) EXPECT_NEAR(c, 10'000, 400);
  EXPECT_EQ(rng.below(1), 0u);
}

TEST(Rng, ExponentialMean) {
  Rng rng(11);
  const Moments m = moments(kDraws, [&] { return sample_exponential(rng, 4.0); });
  EXPECT_NEAR(m.mean, 0.25, 0.25 * 0.01);
  EXPECT_NEAR(m.stddev, 0.25, 0.25 * 0.02);
}

TEST(Rng, NormalMeanAndStd) {
  Rng rng(12);
  const Moments m = moments(kDraws, [&] { return sample_normal(rng, 10.0, 2.0); });
  EXPECT_NEAR(m.mean, 10.0, 0.02);
  EXPECT_NEAR(m.stddev, 2.0, 0.02);
}

TEST(Rng, GammaMeanAndStdForSmallAndLargeShape) {
  for (const double shape : {0.25, 1.0, 5.0}) {
    Rng rng(13);
    const double scale = 2.0;
    const Moments m = moments(kDraws, [&] { return sample_gamma(rng, shape, scale); });
    EXPECT_NEAR(m.mean, shape * scale, shape * scale * 0.02) << "shape " << shape;
    EXPECT_NEAR(m.stddev, std::sqrt(shape) * scale, std::sqrt(shape) * scale * 0.03)
        << "shape " << shape;
  }
}

TEST(Rng, ParetoMeanAndFloor) {
  Rng rng(14);
  double lowest = 1e300;
  const Moments m = moments(kDraws, [&] {
    const double x = sample_pareto(rng, 3.0, 10.0);
    lowest = std::min(lowest, x);
    return x;
  });
  EXPECT_NEAR(m.mean, 15.0, 15.0 * 0.01);  // shape * scale / (shape - 1)
  EXPECT_GE(lowest, 10.0);
}

TEST(Distribution, Fixed) {
  const LengthDistribution d = make_ok("dist = 'fixed'\nvalue = 128");
  Rng rng(1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d.sample(rng), 128);
}

TEST(Distribution, UniformMeanAndRangeInclusive) {
  const LengthDistribution d = make_ok("dist = 'uniform'\nmin = 10\nmax = 20");
  Rng rng(2);
  std::vector<int> counts(21, 0);
  for (int i = 0; i < 110'000; ++i) {
    const int32_t x = d.sample(rng);
    ASSERT_GE(x, 10);
    ASSERT_LE(x, 20);
    ++counts[x];
  }
  for (int x = 10; x <= 20; ++x) EXPECT_NEAR(counts[x], 10'000, 450) << x;
}

TEST(Distribution, NormalMean) {
  const Moments m = sample_moments(make_ok("dist = 'normal'\nmean = 500\nstd = 50"));
  EXPECT_NEAR(m.mean, 500.0, 500.0 * 0.005);
  EXPECT_NEAR(m.stddev, 50.0, 50.0 * 0.02);
}

TEST(Distribution, LognormalByMean) {
  const Moments m = sample_moments(make_ok("dist = 'lognormal'\nmean = 300.0\nsigma = 0.5"));
  EXPECT_NEAR(m.mean, 300.0, 300.0 * 0.01);
}

TEST(Distribution, LognormalByMedian) {
  const LengthDistribution d = make_ok("dist = 'lognormal'\nmedian = 400\nsigma = 1.0");
  Rng rng(3);
  std::vector<int32_t> xs(kDraws);
  for (int32_t& x : xs) x = d.sample(rng);
  std::nth_element(xs.begin(), xs.begin() + kDraws / 2, xs.end());
  EXPECT_NEAR(xs[kDraws / 2], 400, 400 * 0.02);
  const Moments m = moments(kDraws, [&, i = 0]() mutable { return static_cast<double>(xs[i++]); });
  EXPECT_NEAR(m.mean, 400.0 * std::exp(0.5), 400.0 * std::exp(0.5) * 0.02);
}

TEST(Distribution, ParetoMeanWithFiniteVariance) {
  const Moments m = sample_moments(make_ok("dist = 'pareto'\nshape = 3.0\nscale = 100"));
  EXPECT_NEAR(m.mean, 150.0, 150.0 * 0.01);
}

TEST(Distribution, ZipfFrequencies) {
  const LengthDistribution d = make_ok("dist = 'zipf'\nexponent = 1.2\nn = 50");
  double total = 0.0;
  for (int k = 1; k <= 50; ++k) total += std::pow(k, -1.2);
  Rng rng(4);
  std::vector<int> counts(51, 0);
  for (int i = 0; i < kDraws; ++i) {
    const int32_t k = d.sample(rng);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, 50);
    ++counts[k];
  }
  for (int k : {1, 2, 3, 10, 50}) {
    const double expected = kDraws * std::pow(k, -1.2) / total;
    EXPECT_NEAR(counts[k], expected, 5.0 * std::sqrt(expected) + 1.0) << "k = " << k;
  }
}

TEST(Distribution, MinMaxClamp) {
  const LengthDistribution d = make_ok("dist = 'normal'\nmean = 100\nstd = 50\nmin = 80\nmax = 120");
  EXPECT_EQ(d.min(), 80);
  EXPECT_EQ(d.max(), 120);
  Rng rng(5);
  int at_min = 0;
  int at_max = 0;
  for (int i = 0; i < kDraws; ++i) {
    const int32_t x = d.sample(rng);
    ASSERT_GE(x, 80);
    ASSERT_LE(x, 120);
    at_min += x == 80;
    at_max += x == 120;
  }
  // P(X < 80.5) = Phi(-0.39) = 0.348 for the unclamped normal; the same above 119.5.
  EXPECT_NEAR(at_min / double(kDraws), 0.348, 0.01);
  EXPECT_NEAR(at_max / double(kDraws), 0.348, 0.01);
}

TEST(Distribution, FloorIsOneWithoutMin) {
  const LengthDistribution d = make_ok("dist = 'normal'\nmean = 1\nstd = 5");
  Rng rng(6);
  for (int i = 0; i < 10'000; ++i) ASSERT_GE(d.sample(rng), 1);
}

TEST(Distribution, CeilingKeepsHeavyTailsInInt32) {
  const LengthDistribution d = make_ok("dist = 'pareto'\nshape = 0.05\nscale = 1");
  EXPECT_EQ(d.max(), kDefaultMaxLength);
  Rng rng(7);
  int at_ceiling = 0;
  for (int i = 0; i < 10'000; ++i) {
    const int32_t x = d.sample(rng);
    ASSERT_GE(x, 1);
    ASSERT_LE(x, kDefaultMaxLength);
    at_ceiling += x == kDefaultMaxLength;
  }
  EXPECT_GT(at_ceiling, 0);  // P(X > 1e9) = 1e9^-0.05 = 0.35
}

TEST(Distribution, StreamsAreReproducible) {
  const LengthDistribution d = make_ok("dist = 'lognormal'\nmedian = 500\nsigma = 1.0");
  Rng a(99);
  Rng b(99);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(d.sample(a), d.sample(b));
}

TEST(DistributionErrors, UnknownDistributionNamesTheKnownOnes) {
  EXPECT_EQ(make_error("dist = 'gauss'"),
            "d.toml:1:8: generate.output_tokens.dist: unknown distribution 'gauss' (known: "
            "fixed, uniform, normal, lognormal, pareto, zipf)");
  EXPECT_NE(make_error("dist = 'empirical'").find("'empirical' is not supported yet"),
            std::string::npos);
}

TEST(DistributionErrors, MissingOrMistypedDist) {
  EXPECT_EQ(make_error("value = 3"),
            "d.toml:1:1: generate.output_tokens: missing required key 'dist' (one of: fixed, "
            "uniform, normal, lognormal, pareto, zipf)");
  EXPECT_NE(make_error("dist = 3").find("d.toml:1:8: generate.output_tokens.dist: expected a "
                                        "distribution name"),
            std::string::npos);
}

TEST(DistributionErrors, UnknownKeyForTheFamily) {
  EXPECT_EQ(make_error("dist = 'normal'\nmean = 5\nstd = 1\nscale = 3"),
            "d.toml:4:1: generate.output_tokens.scale: unknown key for dist = \"normal\" (known: "
            "dist, mean, std, min, max)");
}

TEST(DistributionErrors, ParametersOutOfRangeOrMistyped) {
  EXPECT_EQ(make_error("dist = 'pareto'\nshape = 0\nscale = 20"),
            "d.toml:2:9: generate.output_tokens.shape: expected a number > 0, got 0");
  EXPECT_EQ(make_error("dist = 'normal'\nmean = 5\nstd = 'wide'"),
            "d.toml:3:7: generate.output_tokens.std: expected a number >= 0, got \"wide\"");
  EXPECT_EQ(make_error("dist = 'fixed'\nvalue = 2.5"),
            "d.toml:2:9: generate.output_tokens.value: expected an integer from 1 to 100000000, "
            "got 2.5");
  EXPECT_EQ(make_error("dist = 'fixed'\nvalue = 50\nmax = 10"),
            "d.toml:2:9: generate.output_tokens.value: expected an integer from 1 to 10, got 50");
  EXPECT_NE(make_error("dist = 'pareto'\nshape = 1.5").find("missing required key 'scale'"),
            std::string::npos);
  EXPECT_NE(make_error("dist = 'normal'\nmean = inf\nstd = 1").find("got inf"), std::string::npos);
}

TEST(DistributionErrors, MinMax) {
  EXPECT_EQ(make_error("dist = 'uniform'\nmin = 10"),
            "d.toml:1:1: generate.output_tokens: missing required key 'max'");
  EXPECT_EQ(make_error("dist = 'uniform'\nmin = 10\nmax = 5"),
            "d.toml:3:7: generate.output_tokens.max: expected an integer >= min (10), got 5");
  EXPECT_EQ(make_error("dist = 'normal'\nmean = 5\nstd = 1\nmin = 0"),
            "d.toml:4:7: generate.output_tokens.min: expected an integer from 1 to 100000000, got 0");
  EXPECT_EQ(make_error("dist = 'normal'\nmean = 5\nstd = 1\nmax = 3000000000"),
            "d.toml:4:7: generate.output_tokens.max: expected an integer from 1 to 100000000, got "
            "3000000000");
  EXPECT_NE(make_error("dist = 'normal'\nmean = 5\nstd = 1\nmin = 2000000000")
                .find("min: expected an integer from 1 to 100000000, got 2000000000"),
            std::string::npos);
}

TEST(DistributionErrors, LognormalNeedsExactlyOneOfMeanAndMedian) {
  EXPECT_EQ(make_error("dist = 'lognormal'\nsigma = 1"),
            "d.toml:1:1: generate.output_tokens: missing required key 'mean' or 'median'");
  EXPECT_EQ(make_error("dist = 'lognormal'\nsigma = 1\nmean = 5\nmedian = 4"),
            "d.toml:4:10: generate.output_tokens.median: give either mean or median, not both");
}

TEST(DistributionErrors, ZipfTableSizeIsLimited) {
  EXPECT_EQ(make_error("dist = 'zipf'\nexponent = 1.1\nn = 20000000"),
            "d.toml:3:5: generate.output_tokens.n: expected an integer from 1 to 10000000, got "
            "20000000");
}

}  // namespace
}  // namespace servesim
