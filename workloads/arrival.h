// Arrival processes: when the requests of a generated workload arrive.
//
// An ArrivalProcess is built once from the [generate.arrival] table and describes the gaps between
// consecutive arrivals:
//
//   process = "poisson"      rate          exponential gaps with mean 1/rate (a Poisson process)
//   process = "gamma"        rate, cv      gamma gaps, shape 1/cv^2, mean 1/rate (cv > 1: burstier)
//   process = "constant"     rate          every gap exactly 1/rate
//   process = "all-at-once"                every request at time 0 (an offline batch)
//
// rate is in requests per second. An ArrivalClock turns a process into arrival times: the first request
// arrives at time 0 and each next one a gap later, as `vllm bench serve` sends its first request at
// once. The clock owns its own Rng (the workload's arrival stream), so arrivals never consume draws
// from the length distributions.
#pragma once

#include <cstdint>
#include <string>

#include <toml++/toml.h>

#include "sim/result.h"
#include "sim/time.h"
#include "workloads/rng.h"

namespace servesim {

// The latest arrival a generated workload may have: 10^9 s (about 31.7 years), well inside the
// range of Time (int64 ns).
inline constexpr double kMaxArrivalSeconds = 1e9;

class ArrivalProcess {
 public:
  enum class Kind { kPoisson, kGamma, kConstant, kAllAtOnce };

  Kind kind() const { return kind_; }
  // Mean arrival rate in requests per second; 0 for all-at-once.
  double rate() const { return rate_; }
  // Coefficient of variation of the gaps: 1 for poisson, cv for gamma, 0 for constant, all-at-once.
  double cv() const { return cv_; }

  // The gap in seconds before the next arrival, drawn from `rng` (constant and all-at-once draw
  // nothing). Always finite and >= 0.
  double gap(Rng& rng) const;

 private:
  friend Result<ArrivalProcess> make_arrival_process(const toml::table& table,
                                                     const std::string& path,
                                                     const std::string& name);
  ArrivalProcess() = default;

  Kind kind_ = Kind::kAllAtOnce;
  double rate_ = 0.0;
  double cv_ = 0.0;
  double gamma_shape_ = 1.0;  // gamma: 1/cv^2
  double gamma_scale_ = 1.0;  // gamma: cv^2/rate, so that shape * scale = 1/rate
};

// Builds the process that `table` describes. `path` and `name` ("generate.arrival") are used only in
// messages. Errors: a missing, unknown or mistyped key; rate not a number > 0; cv outside
// [1e-6, 100].
Result<ArrivalProcess> make_arrival_process(const toml::table& table, const std::string& path,
                                            const std::string& name);

// Successive arrival times of one process.
class ArrivalClock {
 public:
  ArrivalClock(const ArrivalProcess& process, Rng rng) : process_(process), rng_(rng) {}

  // The next arrival time: 0 on the first call, then non-decreasing. A constant process puts the i-th
  // arrival at exactly i/rate (no accumulated rounding); the others add gaps in double seconds.
  // Returns kNever once the arrival would be later than kMaxArrivalSeconds.
  Time next();

 private:
  const ArrivalProcess process_;  // a copy: a few doubles
  Rng rng_;
  int64_t count_ = 0;      // arrivals returned so far
  double seconds_ = 0.0;   // time of the last arrival returned
};

}  // namespace servesim
