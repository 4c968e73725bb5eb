// End-to-end runs of `sim` over the workloads that make chunked prefill and prefix caching matter:
// shared prefixes, multi-turn conversations and the shared real traces.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "analysis/reports/report.h"
#include "tests/cli_harness.h"

namespace servesim::testing {
namespace {

using WorkloadsE2e = Cli;

TEST_F(WorkloadsE2e, SharedPrefixesHitWhenMemoryHoldsThemAndFallWhenItDoesNot) {
  // 1,000 requests, 60 % starting with one of 5 prefixes of 1,024 tokens (64 blocks each).
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "prefix-cached", "--trace", "shared-prefix.toml", "--set", "kv.blocks=2000"}).status, 0);
  const double roomy = metric("prefix_request_hit_rate");
  EXPECT_GE(roomy, 0.55);
  EXPECT_GT(metric("prefix_hit_rate"), 0.5);
  const Outcome tight = sim({"--backend", "unit", "--policy", "prefix-cached", "--trace", "shared-prefix.toml", "--set", "kv.blocks=200"});
  ASSERT_EQ(tight.status, 0) << tight.output;
  EXPECT_LT(metric("prefix_request_hit_rate"), roomy - 0.2);
  EXPECT_EQ(metric("completed") + metric("rejected"), 1000);
  EXPECT_EQ(query("SELECT status FROM runs WHERE id = 2"), "done");
  // Without prefix caching nothing is served from a cache.
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "chunked-prefill", "--trace", "shared-prefix.toml"}).status, 0);
  EXPECT_EQ(metric("prefix_hit_rate"), 0);
}

TEST_F(WorkloadsE2e, ConversationTurnsArriveAfterTheirParentAndReuseTheHistory) {
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "prefix-cached", "--trace", "multiturn.toml"}).status, 0);
  const double shared = metric("prefix_hit_rate");
  // Turn k of conversation s is s<n>.t<k>: its parent is s<n>.t<k-1>.
  const std::string pairs =
      "FROM requests c JOIN requests p ON p.run_id = c.run_id AND p.id = "
      "substr(c.id, 1, instr(c.id, '.t') + 1) || (CAST(substr(c.id, instr(c.id, '.t') + 2) AS "
      "INTEGER) - 1) WHERE c.run_id = 1";
  EXPECT_NE(query("SELECT count(*) " + pairs), "0");
  EXPECT_EQ(query("SELECT count(*) " + pairs + " AND c.arrival < p.finished"), "0");

  const std::string text = [] {
    std::ifstream in(kData + "/workloads/multiturn.toml");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }();
  const size_t at = text.find("share_history = true");
  ASSERT_NE(at, std::string::npos);
  std::string alone = text;
  alone.replace(at, std::string("share_history = true").size(), "share_history = false");
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "prefix-cached", "--trace", write("alone.toml", alone)}).status, 0);
  EXPECT_GT(shared, metric("prefix_hit_rate") + 0.3);
}

// Issue 42, item 19: prefix caching on a trace of token counts (Azure's: no prompt content, no
// block hashes) hits nothing because nothing can be shared; the summary and `sim report` say so
// rather than let 0 % read as a finding. A trace with block hashes (Mooncake's) and a workload with
// shared prefixes get no such note.
TEST_F(WorkloadsE2e, PrefixCachingOnATraceOfTokenCountsSaysItsHitRateIsNoFinding) {
  const std::string traces = std::string(SERVESIM_PROJECT_DIR) + "/tests/data/traces/";
  const Outcome azure = sim({"--policy", "prefix-cached", "--trace", traces + "azure_conv_head.csv"});
  ASSERT_EQ(azure.status, 0) << azure.output;
  EXPECT_NE(azure.output.find("Prefix cache hit rate (tokens):          0.00%\n"), std::string::npos) << azure.output;
  EXPECT_NE(azure.output.find(std::string(kNoPromptContent) + "\n"), std::string::npos) << azure.output;
  EXPECT_EQ(metric("prefix_cacheable_requests"), 0);
  const Outcome report = sim({"report"});
  EXPECT_NE(report.output.find(kNoPromptContent), std::string::npos) << report.output;
  EXPECT_NE(sim({"report", "--format", "csv"}).output.find("\nprefix_cacheable_requests,0\n"), std::string::npos);

  const Outcome mooncake = sim({"--policy", "prefix-cached", "--trace", traces + "mooncake_conversation_head.jsonl"});
  ASSERT_EQ(mooncake.status, 0) << mooncake.output;
  EXPECT_EQ(mooncake.output.find("note:"), std::string::npos) << mooncake.output;
  EXPECT_EQ(metric("prefix_cacheable_requests"), 20);  // every line has its hash_ids
  EXPECT_EQ(sim({"report"}).output.find("note:"), std::string::npos);

  const Outcome shared = sim({"--backend", "unit", "--policy", "prefix-cached", "--trace", "shared-prefix.toml"});
  ASSERT_EQ(shared.status, 0) << shared.output;
  EXPECT_EQ(shared.output.find("note:"), std::string::npos) << shared.output;
  EXPECT_GT(metric("prefix_cacheable_requests"), 500);  // the 60 % that start with a shared prefix

  // Without prefix caching there is no cache to speak of: no metric, no note.
  const Outcome chunked = sim({"--policy", "chunked-prefill", "--trace", traces + "azure_conv_head.csv"});
  ASSERT_EQ(chunked.status, 0) << chunked.output;
  EXPECT_EQ(chunked.output.find("note:"), std::string::npos) << chunked.output;
  EXPECT_EQ(query("SELECT count(*) FROM metrics WHERE name = 'prefix_cacheable_requests' AND run_id = 4"), "0");
}

// priority.toml: 20 % interactive requests (priority 0) among batch jobs, more than one A100 serves.
// Priority scheduling admits the interactive class first: its mean TTFT falls from the shared
// queue's (over 10 s) to under 2 s, and the batch class waits longer than under fcfs.
TEST_F(WorkloadsE2e, PrioritySchedulingServesTheInteractiveClassFirst) {
  const std::string ttft =
      "SELECT avg(first_token - arrival) FROM requests WHERE run_id = %d AND priority = %d";
  auto mean_ttft = [&](int run, int priority) {
    char sql[200];
    std::snprintf(sql, sizeof sql, ttft.c_str(), run, priority);
    return std::stod(query(sql));
  };
  ASSERT_EQ(sim({"--policy", "chunked-prefill", "--trace", "priority.toml"}).status, 0);
  const Outcome prio = sim({"--policy", "chunked-prefill", "--trace", "priority.toml", "--set",
                            "policy.scheduling_policy=priority"});
  ASSERT_EQ(prio.status, 0) << prio.output;
  EXPECT_NE(prio.output.find("chunked-prefill (vLLM 0.33.0) / roofline"), std::string::npos);
  EXPECT_EQ(query("SELECT count(*) FROM requests WHERE run_id = 2 AND priority = 0"), "242");
  EXPECT_EQ(query("SELECT count(*) FROM requests WHERE run_id = 2 AND status = 'finished'"), "1200");
  EXPECT_GT(mean_ttft(1, 0), 10.0);
  EXPECT_LT(mean_ttft(2, 0), 2.0);
  EXPECT_GT(mean_ttft(2, 1), mean_ttft(1, 1));
}

TEST_F(WorkloadsE2e, TheShippedTracesReplayWithEveryRequest) {
  const std::pair<const char*, int> traces[] = {{"azure-conv.csv", 19366},
                                                {"azure-code.csv", 8819},
                                                {"mooncake-conversation.jsonl", 12031}};
  for (const auto& [name, rows] : traces) {
    const std::string path = shipped_trace(name);
    const Outcome o = sim({"--backend", "unit", "--policy", "chunked-prefill", "--trace", path, "--db", "traces.db"});
    ASSERT_EQ(o.status, 0) << name << ": " << o.output;
    EXPECT_EQ(query("SELECT count(*) FROM requests WHERE status = 'finished' AND run_id = "
                    "(SELECT max(id) FROM runs)", "traces.db"),
              std::to_string(rows))
        << name;
  }
}

TEST_F(WorkloadsE2e, MooncakePrefixHitsMatchTheTracesOwnBlockReuse) {
  const std::string path = shipped_trace("mooncake-conversation.jsonl");
  ASSERT_EQ(sim({"--backend", "unit", "--policy", "prefix-cached", "--trace", path}).status, 0);
  // 36.64 % of the trace's 512-token blocks repeat an earlier block (tests/mooncake_trace_test.cc).
  EXPECT_NEAR(metric("prefix_hit_rate"), 0.3664, 0.02);
}

TEST_F(WorkloadsE2e, ACorruptTraceLineOrAMissingColumnIsAnErrorWithItsLine) {
  const Outcome bad_row = sim({"--trace", write("t.csv", "arrival,prompt_tokens,output_tokens\n0,5,3\n1,x,3\n")});
  EXPECT_EQ(bad_row.status, 2);
  EXPECT_NE(bad_row.output.find("t.csv:3:"), std::string::npos) << bad_row.output;
  const Outcome missing = sim({"--trace", write("m.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n")});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("m.csv:1:"), std::string::npos) << missing.output;
  const Outcome json = sim({"--trace", write("j.jsonl", "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": [1]}\n{oops\n")});
  EXPECT_EQ(json.status, 2);
  EXPECT_NE(json.output.find("j.jsonl:2:"), std::string::npos) << json.output;
  EXPECT_FALSE(fs::exists(dir_ / "sim.db"));
}

TEST_F(WorkloadsE2e, ADependencyCycleIsAnErrorNamingTheRequests) {
  const Outcome o = sim({"--trace", write("cycle.toml",
                                          "[[request]]\nid = \"A\"\noutput_tokens = 1\nafter = [\"B\"]\n\n"
                                          "[[request]]\nid = \"B\"\noutput_tokens = 1\nafter = [\"A\"]\n")});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("A -> B -> A"), std::string::npos) << o.output;
  const Outcome dangling = sim({"--trace", write("dangling.toml", "[[request]]\nid = \"A\"\noutput_tokens = 1\nafter = [\"Z\"]\n")});
  EXPECT_EQ(dangling.status, 2);
  EXPECT_NE(dangling.output.find("Z"), std::string::npos) << dangling.output;
}

}  // namespace
}  // namespace servesim::testing
