#include "workloads/load_controls.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "sim/config/toml_fields.h"
#include "workloads/arrival.h"
#include "workloads/workload.h"

namespace servesim {
namespace {

// Positions of the independent requests (Workload order puts them first).
size_t independent_count(const Workload& w) {
  size_t n = 0;
  while (n < w.requests.size() && w.requests[n].after.empty()) ++n;
  return n;
}

Status check_span(const Workload& w, size_t n, double factor, const char* key) {
  if (n == 0) return Ok{};
  const double first = static_cast<double>(w.requests.front().arrival);
  const double span = static_cast<double>(w.requests[n - 1].arrival) - first;
  if (!(first + span * factor <= kMaxArrivalSeconds * 1e9)) {
    return Error{w.path + ": " + key + ": the workload would span more than 1e9 s (" +
                 format_number(span / 1e9) + " s, times " + format_number(factor) + ")"};
  }
  return Ok{};
}

void apply_factor(Workload& w, size_t n, double factor) {
  if (n == 0 || factor == 1.0) return;
  const Time first = w.requests.front().arrival;
  for (size_t i = 0; i < n; ++i) {
    RequestSpec& r = w.requests[i];
    r.arrival = first + static_cast<Time>(std::llround(static_cast<double>(r.arrival - first) * factor));
  }
}

}  // namespace

Status check_load_controls(const LoadControls& l) {
  if (l.request_rate != 0 && !(l.request_rate > 0 && (l.request_rate <= kMaxRequestRate ||
                                                      std::isinf(l.request_rate)))) {
    return Error{"request_rate = " + format_number(l.request_rate) +
                 ": expected a rate in requests per second > 0 (at most 1e9, or inf)"};
  }
  if (l.burstiness != 0 && !(l.burstiness >= kMinBurstiness &&
                             (l.burstiness <= kMaxBurstiness || std::isinf(l.burstiness)))) {
    return Error{"burstiness = " + format_number(l.burstiness) +
                 ": expected a gamma shape in [1e-4, 1e6] or inf (1 = Poisson; < 1 burstier; inf: "
                 "evenly spaced)"};
  }
  if (l.time_scale != 0 && !(l.time_scale > 0 && l.time_scale <= kMaxTimeScale)) {
    return Error{"time_scale = " + format_number(l.time_scale) + ": expected a factor > 0 (at most 1e9)"};
  }
  if (l.num_prompts < 0) {
    return Error{"num_prompts = " + std::to_string(l.num_prompts) + ": expected at least 1"};
  }
  if (l.request_rate > 0 && l.time_scale > 0) {
    return Error{"time_scale: cannot be combined with request_rate (request_rate re-times arrivals "
                 "to a mean rate; time_scale multiplies them); give one of the two"};
  }
  if (std::isinf(l.request_rate) && l.burstiness > 0) {
    return Error{"burstiness: has no meaning with request_rate = inf (every request is sent at once)"};
  }
  return Ok{};
}

Status keep_first_prompts(Workload& w, int64_t n) {
  const size_t total = w.requests.size();
  if (n <= 0) return Ok{};
  if (static_cast<size_t>(n) > total) {
    return Error{"num_prompts = " + std::to_string(n) + ": " + w.path + " has only " +
                 std::to_string(total) + " requests"};
  }
  if (static_cast<size_t>(n) == total) return Ok{};
  // Send order: by the conversation's start (the position of the independent request it descends
  // from, the latest one when several), then by depth. Parents have smaller indices than children,
  // so one pass computes both, and a parent always sorts before its children.
  std::vector<int64_t> root(total), depth(total, 0);
  for (size_t i = 0; i < total; ++i) {
    const RequestSpec& r = w.requests[i];
    if (r.after.empty()) {
      root[i] = static_cast<int64_t>(i);
      continue;
    }
    root[i] = -1;
    for (int32_t p : r.after) {
      root[i] = std::max(root[i], root[static_cast<size_t>(p)]);
      depth[i] = std::max(depth[i], depth[static_cast<size_t>(p)] + 1);
    }
  }
  std::vector<int32_t> order(total);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const auto x = static_cast<size_t>(a), y = static_cast<size_t>(b);
    return root[x] != root[y] ? root[x] < root[y] : depth[x] < depth[y];
  });
  std::vector<char> keep(total, 0);
  for (int64_t k = 0; k < n; ++k) keep[static_cast<size_t>(order[static_cast<size_t>(k)])] = 1;
  // Kept requests stay in workload order (so the order rule of workload.h still holds).
  std::vector<int32_t> new_index(total, -1);
  std::vector<RequestSpec> kept;
  kept.reserve(static_cast<size_t>(n));
  for (size_t i = 0; i < total; ++i) {
    if (!keep[i]) continue;
    new_index[i] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(w.requests[i]));
    for (int32_t& p : kept.back().after) p = new_index[static_cast<size_t>(p)];
  }
  w.requests = std::move(kept);
  return Ok{};
}

Status retime_to_rate(Workload& w, double rate) {
  const size_t n = independent_count(w);
  if (n < 2) return Ok{};  // one request has no rate to change
  const Time first = w.requests.front().arrival;
  if (std::isinf(rate)) {
    for (size_t i = 0; i < n; ++i) w.requests[i].arrival = first;
    return Ok{};
  }
  const Time span = w.requests[n - 1].arrival - first;
  if (span == 0) {
    return Error{w.path + ": request_rate: cannot re-time to a mean rate: all " + std::to_string(n) +
                 " requests arrive at the same instant"};
  }
  const double observed = static_cast<double>(n - 1) / to_seconds(span);
  const double factor = observed / rate;
  if (Status s = check_span(w, n, factor, "request_rate"); !s.ok()) return s;
  apply_factor(w, n, factor);
  return Ok{};
}

Status scale_arrivals(Workload& w, double factor) {
  const size_t n = independent_count(w);
  if (Status s = check_span(w, n, factor, "time_scale"); !s.ok()) return s;
  apply_factor(w, n, factor);
  return Ok{};
}

}  // namespace servesim
