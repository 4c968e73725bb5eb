// Dependencies between the requests of a workload, and the order of Workload::requests.
//
// A request whose `after` is not empty arrives when the last of the requests it lists has finished,
// plus its think_time (a later turn of a conversation, a step of an agent's tool chain). The requests
// and their `after` lists form a directed graph that must have no cycle.
//
// The order rule (what the simulator relies on), applied by order_by_dependencies:
//   1. the requests without parents come first, sorted by arrival; ties keep their given order;
//   2. then every dependent request, as soon as all its parents are placed: breadth-first from the
//      requests of step 1, so that a request follows the placement of its last parent, and requests
//      made ready by the same parent keep their given order.
// Hence every parent has a smaller index than its children, and the independent requests are in
// non-decreasing arrival order among themselves. `after` holds indices into the final order.
// The rule is idempotent: ordering an ordered workload leaves it as it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/request.h"

namespace servesim {

// Puts `requests` in the order above and rewrites every `after` into indices of the new order.
// Returns false, leaving `requests` unchanged, when the dependencies have a cycle (find it with
// find_dependency_cycle). O(requests + dependencies); an already ordered workload with no
// dependencies costs one pass.
// REQUIRES: every index in every `after` is in [0, requests.size()).
bool order_by_dependencies(std::vector<RequestSpec>& requests);

// A cycle of the dependencies, as the indices of the requests on it in order, each waiting for the
// next and the last for the first, starting at the smallest index on it (a request that waits for
// itself is a cycle of one); empty when there is none. Deterministic: the cycle found first by a
// depth-first search (Boost.Graph) from the requests in index order.
// REQUIRES: every index in every `after` is in [0, requests.size()).
std::vector<int32_t> find_dependency_cycle(const std::vector<RequestSpec>& requests);

// "A -> B -> C -> A": the ids of the requests on `cycle`, closed by the first again.
// REQUIRES: cycle is not empty and indexes `requests`.
std::string describe_cycle(const std::vector<RequestSpec>& requests,
                           const std::vector<int32_t>& cycle);

}  // namespace servesim
