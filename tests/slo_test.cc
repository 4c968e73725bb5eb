// SLOs (analysis/slo.h): units are required and kept, misses say the bound in the unit it was
// given, and a run that rejects requests misses unless a `rejected` SLO allows a share.
#include "analysis/slo.h"

#include <gtest/gtest.h>

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
    if (s.key == "p99_ttft") EXPECT_EQ(s.unit, "ms");
    if (s.key == "p99_tpot") EXPECT_DOUBLE_EQ(s.bound, 0.08);  // stored before units were kept: seconds
    if (s.key == "rejected") EXPECT_DOUBLE_EQ(s.bound, 0.01);
  }
}

}  // namespace
}  // namespace servesim
