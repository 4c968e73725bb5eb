// Routers: which replica an arriving request goes to. Each is one small class behind this
// interface, like the batching policies: it sees the replicas' state at the instant of the arrival
// (requests in flight, KV use, what their prefix caches hold), never their costs, and it is asked
// once per request sent, in the order they are sent.
//
// Session affinity is the simulator's, around every router: with it (the default), a request that
// follows others (a conversation's next turn) goes where its first parent went, where that
// conversation's KV blocks are cached, and the router is not asked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace servesim {

struct Request;

// A replica as routers see it.
struct ReplicaLoad {
  int64_t outstanding = 0;  // requests sent to it and not finished: waiting or running
  int64_t kv_used = 0;      // KV blocks held by its sequences
  int64_t kv_total = 0;     // its KV blocks; -1: unlimited (the unit backend)
};

class RouterView {
 public:
  virtual ~RouterView() = default;
  virtual size_t replicas() const = 0;
  virtual ReplicaLoad load(size_t replica) const = 0;
  // How many of r's leading prompt tokens replica's prefix cache holds now (whole blocks, as the
  // replica's scheduler would find them), without touching its cache; 0 without prefix caching.
  virtual int64_t cached_prefix_tokens(size_t replica, Request& r) const = 0;
  // The distinct blocks replica's prefix cache holds (SGLang's "tree size").
  virtual int64_t cached_blocks(size_t replica) const = 0;
};

class Router {
 public:
  virtual ~Router() = default;
  // The replica (< view.replicas()) that r goes to.
  virtual size_t route(Request& r, const RouterView& view) = 0;
  // For a router whose choice depends on the order of requests alone, never on the replicas'
  // state (round robin): the replica the next request will go to. The simulator then knows when each
  // replica's next request comes, and leaps its decode iterations up to it.
  virtual std::optional<size_t> next_in_turn() const { return std::nullopt; }
};

// Round robin, the default.
std::unique_ptr<Router> make_round_robin_router();

}  // namespace servesim
