// Tests of workloads/prefixes.h: [generate.prefixes] (share, popularity, prepending, determinism,
// independence from the other draws) and explicit [[prefix]] entries named by [[request]] entries.
#include "workloads/prefixes.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "workloads/workload.h"

#ifndef SERVESIM_SOURCE_DATA_DIR
#define SERVESIM_SOURCE_DATA_DIR "data"  // when built outside CMake, from the repository root
#endif

namespace servesim {
namespace {

using namespace servesim::testing;

// A [generate] workload of n requests; `prefixes` is the body of [generate.prefixes] ("" for none).
std::string generated(int n, const std::string& prefixes) {
  std::string text = "[generate]\nrequests = " + std::to_string(n) +
                     "\nseed = 11\n[generate.arrival]\nprocess = 'poisson'\nrate = 4\n"
                     "[generate.prompt_tokens]\ndist = 'lognormal'\nmedian = 300\nsigma = 1\n"
                     "max = 8192\n[generate.output_tokens]\ndist = 'uniform'\nmin = 1\nmax = 500\n";
  if (!prefixes.empty()) text += "[generate.prefixes]\n" + prefixes;
  return text;
}

// The prefix number of a request's first segment, or -1 when it has no prefix.
int32_t prefix_of(const RequestSpec& r, int32_t count) {
  if (r.prompt.empty()) return -1;
  for (int32_t k = 0; k < count; ++k) {
    if (r.prompt.front().id == content_id(kPrefixContent, static_cast<uint64_t>(k))) return k;
  }
  return -1;
}

// Every request's segments add up to its prompt_tokens (an empty prompt is the request's own).
void expect_segments_sum(const Workload& w) {
  for (const RequestSpec& r : w.requests) {
    if (r.prompt.empty()) continue;
    int64_t sum = 0;
    for (const Segment& s : r.prompt) {
      ASSERT_GE(s.tokens, 1) << r.id;
      sum += s.tokens;
    }
    ASSERT_EQ(sum, r.prompt_tokens) << r.id;
  }
}

TEST(Prefixes, ShareWithinToleranceAndPrefixIsPrepended) {
  const Workload plain = parse_ok(generated(10'000, ""));
  const Workload w = parse_ok(generated(10'000, "share = 0.6\ncount = 5\ntokens = 1024\n"));
  ASSERT_EQ(w.requests.size(), 10'000u);
  ASSERT_EQ(plain.requests.size(), 10'000u);
  expect_segments_sum(w);
  int with_prefix = 0;
  std::vector<int> per_prefix(5, 0);
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const RequestSpec& r = w.requests[i];
    const RequestSpec& p = plain.requests[i];
    // A separate stream: arrivals, lengths and ids are those of the workload without prefixes.
    ASSERT_EQ(r.id, p.id);
    ASSERT_EQ(r.arrival, p.arrival);
    ASSERT_EQ(r.output_tokens, p.output_tokens);
    const int32_t k = prefix_of(r, 5);
    if (k < 0) {
      EXPECT_TRUE(r.prompt.empty()) << r.id;
      EXPECT_EQ(r.prompt_tokens, p.prompt_tokens) << r.id;
      continue;
    }
    ++with_prefix;
    ++per_prefix[static_cast<size_t>(k)];
    ASSERT_EQ(r.prompt.size(), 2u);
    EXPECT_EQ(r.prompt[0].tokens, 1024);
    EXPECT_EQ(r.prompt[1].id, content_id(kUserContent, i));
    EXPECT_EQ(r.prompt[1].tokens, p.prompt_tokens);
    EXPECT_EQ(r.prompt_tokens, 1024 + p.prompt_tokens);  // prepended, not carved out
  }
  // Binomial(10000, 0.6): sd 49; 4 sd.
  EXPECT_NEAR(with_prefix, 6000, 200);
  for (int c : per_prefix) EXPECT_NEAR(c, 1200, 140);  // sd ~31 given the total; generous
}

TEST(Prefixes, ZipfPopularityIsSkewed) {
  const Workload w = parse_ok(generated(
      10'000, "share = 1.0\ncount = 8\ntokens = 64\npopularity = 'zipf'\nexponent = 1.0\n"));
  std::vector<int> per_prefix(8, 0);
  for (const RequestSpec& r : w.requests) {
    const int32_t k = prefix_of(r, 8);
    ASSERT_GE(k, 0) << r.id;  // share = 1: every request has one
    ++per_prefix[static_cast<size_t>(k)];
  }
  // P(k) = (k + 1)^-1 / H_8, H_8 = 2.7179.
  double h = 0.0;
  for (int k = 1; k <= 8; ++k) h += 1.0 / k;
  for (size_t k = 0; k < 8; ++k) {
    const double expected = 10'000.0 / (static_cast<double>(k) + 1.0) / h;
    EXPECT_NEAR(per_prefix[k], expected, 4.0 * std::sqrt(expected) + 5.0) << k;
  }
  EXPECT_GT(per_prefix[0], 3 * per_prefix[3]);  // 4x in expectation

  // A steeper exponent concentrates even more on the first prefix.
  const Workload steep = parse_ok(
      generated(2'000, "share = 1.0\ncount = 8\ntokens = 64\npopularity = 'zipf'\nexponent = 3\n"));
  int first = 0;
  for (const RequestSpec& r : steep.requests) first += prefix_of(r, 8) == 0 ? 1 : 0;
  EXPECT_GT(first, 1'500);  // 1 / zeta_8(3) = 83 %
}

TEST(Prefixes, ShareZeroAndRaisingShareKeepsChoices) {
  for (const RequestSpec& r :
       parse_ok(generated(500, "share = 0\ncount = 3\ntokens = 8\n")).requests) {
    EXPECT_TRUE(r.prompt.empty()) << r.id;
  }
  const Workload low = parse_ok(generated(2'000, "share = 0.3\ncount = 4\ntokens = 8\n"));
  const Workload high = parse_ok(generated(2'000, "share = 0.7\ncount = 4\ntokens = 8\n"));
  for (size_t i = 0; i < low.requests.size(); ++i) {
    const int32_t k = prefix_of(low.requests[i], 4);
    if (k >= 0) {
      ASSERT_EQ(prefix_of(high.requests[i], 4), k) << i;
    }
  }
}

TEST(Prefixes, SameSeedSameSegments) {
  const std::string text = generated(1'000,
                                     "share = 0.5\ncount = 10\ntokens = 100\n"
                                     "popularity = 'zipf'\nexponent = 1.2\n");
  const Workload a = parse_ok(text);
  const Workload b = parse_ok(text);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    const RequestSpec& p = a.requests[i];
    const RequestSpec& q = b.requests[i];
    ASSERT_EQ(p.prompt.size(), q.prompt.size());
    for (size_t s = 0; s < p.prompt.size(); ++s) {
      ASSERT_EQ(p.prompt[s].id, q.prompt[s].id);
      ASSERT_EQ(p.prompt[s].tokens, q.prompt[s].tokens);
    }
  }
  // Another seed picks other prefixes.
  auto other = parse_workload(text, "w.toml", 12);
  ASSERT_TRUE(other.ok());
  int differ = 0;
  for (size_t i = 0; i < a.requests.size(); ++i) {
    differ += prefix_of(a.requests[i], 10) != prefix_of(other.value().requests[i], 10) ? 1 : 0;
  }
  EXPECT_GT(differ, 100);
}

TEST(Prefixes, PrependPrefixRefusesOverflow) {
  RequestSpec r;
  r.prompt_tokens = 10;
  ASSERT_TRUE(prepend_prefix(r, prefix_segment(2, 5), 7));
  EXPECT_EQ(r.prompt_tokens, 15);
  ASSERT_EQ(r.prompt.size(), 2u);
  EXPECT_EQ(r.prompt[0].id, content_id(kPrefixContent, 2));
  EXPECT_EQ(r.prompt[1].id, content_id(kUserContent, 7));
  RequestSpec big;
  big.prompt_tokens = std::numeric_limits<int32_t>::max();
  EXPECT_FALSE(prepend_prefix(big, prefix_segment(0, 1), 0));
  EXPECT_TRUE(big.prompt.empty());
  EXPECT_EQ(big.prompt_tokens, std::numeric_limits<int32_t>::max());
}

TEST(PrefixErrors, GeneratePrefixesTable) {
  EXPECT_EQ(parse_error(generated(3, "share = 0.5\ntokens = 8\n")),
            "w.toml:16:1: generate.prefixes: missing required key 'count'");
  EXPECT_EQ(parse_error(generated(3, "share = 1.5\ncount = 2\ntokens = 8\n")),
            "w.toml:17:9: generate.prefixes.share: expected a number <= 1, got 1.5");
  EXPECT_EQ(parse_error(generated(3, "share = 0.5\ncount = 0\ntokens = 8\n")),
            "w.toml:18:9: generate.prefixes.count: expected an integer from 1 to 10000000, got 0");
  EXPECT_EQ(parse_error(generated(3, "share = 0.5\ncount = 2\ntokens = 0\n")),
            "w.toml:19:10: generate.prefixes.tokens: expected an integer from 1 to 100000000, got 0");
  EXPECT_EQ(parse_error(generated(3, "share = 0.5\ncount = 2\ntokens = 8\nexponent = 2\n")),
            "w.toml:20:1: generate.prefixes.exponent: unknown key for popularity = \"uniform\" "
            "(known: share, count, tokens, popularity)");
  EXPECT_EQ(parse_error(generated(3, "share = 0.5\ncount = 2\ntokens = 8\npopularity = 'pop'\n")),
            "w.toml:20:14: generate.prefixes.popularity: unknown popularity 'pop' (known: "
            "uniform, zipf)");
  EXPECT_EQ(parse_error(generated(3,
                                  "share = 0.5\ncount = 2\ntokens = 8\npopularity = 'zipf'\n"
                                  "exponent = 0\n")),
            "w.toml:21:12: generate.prefixes.exponent: expected a number > 0, got 0");
  EXPECT_EQ(parse_error(generated(3, "share = 1\ncount = 2\ntokens = 100000000\n")),
            "w.toml:19:10: generate.prefixes.tokens: a prefix plus a drawn prompt exceed "
            "100000000 tokens; lower tokens or generate.prompt_tokens.max");
}

TEST(Prefixes, ExplicitPrefixes) {
  const Workload w = parse_ok(R"(
[[prefix]]
id = "system"
tokens = 1000
[[prefix]]
id = "fewshot"
tokens = 300

[[request]]
id = "A"
prefix = "fewshot"
prompt_tokens = 20
output_tokens = 5
[[request]]
id = "B"
arrival = 1
prefix = "system"
output_tokens = 5
[[request]]
id = "C"
arrival = 2
prompt_tokens = 7
output_tokens = 5
)");
  ASSERT_EQ(w.requests.size(), 3u);
  const RequestSpec& a = w.requests[0];
  EXPECT_EQ(a.prompt_tokens, 320);  // the prefix + the request's own prompt_tokens
  ASSERT_EQ(a.prompt.size(), 2u);
  EXPECT_EQ(a.prompt[0].id, content_id(kPrefixContent, 1));  // the second [[prefix]]
  EXPECT_EQ(a.prompt[0].tokens, 300);
  EXPECT_EQ(a.prompt[1].id, content_id(kUserContent, 0));
  EXPECT_EQ(a.prompt[1].tokens, 20);
  const RequestSpec& b = w.requests[1];
  EXPECT_EQ(b.prompt_tokens, 1001);  // prompt_tokens defaults to 1 after the prefix
  ASSERT_EQ(b.prompt.size(), 2u);
  EXPECT_EQ(b.prompt[0].id, content_id(kPrefixContent, 0));
  EXPECT_EQ(b.prompt[1].id, content_id(kUserContent, 1));
  EXPECT_TRUE(w.requests[2].prompt.empty());  // no prefix: its own prompt
  EXPECT_EQ(w.requests[2].prompt_tokens, 7);
}

TEST(PrefixErrors, ExplicitPrefixes) {
  const std::string prefixes =
      "[[prefix]]\nid = 'sys'\ntokens = 10\n[[prefix]]\nid = 'rag'\n"
      "tokens = 20\n";
  EXPECT_EQ(parse_error(prefixes + "[[request]]\noutput_tokens = 1\nprefix = 'sy'\n"),
            "w.toml:9:10: request[0].prefix: unknown prefix 'sy' (known: sys, rag)");
  EXPECT_EQ(parse_error("[[request]]\noutput_tokens = 1\nprefix = 'sys'\n"),
            "w.toml:3:10: request[0].prefix: unknown prefix 'sys' (this file has no [[prefix]] "
            "entries)");
  EXPECT_EQ(parse_error("[[prefix]]\nid = 'a'\ntokens = 1\n[[prefix]]\nid = 'a'\ntokens = 2\n"
                        "[[request]]\noutput_tokens = 1\n"),
            "w.toml:5:6: prefix[1].id: duplicate prefix id 'a' (also the id of prefix[0] on line "
            "1)");
  EXPECT_EQ(parse_error("[[prefix]]\nid = 'a'\n[[request]]\noutput_tokens = 1\n"),
            "w.toml:1:1: prefix[0]: missing required key 'tokens'");
  EXPECT_EQ(parse_error("[[prefix]]\nid = 'a'\ntokens = 0\n[[request]]\noutput_tokens = 1\n"),
            "w.toml:3:10: prefix[0].tokens: expected an integer from 1 to 100000000, got 0");
  EXPECT_EQ(parse_error("[[prefix]]\nid = 'a'\ntokens = 1\nshare = 1\n[[request]]\n"
                        "output_tokens = 1\n"),
            "w.toml:4:1: prefix[0].share: unknown key (known: id, tokens)");
  EXPECT_EQ(parse_error("[prefix]\nid = 'a'\ntokens = 1\n[[request]]\noutput_tokens = 1\n"),
            "w.toml:1:1: prefix: expected [[prefix]] entries (an array of tables), got a single "
            "[prefix] table; write [[prefix]], with double brackets");
  EXPECT_EQ(parse_error("[[prefix]]\nid = 'a'\ntokens = 99999500\n[[request]]\n"
                        "output_tokens = 1\nprompt_tokens = 1000\nprefix = 'a'\n"),
            "w.toml:7:10: request[0].prefix: prefix 'a' (99999500 tokens) and prompt_tokens "
            "(1000) add up to more than 100000000 tokens");
  EXPECT_EQ(parse_error("[[prefix]]\nid = 'a'\ntokens = 1\n" + generated(3, "")),
            "w.toml:1:1: prefix: [[prefix]] entries are named by [[request]] entries; with "
            "[generate] they are never used (shared prefixes of generated requests go in "
            "[generate.prefixes])");
  EXPECT_EQ(parse_error("[[prefix]]\nid = 'a'\ntokens = 1\n"),
            "w.toml: no workload: expected [[request]] entries, a [generate] table or a [replay] "
            "table");
}

TEST(Prefixes, ShippedSharedPrefixWorkload) {
  auto loaded = load_workload(
      std::string(SERVESIM_SOURCE_DATA_DIR) + "/workloads/shared-prefix.toml", std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Workload& w = loaded.value();
  ASSERT_EQ(w.requests.size(), 1000u);
  expect_segments_sum(w);
  int with_prefix = 0;
  for (const RequestSpec& r : w.requests) {
    if (prefix_of(r, 5) < 0) continue;
    ++with_prefix;
    EXPECT_EQ(r.prompt[0].tokens, 1024);
  }
  EXPECT_NEAR(with_prefix, 600, 62);  // Binomial(1000, 0.6): 4 sd
}

}  // namespace
}  // namespace servesim
