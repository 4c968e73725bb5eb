// Tests of policies/vllm_config.h: the vLLM V1 scheduler options, their defaults per release, and
// every refusal with its message.
#include "policies/vllm_config.h"

#include <gtest/gtest.h>

#include "policies/registry.h"

namespace servesim {
namespace {

Result<VllmSchedulerConfig> read(const std::string& toml_text, bool prefix_cached = true) {
  return read_vllm_scheduler_config(toml::parse(toml_text, std::string_view("p.toml")), prefix_cached);
}

std::string error_of(const std::string& toml_text, bool prefix_cached = true) {
  auto c = read(toml_text, prefix_cached);
  EXPECT_FALSE(c.ok()) << toml_text;
  return c.ok() ? std::string() : c.error().message;
}

TEST(VllmConfig, DefaultsAreVllm033s) {
  auto c = read("");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().release->version, "0.33.0");
  EXPECT_EQ(c.value().release, &vllm_releases().front());
  EXPECT_TRUE(c.value().scheduler_reserve_full_isl);
  EXPECT_FALSE(c.value().long_prefill_token_threshold_adaptive);
  EXPECT_EQ(c.value().long_prefill_token_threshold, 0);
  EXPECT_FALSE(c.value().priority);
  EXPECT_FALSE(c.value().lpm);
  EXPECT_EQ(c.value().release->free_order, FreeOrder::kHashlessFirst);
  EXPECT_TRUE(c.value().release->lone_request_uncapped);
}

TEST(VllmConfig, Release011HasNoneOfTheNewBehaviours) {
  auto c = read("vllm_version = \"0.11.0\"\nlong_prefill_token_threshold = 8");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c.value().scheduler_reserve_full_isl);
  EXPECT_FALSE(c.value().release->lone_request_uncapped);
  EXPECT_EQ(c.value().release->free_order, FreeOrder::kFifo);
  EXPECT_EQ(c.value().long_prefill_token_threshold, 8);
}

TEST(VllmConfig, RecordsEveryOptionWithTheRelease) {
  auto c = read("scheduling_policy = \"priority\"\nscheduler_reserve_full_isl = false");
  ASSERT_TRUE(c.ok());
  const toml::table t = c.value().to_toml(true);
  EXPECT_EQ(t["vllm_version"].value<std::string>(), "0.33.0");
  EXPECT_EQ(t["scheduling_policy"].value<std::string>(), "priority");
  EXPECT_EQ(t["scheduler_reserve_full_isl"].value<bool>(), false);
  EXPECT_EQ(t["long_prefill_token_threshold_adaptive"].value<bool>(), false);
  EXPECT_EQ(t["order"].value<std::string>(), "fcfs");
  // The recorded table reads back to the same options.
  auto again = read_vllm_scheduler_config(t, true);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again.value().priority);
  EXPECT_FALSE(again.value().scheduler_reserve_full_isl);
  // 0.11.0 records no switch it lacks.
  const toml::table old = read("vllm_version = \"0.11.0\"", false).value().to_toml(false);
  EXPECT_FALSE(old.contains("scheduler_reserve_full_isl"));
  EXPECT_FALSE(old.contains("order"));
}

TEST(VllmConfig, RefusesWithTheKeyAndWhy) {
  EXPECT_EQ(error_of("vllm_version = \"0.20.0\""),
            "p.toml:1:16: policy.vllm_version: expected one of \"0.33.0\" | \"0.11.0\" (the vLLM "
            "releases mirrored), got \"0.20.0\"");
  EXPECT_NE(error_of("vllm_version = 0.33").find("got 0.33"), std::string::npos);
  EXPECT_EQ(error_of("vllm_version = \"0.11.0\"\nscheduler_reserve_full_isl = true"),
            "p.toml:2:30: policy.scheduler_reserve_full_isl: vLLM 0.11.0 has no such switch "
            "(admission checks only the first chunk, as false does); remove it, or set "
            "vllm_version = \"0.33.0\"");
  EXPECT_NE(error_of("vllm_version = \"0.11.0\"\nlong_prefill_token_threshold_adaptive = true")
                .find("policy.long_prefill_token_threshold_adaptive: vLLM 0.11.0 has no such"),
            std::string::npos);
  EXPECT_NE(error_of("vllm_version = \"0.11.0\"\nscheduling_policy = \"priority\"")
                .find("policy.scheduling_policy: vLLM 0.11.0's priority scheduling"),
            std::string::npos);
  EXPECT_NE(error_of("order = \"lpm\"\nscheduling_policy = \"priority\"")
                .find("policy.order: order = \"lpm\" (SGLang's longest prefix match) and "
                      "scheduling_policy = \"priority\""),
            std::string::npos);
  EXPECT_NE(error_of("max_num_partial_prefills = 4")
                .find("p.toml:1:28: policy.max_num_partial_prefills: vLLM's V1 scheduler has no "
                      "such option"),
            std::string::npos);
  EXPECT_NE(error_of("max_long_partial_prefills = 1").find("policy.max_long_partial_prefills"),
            std::string::npos);
  EXPECT_NE(error_of("scheduler_reserve_full_isl = 1").find("expected true or false, got 1"),
            std::string::npos);
  EXPECT_NE(error_of("scheduling_policy = \"lifo\"").find("expected one of 'fcfs' | 'priority'"),
            std::string::npos);
  // order is prefix-cached's alone.
  EXPECT_NE(error_of("order = \"lpm\"", false).find("policy.order: unknown key"), std::string::npos);
}

TEST(VllmConfig, ThePoliciesNameTheReleaseTheyMirror) {
  const std::string version(vllm_releases().front().version);
  for (const char* name : {"chunked-prefill", "prefix-cached"}) {
    auto info = find_policy(name);
    ASSERT_TRUE(info.ok());
    EXPECT_NE(info.value()->summary.find("vLLM " + version), std::string_view::npos) << name;
    for (const VllmRelease& r : vllm_releases()) {
      EXPECT_NE(info.value()->options_help.find("\"" + std::string(r.version) + "\""),
                std::string_view::npos)
          << name;
    }
    auto policy = info.value()->make(toml::table{});
    ASSERT_TRUE(policy.ok());
    EXPECT_EQ(policy.value()->options()["vllm_version"].value<std::string>(), version);
    EXPECT_EQ(policy.value()->queue_order(), QueueOrder::kFcfs);
    auto prio = info.value()->make(toml::table{{"scheduling_policy", "priority"}});
    ASSERT_TRUE(prio.ok());
    EXPECT_EQ(prio.value()->queue_order(), QueueOrder::kPriority);
  }
}

}  // namespace
}  // namespace servesim
