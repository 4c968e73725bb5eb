// Tests of workloads/sessions.h: conversations of generated turns, their prompts (with and without
// shared history), turn counts, ids, think times, prefixes, limits and the shipped multiturn.toml.
#include "workloads/sessions.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "workloads/dag.h"
#include "workloads/workload.h"

#ifndef SERVESIM_SOURCE_DATA_DIR
#define SERVESIM_SOURCE_DATA_DIR "data"  // when built outside CMake, from the repository root
#endif

namespace servesim {
namespace {

using namespace servesim::testing;

// n conversations; `sessions` is the body of [generate.sessions] (before its turns table), `turns`
// the body of [generate.sessions.turns], `extra` appended at the end (e.g. [generate.prefixes]).
std::string conversations(int n, const std::string& sessions, const std::string& turns,
                          const std::string& extra = "", const std::string& generate = "") {
  return "[generate]\nrequests = " + std::to_string(n) + "\nseed = 3\n" + generate +
         "[generate.arrival]\nprocess = 'poisson'\nrate = 2\n"
         "[generate.prompt_tokens]\ndist = 'lognormal'\nmedian = 150\nsigma = 0.8\nmax = 4000\n"
         "[generate.output_tokens]\ndist = 'uniform'\nmin = 1\nmax = 400\n"
         "[generate.sessions]\n" +
         sessions + "[generate.sessions.turns]\n" + turns + extra;
}

// The turns of each conversation, by conversation number, in turn order.
std::map<int, std::vector<const RequestSpec*>> by_conversation(const Workload& w) {
  std::map<int, std::vector<const RequestSpec*>> out;
  for (const RequestSpec& r : w.requests) {
    const size_t dot = r.id.find(".t");
    EXPECT_EQ(r.id[0], 's');
    EXPECT_NE(dot, std::string::npos);
    const int c = std::stoi(r.id.substr(1, dot - 1));
    const size_t t = std::stoul(r.id.substr(dot + 2));
    EXPECT_EQ(out[c].size(), t) << r.id;  // turns appear in turn order
    out[c].push_back(&r);
  }
  return out;
}

void expect_segments_sum(const Workload& w) {
  for (const RequestSpec& r : w.requests) {
    ASSERT_FALSE(r.prompt.empty()) << r.id;  // every turn names its content
    int64_t sum = 0;
    for (const Segment& s : r.prompt) {
      ASSERT_GE(s.tokens, 1) << r.id;
      sum += s.tokens;
    }
    ASSERT_EQ(sum, r.prompt_tokens) << r.id;
  }
}

TEST(Sessions, HistoryIsRepeatedTurnByTurn) {
  const Workload w =
      parse_ok(conversations(300, "think_time = 2.5\n", "dist = 'uniform'\nmin = 1\nmax = 6\n"));
  expect_segments_sum(w);
  const auto convs = by_conversation(w);
  ASSERT_EQ(convs.size(), 300u);
  std::map<const RequestSpec*, int32_t> index;
  for (size_t i = 0; i < w.requests.size(); ++i) index[&w.requests[i]] = static_cast<int32_t>(i);
  Time last_start = 0;
  for (const auto& [c, turns] : convs) {
    const RequestSpec& first = *turns[0];
    EXPECT_TRUE(first.after.empty());
    EXPECT_EQ(first.think_time, 0);
    EXPECT_GE(first.arrival, last_start);  // conversations start in arrival order
    last_start = first.arrival;
    ASSERT_EQ(first.prompt.size(), 1u);
    EXPECT_EQ(first.prompt[0].tokens, first.prompt_tokens);
    for (size_t t = 1; t < turns.size(); ++t) {
      const RequestSpec& prev = *turns[t - 1];
      const RequestSpec& r = *turns[t];
      EXPECT_EQ(r.after, (std::vector<int32_t>{index[&prev]})) << r.id;
      EXPECT_EQ(r.think_time, 2'500'000'000) << r.id;  // think = "fixed"
      EXPECT_EQ(r.arrival, 0) << r.id;
      // prompt = prev's prompt + prev's output + the new user tokens.
      ASSERT_EQ(r.prompt.size(), prev.prompt.size() + 2) << r.id;
      for (size_t s = 0; s < prev.prompt.size(); ++s) {
        EXPECT_EQ(r.prompt[s].id, prev.prompt[s].id) << r.id;
        EXPECT_EQ(r.prompt[s].tokens, prev.prompt[s].tokens) << r.id;
      }
      EXPECT_EQ(r.prompt[prev.prompt.size()].id, prev.output_id) << r.id;
      EXPECT_EQ(r.prompt[prev.prompt.size()].tokens, prev.output_tokens) << r.id;
      EXPECT_GT(r.prompt_tokens, prev.prompt_tokens + prev.output_tokens) << r.id;
    }
  }
  // Every turn has its own output id, of the loader's kind.
  std::set<uint64_t> outputs;
  for (const RequestSpec& r : w.requests) outputs.insert(r.output_id);
  EXPECT_EQ(outputs.size(), w.requests.size());
  EXPECT_EQ(outputs.count(content_id(kTurnOutputContent, 0)), 1u);
}

TEST(Sessions, OrderAndIds) {
  const Workload w = parse_ok(conversations(3, "", "dist = 'fixed'\nvalue = 2\n"));
  std::vector<std::string> ids;
  for (const RequestSpec& r : w.requests) ids.push_back(r.id);
  // First turns by arrival, then the turns that wait for them (dag.h).
  EXPECT_EQ(ids, (std::vector<std::string>{"s0.t0", "s1.t0", "s2.t0", "s0.t1", "s1.t1", "s2.t1"}));
  EXPECT_EQ(w.requests[3].after, (std::vector<int32_t>{0}));
  EXPECT_EQ(w.requests[5].after, (std::vector<int32_t>{2}));
  EXPECT_EQ(w.requests[3].think_time, 0);  // default think_time

  // A bigger workload is exactly in the order of dag.h: ordering it again changes nothing.
  const Workload big = parse_ok(conversations(500, "", "dist = 'uniform'\nmin = 1\nmax = 8\n"));
  std::vector<RequestSpec> again = big.requests;
  ASSERT_TRUE(order_by_dependencies(again));
  for (size_t i = 0; i < again.size(); ++i) {
    ASSERT_EQ(again[i].id, big.requests[i].id);
    ASSERT_EQ(again[i].after, big.requests[i].after);
  }
}

TEST(Sessions, TurnCountsFollowTheDistribution) {
  const Workload w = parse_ok(conversations(3'000, "", "dist = 'uniform'\nmin = 1\nmax = 6\n"));
  std::vector<int> histogram(7, 0);
  for (const auto& [c, turns] : by_conversation(w)) {
    ASSERT_GE(turns.size(), 1u);
    ASSERT_LE(turns.size(), 6u);
    ++histogram[turns.size()];
  }
  for (int t = 1; t <= 6; ++t) {
    EXPECT_NEAR(histogram[static_cast<size_t>(t)], 500, 90) << t;  // 4 sd
  }
  const Workload fixed = parse_ok(conversations(10, "", "dist = 'fixed'\nvalue = 4\n"));
  EXPECT_EQ(fixed.requests.size(), 40u);
}

TEST(Sessions, ExponentialThinkTimes) {
  const Workload w = parse_ok(conversations(2'000, "think_time = 5\nthink = 'exponential'\n",
                                            "dist = 'fixed'\nvalue = 3\n"));
  double sum = 0.0;
  int n = 0;
  std::set<Time> distinct;
  for (const RequestSpec& r : w.requests) {
    if (r.after.empty()) continue;
    ASSERT_GE(r.think_time, 0);
    sum += to_seconds(r.think_time);
    distinct.insert(r.think_time);
    ++n;
  }
  ASSERT_EQ(n, 4'000);
  EXPECT_NEAR(sum / n, 5.0, 0.35);  // sd of the mean: 5 / sqrt(4000) = 0.08
  EXPECT_GT(distinct.size(), 3'900u);
}

TEST(Sessions, WithoutSharedHistorySameLengthsNothingShared) {
  const std::string turns = "dist = 'uniform'\nmin = 1\nmax = 6\n";
  const Workload shared =
      parse_ok(conversations(200, "think_time = 1\nthink = 'exponential'\n", turns));
  const Workload apart = parse_ok(
      conversations(200, "think_time = 1\nthink = 'exponential'\nshare_history = false\n", turns));
  ASSERT_EQ(shared.requests.size(), apart.requests.size());
  expect_segments_sum(apart);
  std::map<uint64_t, int> uses;
  for (size_t i = 0; i < shared.requests.size(); ++i) {
    const RequestSpec& a = shared.requests[i];
    const RequestSpec& b = apart.requests[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.arrival, b.arrival);
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
    EXPECT_EQ(a.output_tokens, b.output_tokens);
    EXPECT_EQ(a.after, b.after);
    EXPECT_EQ(a.think_time, b.think_time);
    ASSERT_EQ(b.prompt.size(), 1u) << b.id;
    for (const Segment& s : b.prompt) ++uses[s.id];
  }
  for (const auto& [id, n] : uses) EXPECT_EQ(n, 1);  // no segment appears in two prompts
}

TEST(Sessions, PrefixesStartConversations) {
  const std::string prefixes = "[generate.prefixes]\nshare = 0.5\ncount = 3\ntokens = 500\n";
  const std::string turns = "dist = 'fixed'\nvalue = 3\n";
  for (const std::string share_history : {"true", "false"}) {
    const Workload w =
        parse_ok(conversations(400, "share_history = " + share_history + "\n", turns, prefixes));
    expect_segments_sum(w);
    int with_prefix = 0;
    for (const auto& [c, conv] : by_conversation(w)) {
      const Segment head = conv[0]->prompt[0];
      const bool has = head.tokens == 500 && (head.id == content_id(kPrefixContent, 0) ||
                                              head.id == content_id(kPrefixContent, 1) ||
                                              head.id == content_id(kPrefixContent, 2));
      with_prefix += has ? 1 : 0;
      for (const RequestSpec* r : conv) {
        // The whole conversation carries its first turn's prefix (and, with the history, its first
        // user message).
        if (has || share_history == "true") {
          EXPECT_EQ(r->prompt[0].id, head.id) << r->id;
        } else {
          EXPECT_EQ(r->prompt.size(), 1u) << r->id;
        }
        if (has) {
          EXPECT_GE(r->prompt.size(), 2u) << r->id;
        }
      }
    }
    EXPECT_NEAR(with_prefix, 200, 45) << share_history;  // Binomial(400, 0.5): 4.5 sd
  }
}

TEST(Sessions, HistoryHoldsTheOutputAsCappedByMaxTokens) {
  const Workload w =
      parse_ok(conversations(50, "", "dist = 'fixed'\nvalue = 2\n", "", "max_tokens = 100\n"));
  int capped = 0;
  for (const auto& [c, conv] : by_conversation(w)) {
    const RequestSpec& first = *conv[0];
    const RequestSpec& second = *conv[1];
    EXPECT_EQ(second.prompt[1].tokens, std::min(first.output_tokens, 100));
    capped += first.output_tokens > 100 ? 1 : 0;
  }
  EXPECT_GT(capped, 20);  // uniform 1..400: 3/4 are above 100
}

TEST(Sessions, DurationCountsConversationsStartedBeforeIt) {
  const std::string text =
      "[generate]\nduration = 100\nseed = 4\n[generate.arrival]\nprocess = 'constant'\nrate = 2\n"
      "[generate.output_tokens]\ndist = 'fixed'\nvalue = 10\n[generate.sessions]\n"
      "[generate.sessions.turns]\ndist = 'fixed'\nvalue = 3\n";
  const Workload w = parse_ok(text);
  EXPECT_EQ(w.requests.size(), 600u);  // 200 conversations (0 .. 99.5 s), 3 turns each
  for (const RequestSpec& r : w.requests) ASSERT_LT(r.arrival, 100 * kNsPerSecond);
  // No [generate.prompt_tokens]: every turn adds 1 user token.
  EXPECT_EQ(w.requests[0].prompt_tokens, 1);
  EXPECT_EQ(w.requests[200].prompt_tokens, 1 + 10 + 1);
  EXPECT_EQ(w.requests[400].prompt_tokens, 1 + 10 + 1 + 10 + 1);
}

TEST(Sessions, SameSeedSameTurns) {
  const std::string text = conversations(
      100, "think = 'exponential'\nthink_time = 3\n", "dist = 'uniform'\nmin = 1\nmax = 5\n",
      "[generate.prefixes]\nshare = 0.5\ncount = 2\ntokens = 9\n");
  const Workload a = parse_ok(text);
  const Workload b = parse_ok(text);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    const RequestSpec& p = a.requests[i];
    const RequestSpec& q = b.requests[i];
    ASSERT_EQ(p.id, q.id);
    ASSERT_EQ(p.think_time, q.think_time);
    ASSERT_EQ(p.output_id, q.output_id);
    ASSERT_EQ(p.prompt.size(), q.prompt.size());
    for (size_t s = 0; s < p.prompt.size(); ++s) {
      ASSERT_EQ(p.prompt[s].id, q.prompt[s].id);
      ASSERT_EQ(p.prompt[s].tokens, q.prompt[s].tokens);
    }
  }
}

TEST(SessionErrors, Options) {
  const std::string turns = "dist = 'fixed'\nvalue = 2\n";
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\n[generate.arrival]\nprocess = 'poisson'\n"
                        "rate = 1\n[generate.output_tokens]\ndist = 'fixed'\nvalue = 1\n"
                        "[generate.sessions]\nthink_time = 1\n"),
            "w.toml:9:1: generate.sessions: missing required table [generate.sessions.turns] "
            "(turns per conversation, for example dist = \"uniform\", min = 1, max = 6)");
  EXPECT_EQ(parse_error(conversations(3, "think_time = -1\n", turns)),
            "w.toml:17:14: generate.sessions.think_time: expected a number >= 0, got -1");
  EXPECT_EQ(parse_error(conversations(3, "think = 'gamma'\n", turns)),
            "w.toml:17:9: generate.sessions.think: unknown think-time distribution 'gamma' "
            "(known: fixed, exponential)");
  EXPECT_EQ(parse_error(conversations(3, "share_history = 'yes'\n", turns)),
            "w.toml:17:17: generate.sessions.share_history: expected true or false, got \"yes\"");
  EXPECT_EQ(parse_error(conversations(3, "turn = 3\n", turns)),
            "w.toml:17:1: generate.sessions.turn: unknown key (known: turns, think_time, think, "
            "share_history)");
  EXPECT_EQ(parse_error(conversations(3, "", "dist = 'fixed'\nvalue = 0\n")),
            "w.toml:19:9: generate.sessions.turns.value: expected an integer from 1 to 100000000, "
            "got 0");
}

TEST(SessionErrors, Limits) {
  EXPECT_EQ(parse_error(
                conversations(3'000'000, "share_history = false\n", "dist = 'fixed'\nvalue = 4\n")),
            "w.toml:18:1: generate.sessions.turns: the conversations have more than 10000000 "
            "turns in all; lower generate.requests or the turns distribution's max");
  EXPECT_EQ(parse_error(conversations(1, "", "dist = 'fixed'\nvalue = 5000\n")),
            "w.toml:17:1: generate.sessions.turns: the conversations' prompts hold more than "
            "20000000 segments in all (each turn repeats the history before it); lower the turns "
            "distribution's max or generate.requests");
  EXPECT_EQ(parse_error("[generate]\nrequests = 1\n[generate.arrival]\nprocess = 'poisson'\n"
                        "rate = 1\n[generate.prompt_tokens]\ndist = 'fixed'\nvalue = 40000000\n"
                        "[generate.output_tokens]\ndist = 'fixed'\nvalue = 1\n"
                        "[generate.sessions]\n[generate.sessions.turns]\ndist = 'fixed'\n"
                        "value = 3\n"),
            "w.toml:12:1: generate.sessions: conversation s0 reaches a prompt of more than "
            "100000000 tokens at turn 2; lower the turns or lengths' max");
}

TEST(Sessions, ShippedMultiturnWorkload) {
  auto loaded = load_workload(std::string(SERVESIM_SOURCE_DATA_DIR) + "/workloads/multiturn.toml",
                              std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Workload& w = loaded.value();
  expect_segments_sum(w);
  const auto convs = by_conversation(w);
  EXPECT_EQ(convs.size(), 200u);
  EXPECT_NEAR(static_cast<double>(w.requests.size()), 700.0, 120.0);  // 200 x 3.5 turns
}

}  // namespace
}  // namespace servesim
