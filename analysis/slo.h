// A search's service-level objectives (`sim search --slo p99_ttft=2s`) and the verdict on one probe:
// the pure rule, shared by whoever judges a run (the search as it runs, the HTML report from the
// stored runs), so that both say the same. It only reads a run's status and metrics.
//
// A probe passes when its run is done, it is not overloaded (metric `overloaded` > 0), it rejected
// no request (unless a `rejected` objective bounds the share it may reject), and every objective
// holds: a latency statistic at most its bound, slo_attainment at least its bound, the share of
// requests rejected at most its bound.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "analysis/metrics.h"
#include "sim/result.h"

namespace servesim::slo {

struct Objective {
  std::string key;        // as given: "p99_ttft"
  std::string metric;     // the metrics row's name: "ttft_p99"
  double bound = 0;       // seconds for latencies; a fraction for slo_attainment and rejected
  bool at_least = false;  // slo_attainment: the metric must be >= bound
  std::string unit{};     // a latency's unit as the user gave it ("s" or "ms"), for messages; "" else

  bool latency() const { return !unit.empty(); }
  // The bound as the user gave it: "2 s", "150 ms", "0.99".
  std::string bound_text() const;
};

// Every key an objective may have: "mean_ttft, ..., p99_queue, slo_attainment, rejected".
std::string known_keys();

// Parses "p99_ttft=2s", "p90_tpot=100ms", "slo_attainment=0.99", "rejected=1%". A latency needs its
// unit (s or ms). Errors name the token and say what was expected.
Result<Objective> parse(const std::string& token);

// The objectives of a stored search definition's [slo] table (sweeps.spec): each key's value is a
// number (seconds for a latency, a fraction else; the unit shown is ms below a second) or a string
// as --slo takes it ("2s", "150ms", "99%"). Errors name the key.
Result<std::vector<Objective>> from_table(const toml::table& slo);

// Why a probe misses, in words ("overloaded", "p99_ttft 3.2 s > 2 s", "rejected 12 of 400 requests
// (3 %)"); "" when it passes. `error` is the run's error, for a run that is not done.
std::string miss(std::span<const Objective> objectives, const std::string& status, const std::string& error,
                 std::span<const Metric> metrics);

// The share of requests rejected: rejected / (rejected + completed); 0 when there were none.
double rejected_share(std::span<const Metric> metrics);

}  // namespace servesim::slo
