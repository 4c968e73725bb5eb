// Service-level objectives of a search, and whether a run meets them. A search (runner/search.h)
// asks it of each probe as it runs; reports (the sweep table, the HTML page) ask it of stored
// probes, from the search's stored definition and each run's metrics.
//
// A run passes when it is done, it is not overloaded (analysis/metrics/metrics.h), it rejected no request
// (unless a `rejected` SLO allows a share), and every SLO holds: a latency statistic at most its
// bound (p99_ttft <= 2 s), slo_attainment at least its bound (with --goodput), the share of
// requests rejected at most its bound.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "analysis/metrics/metrics.h"
#include "sim/result.h"

namespace servesim {

struct Slo {
  std::string key;     // as given: "p99_ttft"
  std::string metric;  // metrics name: "ttft_p99"
  double bound = 0;    // seconds for latencies; a fraction for slo_attainment and rejected
  bool at_least = false;  // slo_attainment: the metric must be >= bound
  std::string unit = "s";  // how the bound was given, for messages: "s" or "ms" (latencies), "" (fractions)
  std::string given;       // the value as given: "2s", "150ms", "0.01"

  bool latency() const { return metric != "slo_attainment" && metric != "rejected"; }
  // The bound in the unit it was given: "2 s", "150 ms", "0.99".
  std::string bound_text() const;
};

// Parses "p99_ttft=2s", "p90_tpot=100ms", "slo_attainment=0.99" (or 99%), "rejected=0.01". Keys:
// {mean,p50,p90,p99}_{ttft,tpot,itl,e2el,queue}, slo_attainment, rejected. A latency needs its
// unit (s or ms). Errors name the token and list the keys.
Result<Slo> parse_slo(const std::string& token);

// The SLOs of a stored search definition's [slo] table: each value as given ("2s"), or, as
// searches stored them before the units were kept, a number (seconds for latencies; shown in ms
// below a second). Errors name the key ("slo.p99_ttfx").
Result<std::vector<Slo>> slos_from_table(const toml::table& slo);

// Whether a run that misses would miss at any rate and on any number of replicas: it failed (its
// configuration cannot run), or it rejected requests the SLOs do not allow (a prompt longer than
// the model's context, or larger than a replica's KV cache or token budget, is rejected whatever
// the load). A search stops probing such a configuration.
bool misses_at_any_load(std::span<const Slo> slos, const std::string& status, std::span<const Metric> metrics);

// The share of requests rejected: rejected / (rejected + completed); 0 when there were none.
double rejected_share(std::span<const Metric> metrics);

// The SLO keys, for messages: "mean_ttft, ..., slo_attainment, rejected".
std::string known_slo_keys();

// Why a run with this status, error and metrics misses the SLOs ("" when it passes), each bound
// in the unit it was given: "p99_ttft 2345 ms > 2000 ms", "overloaded", "rejected 45 % of requests
// (450 of 1000: 450 longer than the model's context)".
std::string slo_miss(std::span<const Slo> slos, const std::string& status, const std::string& error,
                     std::span<const Metric> metrics);

}  // namespace servesim
