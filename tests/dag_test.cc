// Tests of workloads/dag.h (the order of Workload::requests, cycle finding) and of `after` and
// `think_time` on explicit [[request]] entries (explicit_requests.h).
#include "workloads/dag.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

#include <map>
#include <string>
#include <vector>

#include "workloads/rng.h"
#include "workloads/workload.h"

namespace servesim {
namespace {

using namespace servesim::testing;

RequestSpec spec(std::string id, double arrival_s, std::vector<int32_t> after = {}) {
  RequestSpec r;
  r.id = std::move(id);
  r.arrival = after.empty() ? from_seconds(arrival_s) : 0;
  r.after = std::move(after);
  return r;
}

std::vector<std::string> ids(const std::vector<RequestSpec>& requests) {
  std::vector<std::string> out;
  for (const RequestSpec& r : requests) out.push_back(r.id);
  return out;
}

// The rule of dag.h: parents before children; independent requests first, by arrival.
void expect_order_rule(const std::vector<RequestSpec>& requests) {
  bool dependents_started = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestSpec& r = requests[i];
    for (int32_t p : r.after) ASSERT_LT(static_cast<size_t>(p), i) << r.id;
    if (r.after.empty()) {
      ASSERT_FALSE(dependents_started) << r.id << ": an independent request after a dependent one";
      if (i > 0) {
        ASSERT_GE(r.arrival, requests[i - 1].arrival) << r.id;
      }
    } else {
      dependents_started = true;
    }
  }
}

TEST(Dag, OrderRootsByArrivalThenBreadthFirst) {
  // Given order: c0 (after r1), r1 @5, r2 @1, c3 (after c0, r2), r4 @1, c5 (after r4).
  std::vector<RequestSpec> v = {spec("c0", 0, {1}),    spec("r1", 5), spec("r2", 1),
                                spec("c3", 0, {0, 2}), spec("r4", 1), spec("c5", 0, {4})};
  ASSERT_TRUE(order_by_dependencies(v));
  // Roots r2, r4 (tie: given order), r1; then c5 (ready when r4 is placed), c0 (when r1 is), c3.
  EXPECT_EQ(ids(v), (std::vector<std::string>{"r2", "r4", "r1", "c5", "c0", "c3"}));
  EXPECT_EQ(v[3].after, (std::vector<int32_t>{1}));     // c5 after r4
  EXPECT_EQ(v[4].after, (std::vector<int32_t>{2}));     // c0 after r1
  EXPECT_EQ(v[5].after, (std::vector<int32_t>{4, 0}));  // c3 after c0, r2: the given order of ids
  expect_order_rule(v);
  // Idempotent.
  std::vector<RequestSpec> again = v;
  ASSERT_TRUE(order_by_dependencies(again));
  EXPECT_EQ(ids(again), ids(v));
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(again[i].after, v[i].after);
}

TEST(Dag, RandomGraphsFollowTheRule) {
  Rng rng(5);
  for (int round = 0; round < 50; ++round) {
    const int n = 1 + static_cast<int>(rng.below(60));
    // Edges only to smaller given indices: acyclic; then shuffle the given order.
    std::vector<RequestSpec> v;
    for (int i = 0; i < n; ++i) {
      std::vector<int32_t> after;
      for (int p = 0; p < i; ++p) {
        if (rng.uniform() < 0.05) after.push_back(p);
      }
      v.push_back(spec("q" + std::to_string(i), static_cast<double>(rng.below(5)), after));
    }
    std::vector<int32_t> perm(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
    for (int i = n - 1; i > 0; --i)
      std::swap(perm[static_cast<size_t>(i)], perm[rng.below(static_cast<uint64_t>(i) + 1)]);
    std::vector<int32_t> where(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) where[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
    std::vector<RequestSpec> shuffled;
    for (int i = 0; i < n; ++i) {
      RequestSpec r = v[static_cast<size_t>(perm[static_cast<size_t>(i)])];
      for (int32_t& p : r.after) p = where[static_cast<size_t>(p)];
      shuffled.push_back(r);
    }
    // Parent ids of each request, to check that `after` still names the same requests.
    std::map<std::string, std::vector<std::string>> parents;
    for (const RequestSpec& r : shuffled) {
      for (int32_t p : r.after) parents[r.id].push_back(shuffled[static_cast<size_t>(p)].id);
    }
    ASSERT_TRUE(find_dependency_cycle(shuffled).empty());
    ASSERT_TRUE(order_by_dependencies(shuffled));
    ASSERT_EQ(shuffled.size(), static_cast<size_t>(n));
    expect_order_rule(shuffled);
    for (const RequestSpec& r : shuffled) {
      std::vector<std::string> names;
      for (int32_t p : r.after) names.push_back(shuffled[static_cast<size_t>(p)].id);
      ASSERT_EQ(names, parents[r.id]) << r.id;
    }
  }
}

TEST(Dag, CyclesAreFoundAndNamedInOrder) {
  std::vector<RequestSpec> v = {spec("free", 0),   spec("B", 0, {3}), spec("entry", 0, {1}),
                                spec("C", 0, {4}), spec("A", 0, {1}), spec("self", 0, {5})};
  // B waits for C, C for A, A for B; entry waits for B (leads into the cycle, not on it).
  const std::vector<RequestSpec> before = v;
  EXPECT_FALSE(order_by_dependencies(v));
  EXPECT_EQ(ids(v), ids(before));  // unchanged
  const std::vector<int32_t> cycle = find_dependency_cycle(v);
  EXPECT_EQ(cycle, (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(describe_cycle(v, cycle), "B -> C -> A -> B");

  std::vector<RequestSpec> loop = {spec("x", 0), spec("self", 0, {1})};
  EXPECT_FALSE(order_by_dependencies(loop));
  EXPECT_EQ(find_dependency_cycle(loop), (std::vector<int32_t>{1}));
  EXPECT_EQ(describe_cycle(loop, {1}), "self -> self");

  EXPECT_TRUE(find_dependency_cycle({spec("a", 0), spec("b", 0, {0})}).empty());
  EXPECT_TRUE(find_dependency_cycle({}).empty());
}

TEST(Dag, LongChainsNeitherRecurseNorSlowDown) {
  std::vector<RequestSpec> v;
  for (int i = 0; i < 200'000; ++i) {
    v.push_back(spec("c" + std::to_string(i), 0,
                     i == 0 ? std::vector<int32_t>{} : std::vector<int32_t>{i - 1}));
  }
  EXPECT_TRUE(find_dependency_cycle(v).empty());
  v.front().after = {199'999};
  EXPECT_EQ(find_dependency_cycle(v).size(), 200'000u);
}

TEST(Dag, AfterAndThinkTimeOnExplicitRequests) {
  const Workload w = parse_ok(R"(
[[request]]
id = "summary"
after = ["search", "fetch"]
think_time = 0.5
output_tokens = 50
[[request]]
id = "fetch"
arrival = 2.0
output_tokens = 10
[[request]]
id = "search"
arrival = 1.0
output_tokens = 10
[[request]]
id = "answer"
after = ["summary"]
output_tokens = 100
[[request]]
id = "other"
arrival = 1.0
output_tokens = 3
)");
  EXPECT_EQ(ids(w.requests),
            (std::vector<std::string>{"search", "other", "fetch", "summary", "answer"}));
  const RequestSpec& summary = w.requests[3];
  EXPECT_EQ(summary.after, (std::vector<int32_t>{0, 2}));  // search, fetch: as written
  EXPECT_EQ(summary.think_time, 500'000'000);
  EXPECT_EQ(summary.arrival, 0);
  EXPECT_EQ(summary.line, 2);
  EXPECT_EQ(w.requests[4].after, (std::vector<int32_t>{3}));
  EXPECT_EQ(w.requests[4].think_time, 0);  // default
  expect_order_rule(w.requests);
}

TEST(DagErrors, ExplicitRequests) {
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n\n[[request]]\nid = 'B'\n"
                        "after = ['A', 'Z']\noutput_tokens = 1\n"),
            "w.toml:7:15: request[1].after: request 'B' (line 5) waits for 'Z', but no request "
            "has that id");
  EXPECT_EQ(parse_error("[[request]]\nid = 'free'\noutput_tokens = 1\n"
                        "[[request]]\nid = 'A'\nafter = ['B']\noutput_tokens = 1\n"
                        "[[request]]\nid = 'B'\nafter = ['C']\noutput_tokens = 1\n"
                        "[[request]]\nid = 'C'\nafter = ['A', 'free']\noutput_tokens = 1\n"),
            "w.toml:4:1: request[1]: dependency cycle: A -> B -> C -> A");
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\nafter = ['A']\noutput_tokens = 1\n"),
            "w.toml:1:1: request[0]: dependency cycle: A -> A");
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n[[request]]\narrival = 3\n"
                        "after = ['A']\noutput_tokens = 1\n"),
            "w.toml:5:11: request[1].arrival: not allowed with after: the request arrives when "
            "the requests in after have finished, plus think_time; remove arrival, or after");
  EXPECT_EQ(parse_error("[[request]]\nthink_time = 2\noutput_tokens = 1\n"),
            "w.toml:2:14: request[0].think_time: only allowed with after (it is the pause between "
            "the end of the requests in after and this arrival); give after, or remove "
            "think_time");
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n[[request]]\nafter = []\n"
                        "output_tokens = 1\n"),
            "w.toml:5:9: request[1].after: expected a non-empty array of request ids, like "
            "[\"A\", \"B\"], got an empty array");
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n[[request]]\nafter = 'A'\n"
                        "output_tokens = 1\n"),
            "w.toml:5:9: request[1].after: expected a non-empty array of request ids, like "
            "[\"A\", \"B\"], got \"A\"");
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n[[request]]\n"
                        "after = ['A', 3]\noutput_tokens = 1\n"),
            "w.toml:5:15: request[1].after[1]: expected a request id (a non-empty string), got 3");
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n[[request]]\n"
                        "after = ['A', 'A']\noutput_tokens = 1\n"),
            "w.toml:5:15: request[1].after[1]: 'A' is listed twice");
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n[[request]]\n"
                        "after = ['A']\nthink_time = -1\noutput_tokens = 1\n"),
            "w.toml:6:14: request[1].think_time: expected a number >= 0, got -1");
}

}  // namespace
}  // namespace servesim
