// The routers of registry.cc. Ties go to the lowest replica index, so that every choice is
// deterministic; the randomised routers draw from their own seeded stream.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "routers/registry.h"
#include "sim/config/options.h"
#include "sim/config/registry_lookup.h"
#include "sim/request.h"
#include "workloads/rng.h"

namespace servesim {
namespace {

// The stream of a run's seed that routers draw from, apart from the workload's.
constexpr uint64_t kRouterStream = 0x726f75746572ULL;  // "router"

// Replica i's KV use as a fraction (unlimited KV: its blocks, against none).
double kv_fraction(const ReplicaLoad& l) {
  return l.kv_total > 0 ? static_cast<double>(l.kv_used) / static_cast<double>(l.kv_total)
                        : static_cast<double>(l.kv_used);
}

// The replica with the fewest requests in flight (the lowest index among equals).
size_t least_outstanding(const RouterView& view) {
  size_t best = 0;
  int64_t fewest = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < view.replicas(); ++i) {
    const int64_t n = view.load(i).outstanding;
    if (n < fewest) {
      fewest = n;
      best = i;
    }
  }
  return best;
}

class RoundRobinRouter final : public Router {
 public:
  size_t route(Request&, const RouterView& view) override {
    const size_t target = next_ % view.replicas();
    next_ = (target + 1) % view.replicas();
    return target;
  }
  std::optional<size_t> next_in_turn() const override { return next_; }

 private:
  size_t next_ = 0;
};

class RandomRouter final : public Router {
 public:
  explicit RandomRouter(uint64_t seed) : rng_(Rng::stream(seed, kRouterStream)) {}
  size_t route(Request&, const RouterView& view) override { return static_cast<size_t>(rng_.below(view.replicas())); }

 private:
  Rng rng_;
};

// The fewest requests in flight: Vidur's and llm-d's "least outstanding requests".
class LeastOutstandingRouter final : public Router {
 public:
  size_t route(Request&, const RouterView& view) override { return least_outstanding(view); }
};

// The lowest KV use (the fraction of its blocks held), as load-aware routers score KV pressure;
// fewer requests in flight break ties.
class LeastKvRouter final : public Router {
 public:
  size_t route(Request&, const RouterView& view) override {
    size_t best = 0;
    for (size_t i = 1; i < view.replicas(); ++i) {
      const ReplicaLoad a = view.load(i), b = view.load(best);
      const double fa = kv_fraction(a), fb = kv_fraction(b);
      if (fa < fb || (fa == fb && a.outstanding < b.outstanding)) best = i;
    }
    return best;
  }
};

// Two replicas drawn at random (distinct when there are two or more), the one with fewer requests
// in flight (the first drawn among equals): Mitzenmacher's power of two choices.
class PowerOfTwoRouter final : public Router {
 public:
  explicit PowerOfTwoRouter(uint64_t seed) : rng_(Rng::stream(seed, kRouterStream)) {}
  size_t route(Request&, const RouterView& view) override {
    const size_t n = view.replicas();
    if (n == 1) return 0;
    const auto a = static_cast<size_t>(rng_.below(n));
    auto b = static_cast<size_t>(rng_.below(n - 1));
    if (b >= a) ++b;
    return view.load(b).outstanding < view.load(a).outstanding ? b : a;
  }

 private:
  Rng rng_;
};

// SGLang's cache-aware router in its event-driven mode, the one that routes by the workers' real KV
// caches (sgl-model-gateway, src/policies/cache_aware.rs: "Event-Driven (gRPC + KV events)"; the
// balance thresholds' defaults from its router_args.py), as the replicas' block managers answer it:
//   1. the load of a replica is its requests in flight; the replicas are imbalanced when
//      max - min > balance_abs_threshold and max > min x balance_rel_threshold: then the least
//      loaded replica (shortest queue);
//   2. otherwise the replica whose cache holds the longest prefix of the prompt (fewer in flight,
//      then fewer cached blocks, then the lowest index, among equals), if that prefix is more than
//      cache_threshold of the prompt (0: any prefix at all);
//   3. otherwise (no cached prefix) the least loaded replica (fewer cached blocks among equals).
// SGLang's default mode guesses the caches from an approximate radix tree of the prompts it routed
// and, without a match, prefers the worker with the smallest tree; with the real caches that rule
// would pile requests onto whichever replica's cache is emptiest until the imbalance test fires, so
// the event-driven fallback, the least loaded replica, is the one implemented.
class PrefixAwareRouter final : public Router {
 public:
  PrefixAwareRouter(double cache_threshold, int64_t abs_threshold, double rel_threshold)
      : cache_threshold_(cache_threshold), abs_threshold_(abs_threshold), rel_threshold_(rel_threshold) {}

  size_t route(Request& r, const RouterView& view) override {
    const size_t n = view.replicas();
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t load = view.load(i).outstanding;
      lo = std::min(lo, load);
      hi = std::max(hi, load);
    }
    if (hi - lo > abs_threshold_ && static_cast<double>(hi) > static_cast<double>(lo) * rel_threshold_) {
      return least_outstanding(view);
    }
    // Ordered by prefix (more first), then load, then cached blocks (fewer first); the lowest index
    // among equals.
    const auto better = [&](size_t a, int64_t a_prefix, size_t b, int64_t b_prefix) {
      if (a_prefix != b_prefix) return a_prefix > b_prefix;
      const int64_t la = view.load(a).outstanding, lb = view.load(b).outstanding;
      if (la != lb) return la < lb;
      return view.cached_blocks(a) < view.cached_blocks(b);
    };
    size_t best = 0;
    int64_t best_prefix = view.cached_prefix_tokens(0, r);
    for (size_t i = 1; i < n; ++i) {
      const int64_t prefix = view.cached_prefix_tokens(i, r);
      if (better(i, prefix, best, best_prefix)) {
        best = i;
        best_prefix = prefix;
      }
    }
    const double rate = static_cast<double>(best_prefix) / static_cast<double>(std::max(1, r.spec->prompt_tokens));
    if (best_prefix > 0 && rate > cache_threshold_) return best;
    size_t lightest = 0;
    for (size_t i = 1; i < n; ++i) {
      if (better(i, 0, lightest, 0)) lightest = i;
    }
    return lightest;
  }

 private:
  double cache_threshold_;
  int64_t abs_threshold_;
  double rel_threshold_;
};

template <typename R>
Result<std::unique_ptr<Router>> without_options(const toml::table& options, uint64_t seed) {
  OptionReader r(options, "router");
  r.reject_unknown();
  if (!r.ok()) return r.error();
  if constexpr (std::is_constructible_v<R, uint64_t>) {
    return std::unique_ptr<Router>(std::make_unique<R>(seed));
  } else {
    return std::unique_ptr<Router>(std::make_unique<R>());
  }
}

Result<std::unique_ptr<Router>> make_prefix_aware(const toml::table& options, uint64_t) {
  OptionReader r(options, "router");
  const double cache = r.number("cache_threshold", 0.0, 0, 1);
  const int64_t abs = r.integer("balance_abs_threshold", 64, 0, std::numeric_limits<int32_t>::max());
  const double rel = r.number("balance_rel_threshold", 1.5, 1, 1e9);
  r.reject_unknown();
  if (!r.ok()) return r.error();
  return std::unique_ptr<Router>(std::make_unique<PrefixAwareRouter>(cache, abs, rel));
}

}  // namespace

std::unique_ptr<Router> make_round_robin_router() { return std::make_unique<RoundRobinRouter>(); }

const std::vector<RouterInfo>& router_registry() {
  static const std::vector<RouterInfo> kRouters = {
      {"round-robin", "each request to the next replica in turn (vLLM production-stack's, Vidur's default)", "",
       false, &without_options<RoundRobinRouter>},
      {"random", "a replica drawn uniformly (seeded by the run's seed; Vidur's random)", "", false,
       &without_options<RandomRouter>},
      {"least-outstanding", "the replica with the fewest requests in flight (Vidur, llm-d's queue scorer)", "",
       false, &without_options<LeastOutstandingRouter>},
      {"least-kv", "the replica with the lowest share of its KV blocks in use (load-aware routers' KV scorer)", "",
       false, &without_options<LeastKvRouter>},
      {"power-of-two", "two replicas drawn at random, the one with fewer requests in flight (seeded)", "", false,
       &without_options<PowerOfTwoRouter>},
      {"prefix-aware",
       "SGLang's cache-aware router (event-driven mode) on the replicas' real prefix caches: the longest "
       "cached prefix, else the least loaded, unless the load is imbalanced (needs --policy prefix-cached)",
       "cache_threshold = 0 (share of the prompt that must be cached to follow the cache; 0: any prefix), "
       "balance_abs_threshold = 64, balance_rel_threshold = 1.5 (imbalanced: max - min > abs and "
       "max > min x rel, in requests in flight: then the least loaded)",
       true, &make_prefix_aware},
  };
  return kRouters;
}

Result<const RouterInfo*> find_router(std::string_view name) {
  std::string known;
  if (const RouterInfo* r = find_by_name(router_registry(), name, &known)) return r;
  return Error{"unknown router '" + std::string(name) + "' (known: " + known + ")"};
}

}  // namespace servesim
