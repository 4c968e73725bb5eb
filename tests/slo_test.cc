// SLOs (analysis/metrics/slo.h): units are required and kept, misses say the bound in the unit it was
// given, and a run that rejects requests misses unless a `rejected` SLO allows a share.
#include "analysis/metrics/slo.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

std::vector<Metric> served(double rejected, double completed, double ttft_p99) {
  return {{"completed", completed}, {"rejected", rejected}, {"rejected_context_length", rejected},
          {"ttft_p99", ttft_p99},   {"overloaded", 0}};
}

// Regression: "p99_ttft=2" was read as 2 seconds without a word.
TEST(Slo, ALatencyNeedsItsUnit) {
  const auto bare = parse_slo("p99_ttft=2");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.error().message.find("give the unit: 2s or 2ms"), std::string::npos) << bare.error().message;
  EXPECT_DOUBLE_EQ(parse_slo("p99_ttft=1500ms").value().bound, 1.5);
  EXPECT_EQ(parse_slo("p99_ttft=1500ms").value().unit, "ms");
  EXPECT_DOUBLE_EQ(parse_slo("rejected=1%").value().bound, 0.01);  // fractions take no unit
}

// Regression: a miss of an SLO given in ms was printed in seconds.
TEST(Slo, AMissIsSaidInTheUnitTheBoundWasGivenIn) {
  const std::vector<Slo> ms = {parse_slo("p99_ttft=1500ms").value()};
  EXPECT_EQ(slo_miss(ms, "done", "", served(0, 100, 2.3456)), "p99_ttft 2346 ms > 1500 ms");
  const std::vector<Slo> s = {parse_slo("p99_ttft=1.5s").value()};
  EXPECT_EQ(slo_miss(s, "done", "", served(0, 100, 2.3456)), "p99_ttft 2.346 s > 1.5 s");
  EXPECT_EQ(slo_miss(s, "done", "", served(0, 100, 1.2)), "");
}

// Regression: a probe that rejected 45 % of its requests passed.
TEST(Slo, RejectingRequestsMissesUnlessAllowed) {
  const std::vector<Slo> latency = {parse_slo("p99_ttft=2s").value()};
  const std::string miss = slo_miss(latency, "done", "", served(45, 55, 0.5));
  EXPECT_NE(miss.find("rejected 45 % of requests (45 of 100: 45 longer than the model's context)"), std::string::npos)
      << miss;
  EXPECT_NE(miss.find("--slo rejected"), std::string::npos) << miss;
  std::vector<Slo> allowed = latency;
  allowed.push_back(parse_slo("rejected=0.5").value());
  EXPECT_EQ(slo_miss(allowed, "done", "", served(45, 55, 0.5)), "");
  allowed.back() = parse_slo("rejected=0.4").value();
  EXPECT_NE(slo_miss(allowed, "done", "", served(45, 55, 0.5)).find("> 40 %"), std::string::npos);
}

TEST(Slo, StoredSlosReadBackWithTheirUnitsOrAsSeconds) {
  toml::table t{{"p99_ttft", "1500ms"}, {"p99_tpot", 0.08}, {"rejected", 0.01}};
  auto slos = slos_from_table(t);
  ASSERT_TRUE(slos.ok()) << slos.error().message;
  ASSERT_EQ(slos.value().size(), 3u);
  for (const Slo& s : slos.value()) {
    if (s.key == "p99_ttft") {
      EXPECT_EQ(s.unit, "ms");
    } else if (s.key == "p99_tpot") {
      EXPECT_DOUBLE_EQ(s.bound, 0.08);  // stored before units were kept: seconds
    } else {
      EXPECT_DOUBLE_EQ(s.bound, 0.01);
    }
  }
}

std::vector<Metric> done_run(double ttft_p99, double rejected = 0, double completed = 400) {
  return {{"completed", completed}, {"overloaded", 0}, {"rejected", rejected}, {"ttft_p99", ttft_p99}};
}

TEST(SloVerdict, ParsesLatenciesInTheirUnitAndFractions) {
  Result<Slo> o = parse_slo("p99_ttft=150ms");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o.value().metric, "ttft_p99");
  EXPECT_DOUBLE_EQ(o.value().bound, 0.15);
  EXPECT_EQ(o.value().bound_text(), "150 ms");
  o = parse_slo("mean_e2el=10s");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.value().metric, "e2el_mean");
  EXPECT_EQ(o.value().bound_text(), "10 s");
  o = parse_slo("slo_attainment=99%");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o.value().at_least);
  EXPECT_DOUBLE_EQ(o.value().bound, 0.99);
  EXPECT_FALSE(o.value().latency());
}

TEST(SloVerdict, RefusesBadTokensSayingWhatWasExpected) {
  for (const auto& [token, expected] : std::vector<std::pair<std::string, std::string>>{
           {"p99_ttft", "expected KEY=VALUE"},
           {"p99_ttfx=1s", "unknown SLO 'p99_ttfx' (known: mean_ttft"},
           {"p99_ttft=2", "give the unit: 2s or 2ms"},  // no unit: not silently seconds
           {"p99_ttft=0s", "a time > 0"},
           {"p99_ttft=-1s", "a time > 0"},
           {"rejected=2", "a fraction in [0, 1]"},
           {"rejected=150%", "a fraction in [0, 1]"}}) {
    const Result<Slo> o = parse_slo(token);
    ASSERT_FALSE(o.ok()) << token;
    EXPECT_NE(o.error().message.find(expected), std::string::npos) << o.error().message;
    EXPECT_NE(o.error().message.find("--slo '" + token + "'"), std::string::npos) << o.error().message;
  }
}

TEST(SloVerdict, ReadsAStoredDefinitionsNumbersAndStrings) {
  Result<toml::table> t =
      parse_toml("p99_ttft = 2.0\np90_tpot = 0.08\nrejected = 0.01\nmean_e2el = '1500ms'\n", "spec");
  ASSERT_TRUE(t.ok());
  Result<std::vector<Slo>> o = slos_from_table(t.value());
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o.value().size(), 4u);
  std::map<std::string, Slo> by_key;
  for (const Slo& x : o.value()) by_key[x.key] = x;
  EXPECT_EQ(by_key["p99_ttft"].bound_text(), "2 s");
  EXPECT_EQ(by_key["p90_tpot"].bound_text(), "80 ms");  // below a second: shown in ms
  EXPECT_DOUBLE_EQ(by_key["p90_tpot"].bound, 0.08);
  EXPECT_EQ(by_key["rejected"].metric, "rejected");
  EXPECT_FALSE(by_key["rejected"].latency());
  EXPECT_DOUBLE_EQ(by_key["mean_e2el"].bound, 1.5);
  EXPECT_EQ(by_key["mean_e2el"].bound_text(), "1500 ms");
  t = parse_toml("p99_ttfx = 2.0\n", "spec");
  ASSERT_TRUE(t.ok());
  o = slos_from_table(t.value());
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("slo.p99_ttfx"), std::string::npos) << o.error().message;
}

TEST(SloVerdict, AProbeMissesForItsStatusOverloadOrAnObjective) {
  const std::vector<Slo> slos = {parse_slo("p99_ttft=2s").value()};
  EXPECT_EQ(slo_miss(slos, "done", "", done_run(1.5)), "");
  EXPECT_EQ(slo_miss(slos, "done", "", done_run(3.21)), "p99_ttft 3.21 s > 2 s");
  EXPECT_EQ(slo_miss(slos, "failed", "out of memory", {}), "failed: out of memory");
  std::vector<Metric> overloaded = done_run(1.0);
  overloaded[1].value = 1;
  EXPECT_EQ(slo_miss(slos, "done", "", overloaded), "overloaded");
  const std::vector<Slo> tpot = {parse_slo("p99_tpot=100ms").value()};
  EXPECT_EQ(slo_miss(tpot, "done", "", done_run(1.0)), "p99_tpot not measured");
  const std::vector<Slo> attain = {parse_slo("slo_attainment=0.9").value()};
  std::vector<Metric> low = done_run(1.0);
  low.push_back({"slo_attainment", 0.8});
  EXPECT_EQ(slo_miss(attain, "done", "", low), "slo_attainment 0.8 < 0.9");
  EXPECT_DOUBLE_EQ(rejected_share(done_run(1.0, 180, 220)), 0.45);
  EXPECT_EQ(rejected_share(std::vector<Metric>{}), 0.0);
}

// A search stops probing a configuration whose miss no rate or replica count would mend.
TEST(SloVerdict, RejectionsAndFailuresMissAtAnyLoad) {
  const std::vector<Slo> slos = {parse_slo("p99_ttft=2s").value()};
  EXPECT_TRUE(misses_at_any_load(slos, "done", done_run(1.0, 1, 399)));
  EXPECT_TRUE(misses_at_any_load(slos, "failed", {}));
  EXPECT_FALSE(misses_at_any_load(slos, "done", done_run(3.0)));  // slow: more replicas may mend it
  EXPECT_FALSE(misses_at_any_load(slos, "interrupted", {}));
  std::vector<Slo> allowed = slos;
  allowed.push_back(parse_slo("rejected=1%").value());
  EXPECT_FALSE(misses_at_any_load(allowed, "done", done_run(1.0, 1, 399)));
}

}  // namespace
}  // namespace servesim
