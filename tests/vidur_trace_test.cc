// Tests of workloads/vidur_trace.h: Vidur's columns found by name among others, pandas' float token
// counts, and the messages for a missing column or a bad row.
#include "workloads/vidur_trace.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace servesim {
namespace {

using namespace servesim::testing;

ReplayOptions vidur_options(const std::string& path) {
  ReplayOptions o;
  o.path = path;
  o.format = TraceFormat::kVidur;
  o.columns.arrival = "not used";  // the Vidur reader has its own column names
  return o;
}

TEST(VidurTrace, ReadsColumnsByName) {
  // As pandas writes it: an unnamed index column first, token counts as floats, other columns.
  const auto rows = read_vidur_trace(vidur_options(write_temp(
      "v.csv",
      ",num_decode_tokens,arrived_at,num_prefill_tokens,pd_ratio\n"
      "0,12.0,0.0,300.0,25.0\n"
      "1,4.0,0.125,40.0,10.0\n"
      "2,7.0,0.0625,5.0,0.7\n")));
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows.value().size(), 3u);
  const RequestSpec& r = rows.value()[1];
  EXPECT_EQ(r.id, "r1");
  EXPECT_EQ(r.line, 3);
  EXPECT_EQ(r.arrival, 125'000'000);
  EXPECT_EQ(r.prompt_tokens, 40);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(rows.value()[2].arrival, 62'500'000);
  EXPECT_EQ(rows.value()[0].prompt_tokens, 300);
}

TEST(VidurTrace, Limit) {
  ReplayOptions o = vidur_options(write_temp(
      "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n1,1,1\n2,1,1\n"));
  o.limit = 1;
  const auto rows = read_vidur_trace(o);
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  EXPECT_EQ(rows.value().size(), 1u);
}

TEST(VidurTrace, Errors) {
  const std::string missing =
      write_temp("m.csv", "arrived_at,num_prefill_tokens,decode\n0,1,1\n");
  auto rows = read_vidur_trace(vidur_options(missing));
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().message, missing + ":1: missing column 'num_decode_tokens' (found: "
                                            "arrived_at, num_prefill_tokens, decode)");
  const std::string zero = write_temp(
      "z.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n0.5,8,0.0\n");
  rows = read_vidur_trace(vidur_options(zero));
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().message,
            zero + ":3: num_decode_tokens: expected an integer >= 1, got '0.0'");
  const std::string empty = write_temp("e.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n");
  rows = read_vidur_trace(vidur_options(empty));
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().message, empty + ": empty trace (no rows)");
}

}  // namespace
}  // namespace servesim
