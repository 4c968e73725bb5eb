// Request priorities for priority scheduling (vLLM's `priority`: lower is served first), drawn for
// generated and replayed workloads from a [generate.priority] or [replay.priority] table:
//
//   values   the priorities to draw from: a non-empty array of integers (required)
//   weights  their relative frequencies: as many numbers >= 0 as values, not all 0 (default: equal)
//
// Every request draws its own, in workload order, from its own Rng stream, so that adding the table
// leaves every arrival, length and prefix as it was. Explicit [[request]] entries, csv traces (a
// `priority` column) and JSONL traces (a "priority" key) give priorities directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sim/request.h"
#include "sim/result.h"
#include "workloads/rng.h"

namespace servesim {

// The Rng stream of priority draws (Rng::stream).
inline constexpr uint64_t kPriorityStream = 0x7072696f72697479;  // "priority"

struct PriorityOptions {
  std::vector<int32_t> values;
  std::vector<double> weights;  // same length as values
};

// Reads a priority table; `path` and `name` ("generate.priority") are for messages, which name the
// file, line and key.
Result<PriorityOptions> read_priority_options(const toml::table& table, const std::string& path,
                                              const std::string& name);

// Sets the priority of every request, in order, by draws from stream kPriorityStream of `seed`.
void assign_priorities(const PriorityOptions& options, uint64_t seed,
                       std::vector<RequestSpec>& requests);

// The same draws one request at a time: the k-th draw() is the k-th request's priority.
class PriorityPicker {
 public:
  PriorityPicker(const PriorityOptions& options, uint64_t seed);
  int32_t draw();

 private:
  std::vector<int32_t> values_;
  std::vector<double> cdf_;
  Rng rng_;
};

}  // namespace servesim
