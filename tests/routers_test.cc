// Routers (routers/registry.h): each rule on a hand-made view of the replicas, then through the
// simulator (every router over the invariants' workloads, determinism, session affinity) and the
// command line (prefix-aware against round robin on the shared-prefix workload, bad input).
#include "routers/registry.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_harness.h"
#include "sim/request.h"
#include "tests/generated_workloads.h"
#include "tests/sim_harness.h"
#include "workloads/workload.h"

namespace servesim {
namespace {

// Replicas as a router would see them, set by hand.
struct FakeView final : RouterView {
  std::vector<ReplicaLoad> loads;
  std::vector<int64_t> cached;  // prefix tokens of the request asked about
  std::vector<int64_t> blocks;  // cached blocks
  size_t replicas() const override { return loads.size(); }
  ReplicaLoad load(size_t i) const override { return loads[i]; }
  int64_t cached_prefix_tokens(size_t i, Request&) const override { return cached.empty() ? 0 : cached[i]; }
  int64_t cached_blocks(size_t i) const override { return blocks.empty() ? 0 : blocks[i]; }
};

std::unique_ptr<Router> make(const std::string& name, const std::string& options = "", uint64_t seed = 1) {
  Result<const RouterInfo*> info = find_router(name);
  EXPECT_TRUE(info.ok()) << name;
  Result<std::unique_ptr<Router>> r = info.value()->make(toml::parse(options), seed);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value();
}

struct Asked {
  RequestSpec spec;
  Request request;
  explicit Asked(int32_t prompt) {
    spec.prompt_tokens = prompt;
    request.spec = &spec;
  }
};

TEST(Routers, RoundRobinCyclesAndSaysWhoIsNext) {
  FakeView v;
  v.loads.resize(3);
  auto r = make("round-robin");
  Asked a(10);
  std::vector<size_t> got;
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(r->next_in_turn(), std::optional<size_t>(static_cast<size_t>(i % 3)));
    got.push_back(r->route(a.request, v));
  }
  EXPECT_EQ(got, (std::vector<size_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(make("least-outstanding")->next_in_turn(), std::nullopt);  // it reads the replicas
}

TEST(Routers, LeastOutstandingAndLeastKvPickTheLightestLowestIndexFirst) {
  FakeView v;
  v.loads = {{3, 50, 100}, {1, 20, 100}, {1, 20, 50}};
  Asked a(10);
  EXPECT_EQ(make("least-outstanding")->route(a.request, v), 1u);  // 1 and 2 tie: the lower index
  EXPECT_EQ(make("least-kv")->route(a.request, v), 1u);           // 20 % against 40 %
  v.loads = {{3, 10, 100}, {1, 10, 100}};
  EXPECT_EQ(make("least-kv")->route(a.request, v), 1u);  // the same share: fewer in flight
  v.loads = {{0, 10, -1}, {0, 4, -1}};                   // unlimited KV: by blocks held
  EXPECT_EQ(make("least-kv")->route(a.request, v), 1u);
}

TEST(Routers, PowerOfTwoTakesTheLighterOfTwoAndRandomIsUniformBothSeeded) {
  FakeView two;
  two.loads = {{5, 0, 100}, {1, 0, 100}};
  Asked a(10);
  auto p2 = make("power-of-two");
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p2->route(a.request, two), 1u);  // two distinct draws: always both
  FakeView four;
  four.loads = {{9, 0, 0}, {0, 0, 0}, {9, 0, 0}, {9, 0, 0}};
  std::map<size_t, int> p2_count, random_count;
  auto p = make("power-of-two", "", 5), r = make("random", "", 5);
  for (int i = 0; i < 4000; ++i) {
    ++p2_count[p->route(a.request, four)];
    ++random_count[r->route(a.request, four)];
  }
  // Replica 1 is in half of the 12 ordered pairs of distinct replicas: chosen about half the time.
  EXPECT_NEAR(p2_count[1], 2000, 150);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(random_count[i], 1000, 120) << i;
  // The same seed, the same choices; another seed, others.
  auto again = make("random", "", 5), other = make("random", "", 6);
  auto first = make("random", "", 5);
  std::vector<size_t> x, y, z;
  for (int i = 0; i < 64; ++i) {
    x.push_back(first->route(a.request, four));
    y.push_back(again->route(a.request, four));
    z.push_back(other->route(a.request, four));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

// SGLang's cache-aware rule (event-driven mode), step by step (routers.cc).
TEST(Routers, PrefixAwareFollowsTheCacheUnlessImbalanced) {
  Asked a(64);
  auto r = make("prefix-aware");
  FakeView v;
  v.loads = {{2, 0, 100}, {3, 0, 100}, {2, 0, 100}};
  v.cached = {0, 16, 8};
  v.blocks = {5, 9, 1};
  EXPECT_EQ(r->route(a.request, v), 1u);  // the longest cached prefix, even a short one
  v.cached = {0, 0, 0};
  EXPECT_EQ(r->route(a.request, v), 2u);  // none cached: the least loaded (2 and 0 tie: fewer blocks)
  v.cached = {32, 32, 0};
  v.loads = {{4, 0, 100}, {3, 0, 100}, {0, 0, 100}};
  EXPECT_EQ(r->route(a.request, v), 1u);  // equal prefixes: fewer in flight
  v.loads = {{100, 0, 100}, {30, 0, 100}, {20, 0, 100}};
  v.cached = {48, 0, 0};
  EXPECT_EQ(r->route(a.request, v), 2u);  // 100 - 20 > 64 and 100 > 1.5 x 20: shortest queue
  v.loads = {{100, 0, 100}, {70, 0, 100}, {70, 0, 100}};
  EXPECT_EQ(r->route(a.request, v), 0u);  // 30 apart: balanced enough, the cache wins
  auto strict = make("prefix-aware", "cache_threshold = 0.9\nbalance_abs_threshold = 8");
  // 30 > 8 but 100 <= 70 x 1.5: balanced; 48 / 64 = 0.75 <= 0.9: the least loaded (1 and 2 tie at
  // 70: fewer cached blocks).
  v.blocks = {5, 9, 1};
  EXPECT_EQ(strict->route(a.request, v), 2u);
}

TEST(Routers, UnknownNamesAndOptionsAreErrors) {
  Result<const RouterInfo*> none = find_router("nearest");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("known: round-robin, random, least-outstanding, least-kv, power-of-two, "
                                      "prefix-aware"),
            std::string::npos)
      << none.error().message;
  EXPECT_FALSE(find_router("prefix-aware").value()->make(toml::parse("cache_threshold = 2"), 0).ok());
  EXPECT_FALSE(find_router("random").value()->make(toml::parse("cache_threshold = 0.5"), 0).ok());
  std::set<std::string_view> names;
  for (const RouterInfo& r : router_registry()) EXPECT_TRUE(names.insert(r.name).second) << r.name;
}

// Every router over the invariants' workloads, three replicas, with and without session affinity:
// every request settled once, KV all free at the end, the same rows again from the same inputs.
TEST(RoutersInSimulator, EveryRouterKeepsTheInvariants) {
  using namespace servesim::testing;
  for (const RouterInfo& router : router_registry()) {
    const std::string policy = router.needs_prefix_caching ? "prefix-cached" : "continuous";
    for (const char* text : kWorkloads) {
      Result<Workload> w = parse_workload(text, "invariants.toml", std::nullopt);
      ASSERT_TRUE(w.ok()) << w.error().message;
      for (bool affinity : {true, false}) {
        SCOPED_TRACE(std::string(router.name) + " affinity=" + std::to_string(affinity));
        SimOptions o = generated_options(256, 3);
        o.session_affinity = affinity;
        o.router = [&router] { return router.make(toml::table{}, 3).value(); };
        auto run = simulate(w.value().requests, policy, "", o);
        ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
        ASSERT_EQ(run->capture.requests.size(), w.value().requests.size());
        std::set<std::string> ids;
        std::set<int> used;
        for (const Request& r : run->capture.requests) {
          EXPECT_TRUE(ids.insert(r.id()).second) << r.id();
          if (r.replica >= 0) used.insert(r.replica);
          if (affinity && !r.spec->after.empty() && r.replica >= 0) {
            EXPECT_EQ(r.replica, run->capture.by_id(run->specs[static_cast<size_t>(r.spec->after.front())].id).replica);
          }
        }
        EXPECT_GE(used.size(), 2u) << "one replica took everything";
        for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(run->sim->replica(i).kv_blocks_used(), 0);
        auto again = simulate(w.value().requests, policy, "", o);
        ASSERT_EQ(again->capture.requests.size(), run->capture.requests.size());
        for (size_t k = 0; k < run->capture.requests.size(); ++k) {
          EXPECT_EQ(again->capture.requests[k].replica, run->capture.requests[k].replica);
          EXPECT_EQ(again->capture.requests[k].finished, run->capture.requests[k].finished);
        }
      }
    }
  }
}

// Hand-worked, unit backend: four requests at once on two replicas, then one when replica 0 is
// busier: least-outstanding sends them 0, 1, 0, 1 and the fifth to replica 1.
TEST(RoutersInSimulator, LeastOutstandingHandWorked) {
  using namespace servesim::testing;
  std::vector<RequestSpec> specs = {spec("A", 0, 1, 6), spec("B", 0, 1, 2), spec("C", 0, 1, 6), spec("D", 0, 1, 2),
                                    spec("E", 3, 1, 2)};
  SimOptions o;
  o.replicas = 2;
  o.limits = {4, 64};
  o.router = [] { return find_router("least-outstanding").value()->make(toml::table{}, 0).value(); };
  auto run = simulate(specs, "continuous", "", o);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone);
  EXPECT_EQ(run->capture.by_id("A").replica, 0);
  EXPECT_EQ(run->capture.by_id("B").replica, 1);
  EXPECT_EQ(run->capture.by_id("C").replica, 0);
  EXPECT_EQ(run->capture.by_id("D").replica, 1);
  // At step 3, B and D (2 tokens each) are done; A and C still run on replica 0.
  EXPECT_LE(run->capture.by_id("D").finished, from_seconds(3));
  EXPECT_EQ(run->capture.by_id("E").replica, 1);
  // Round robin sends E to replica 0 (the fifth in turn), beside A and C.
  o.router = nullptr;
  EXPECT_EQ(simulate(specs, "continuous", "", o)->capture.by_id("E").replica, 0);
}

using servesim::testing::Cli;
using RoutersCli = Cli;

// The check: on the shared-prefix workload, routing by the prefix caches hits them more than
// round robin does (each replica computes each shared prefix once under round robin).
TEST_F(RoutersCli, PrefixAwareHitsTheCacheMoreThanRoundRobin) {
  std::map<std::string, double> hit;
  for (const char* router : {"round-robin", "prefix-aware"}) {
    const std::string db = std::string(router) + ".db";
    const auto o = sim({"--trace", "shared-prefix.toml", "--policy", "prefix-cached", "--router", router,
                        "--replicas", "8", "--num-prompts", "400", "--db", db, "--log", "summary"});
    ASSERT_EQ(o.status, 0) << o.output;
    hit[router] = std::stod(query("SELECT value FROM metrics WHERE name = 'prefix_hit_rate'", db));
    EXPECT_NE(query("SELECT config FROM runs", db).find(std::string("name = '") + router + "'"), std::string::npos);
  }
  EXPECT_GT(hit["prefix-aware"], hit["round-robin"] + 0.02) << hit["prefix-aware"] << " vs " << hit["round-robin"];
}

TEST_F(RoutersCli, BadRoutersAreInputErrorsAndNothingIsWritten) {
  const auto unknown = sim({"--trace", "pareto.toml", "--router", "nearest"});
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("unknown router 'nearest' (known: round-robin, random"), std::string::npos)
      << unknown.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sim.db"));
  const auto no_cache = sim({"--trace", "pareto.toml", "--router", "prefix-aware"});
  EXPECT_EQ(no_cache.status, 2);
  EXPECT_NE(no_cache.output.find("use --policy prefix-cached"), std::string::npos) << no_cache.output;
  const auto option = sim({"--trace", "pareto.toml", "--router", "least-kv", "--set", "router.threshold=3"});
  EXPECT_EQ(option.status, 2);
  EXPECT_NE(option.output.find("router.threshold"), std::string::npos) << option.output;
  const auto list = sim({"list", "routers"});
  EXPECT_EQ(list.status, 0);
  EXPECT_NE(list.output.find("power-of-two"), std::string::npos);
}

}  // namespace
}  // namespace servesim
