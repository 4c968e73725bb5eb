#include "workloads/dag.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <cassert>
#include <optional>
#include <utility>

namespace servesim {
namespace {

// An edge u -> v: request u waits for request v.
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

// Records the search tree and the first back edge (the search's witness of a cycle). Boost copies
// visitors, so the state lives outside.
struct CycleVisitor : boost::default_dfs_visitor {
  std::vector<Vertex>* tree_parent;
  std::optional<std::pair<Vertex, Vertex>>* back;

  void tree_edge(Edge e, const Graph& g) const {
    (*tree_parent)[boost::target(e, g)] = boost::source(e, g);
  }
  void back_edge(Edge e, const Graph& g) const {
    if (!*back) *back = std::pair(boost::source(e, g), boost::target(e, g));
  }
};

bool already_ordered(const std::vector<RequestSpec>& requests) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].after.empty()) return false;
    if (i > 0 && requests[i].arrival < requests[i - 1].arrival) return false;
  }
  return true;
}

}  // namespace

bool order_by_dependencies(std::vector<RequestSpec>& requests) {
  if (already_ordered(requests)) return true;
  const size_t n = requests.size();
  // Children of each request, in index order, as compressed rows: children[first[p] .. first[p+1]).
  std::vector<int32_t> first(n + 1, 0);
  std::vector<int32_t> pending(n, 0);  // parents not yet placed
  for (size_t i = 0; i < n; ++i) {
    for (int32_t p : requests[i].after) ++first[static_cast<size_t>(p) + 1];
    pending[i] = static_cast<int32_t>(requests[i].after.size());
  }
  for (size_t p = 0; p < n; ++p) first[p + 1] += first[p];
  std::vector<int32_t> children(static_cast<size_t>(first[n]));
  std::vector<int32_t> fill(first.begin(), first.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t p : requests[i].after) {
      children[static_cast<size_t>(fill[p]++)] = static_cast<int32_t>(i);
    }
  }

  std::vector<int32_t> order;  // order[k]: the given index of the request placed k-th
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return requests[a].arrival < requests[b].arrival; });
  for (size_t head = 0; head < order.size(); ++head) {
    const int32_t u = order[head];
    for (int32_t k = first[u]; k < first[u + 1]; ++k) {
      const int32_t c = children[static_cast<size_t>(k)];
      if (--pending[c] == 0) order.push_back(c);
    }
  }
  if (order.size() != n) return false;  // the requests left over wait on a cycle

  std::vector<int32_t> position(n);
  for (size_t k = 0; k < n; ++k) position[order[k]] = static_cast<int32_t>(k);
  std::vector<RequestSpec> out;
  out.reserve(n);
  for (int32_t i : order) {
    RequestSpec& r = out.emplace_back(std::move(requests[i]));
    for (int32_t& p : r.after) p = position[p];
  }
  requests = std::move(out);
  return true;
}

std::vector<int32_t> find_dependency_cycle(const std::vector<RequestSpec>& requests) {
  const size_t n = requests.size();
  Graph g(n);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t p : requests[i].after) boost::add_edge(i, static_cast<Vertex>(p), g);
  }
  std::vector<Vertex> tree_parent(n);
  std::optional<std::pair<Vertex, Vertex>> back;
  CycleVisitor visitor;
  visitor.tree_parent = &tree_parent;
  visitor.back = &back;
  boost::depth_first_search(g, boost::visitor(visitor));  // non-recursive: long chains are fine
  if (!back) return {};

  // The back edge u -> v closes the tree path v -> ... -> u.
  const auto [u, v] = *back;
  std::vector<int32_t> cycle;
  for (Vertex x = u; x != v; x = tree_parent[x]) cycle.push_back(static_cast<int32_t>(x));
  cycle.push_back(static_cast<int32_t>(v));
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  return cycle;
}

std::string describe_cycle(const std::vector<RequestSpec>& requests,
                           const std::vector<int32_t>& cycle) {
  assert(!cycle.empty());
  std::string out;
  for (int32_t i : cycle) out += requests[static_cast<size_t>(i)].id + " -> ";
  return out + requests[static_cast<size_t>(cycle.front())].id;
}

}  // namespace servesim
