// analysis/slo.h: parsing objectives (from --slo and from a stored search definition) and the
// verdict on a probe.
#include "analysis/slo.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sim/toml_fields.h"

namespace servesim {
namespace {

std::vector<Metric> done_run(double ttft_p99, double rejected = 0, double completed = 400) {
  return {{"completed", completed}, {"overloaded", 0}, {"rejected", rejected}, {"ttft_p99", ttft_p99}};
}

TEST(SloVerdict, ParsesLatenciesInTheirUnitAndFractions) {
  Result<slo::Objective> o = slo::parse("p99_ttft=150ms");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o.value().metric, "ttft_p99");
  EXPECT_DOUBLE_EQ(o.value().bound, 0.15);
  EXPECT_EQ(o.value().bound_text(), "150 ms");
  o = slo::parse("mean_e2el=10s");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.value().metric, "e2el_mean");
  EXPECT_EQ(o.value().bound_text(), "10 s");
  o = slo::parse("slo_attainment=99%");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o.value().at_least);
  EXPECT_DOUBLE_EQ(o.value().bound, 0.99);
  EXPECT_FALSE(o.value().latency());
}

TEST(SloVerdict, RefusesBadTokensSayingWhatWasExpected) {
  for (const auto& [token, expected] : std::vector<std::pair<std::string, std::string>>{
           {"p99_ttft", "expected KEY=VALUE"},
           {"p99_ttfx=1s", "unknown SLO 'p99_ttfx' (known: mean_ttft"},
           {"p99_ttft=2", "a time > 0 with its unit, s or ms"},  // no unit: not silently seconds
           {"p99_ttft=0s", "a time > 0"},
           {"p99_ttft=-1s", "a time > 0"},
           {"rejected=2", "a fraction in [0, 1]"},
           {"rejected=150%", "a fraction in [0, 1]"}}) {
    const Result<slo::Objective> o = slo::parse(token);
    ASSERT_FALSE(o.ok()) << token;
    EXPECT_NE(o.error().message.find(expected), std::string::npos) << o.error().message;
    EXPECT_NE(o.error().message.find("--slo '" + token + "'"), std::string::npos) << o.error().message;
  }
}

TEST(SloVerdict, ReadsAStoredDefinitionsNumbersAndStrings) {
  Result<toml::table> t =
      parse_toml("p99_ttft = 2.0\np90_tpot = 0.08\nrejected = 0.01\nmean_e2el = '1500ms'\n", "spec");
  ASSERT_TRUE(t.ok());
  Result<std::vector<slo::Objective>> o = slo::from_table(t.value());
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o.value().size(), 4u);
  std::map<std::string, slo::Objective> by_key;
  for (const slo::Objective& x : o.value()) by_key[x.key] = x;
  EXPECT_EQ(by_key["p99_ttft"].bound_text(), "2 s");
  EXPECT_EQ(by_key["p90_tpot"].bound_text(), "80 ms");  // below a second: shown in ms
  EXPECT_EQ(by_key["rejected"].metric, "rejected");
  EXPECT_FALSE(by_key["rejected"].latency());
  EXPECT_DOUBLE_EQ(by_key["mean_e2el"].bound, 1.5);
  EXPECT_EQ(by_key["mean_e2el"].bound_text(), "1500 ms");
  t = parse_toml("p99_ttfx = 2.0\n", "spec");
  ASSERT_TRUE(t.ok());
  o = slo::from_table(t.value());
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("slo.p99_ttfx"), std::string::npos) << o.error().message;
}

TEST(SloVerdict, AProbeMissesForItsStatusOverloadOrAnObjective) {
  const std::vector<slo::Objective> slos = {slo::parse("p99_ttft=2s").value()};
  EXPECT_EQ(slo::miss(slos, "done", "", done_run(1.5)), "");
  EXPECT_EQ(slo::miss(slos, "done", "", done_run(3.21)), "p99_ttft 3.21 s > 2 s");
  const std::vector<slo::Objective> ms = {slo::parse("p99_ttft=500ms").value()};
  EXPECT_EQ(slo::miss(ms, "done", "", done_run(0.75)), "p99_ttft 750 ms > 500 ms");  // the user's unit
  EXPECT_EQ(slo::miss(slos, "failed", "out of memory", {}), "failed: out of memory");
  std::vector<Metric> overloaded = done_run(1.0);
  overloaded[1].value = 1;
  EXPECT_EQ(slo::miss(slos, "done", "", overloaded), "overloaded");
  const std::vector<slo::Objective> tpot = {slo::parse("p99_tpot=100ms").value()};
  EXPECT_EQ(slo::miss(tpot, "done", "", done_run(1.0)), "p99_tpot not measured");
  const std::vector<slo::Objective> attain = {slo::parse("slo_attainment=0.9").value()};
  std::vector<Metric> low = done_run(1.0);
  low.push_back({"slo_attainment", 0.8});
  EXPECT_EQ(slo::miss(attain, "done", "", low), "slo_attainment 0.8 < 0.9");
}

// A probe that rejects requests misses unless a rejected objective allows a share.
TEST(SloVerdict, RejectingAnyRequestMissesUnlessARejectedObjectiveAllowsIt) {
  const std::vector<slo::Objective> slos = {slo::parse("p99_ttft=2s").value()};
  EXPECT_EQ(slo::miss(slos, "done", "", done_run(1.0, 180, 220)),
            "rejected 180 of 400 requests (45 %; --slo rejected=F allows a share)");
  std::vector<slo::Objective> allowed = slos;
  allowed.push_back(slo::parse("rejected=0.5").value());
  EXPECT_EQ(slo::miss(allowed, "done", "", done_run(1.0, 180, 220)), "");
  allowed.back() = slo::parse("rejected=1%").value();
  EXPECT_EQ(slo::miss(allowed, "done", "", done_run(1.0, 180, 220)), "rejected 0.45 > 0.01");
  EXPECT_DOUBLE_EQ(slo::rejected_share(done_run(1.0, 180, 220)), 0.45);
  EXPECT_EQ(slo::rejected_share(std::vector<Metric>{}), 0.0);
}

}  // namespace
}  // namespace servesim
