// Simulated time. An integer count of nanoseconds, so that ordering is exact and runs are
// reproducible bit for bit. Time is always passed in; nothing in sim/ or policies/ reads a clock.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace servesim {

using Time = int64_t;  // nanoseconds since the start of the workload
// A 128-bit integer, for exact sums and products of times (blocks x ns, fixed-point prices).
__extension__ typedef __int128 Wide;

inline constexpr Time kNsPerSecond = 1'000'000'000;
inline constexpr Time kNever = std::numeric_limits<Time>::max();

// The simulation horizon: 10^9 seconds (about 31.7 years), the latest an event may happen. Every
// input time is at most this, every sum of times is checked against it (add_time), and a run that
// would go past it fails with a message, so that no time overflows and no time is negative.
inline constexpr Time kTimeHorizon = 1'000'000'000 * kNsPerSecond;
inline constexpr double kTimeHorizonSeconds = 1e9;

inline double to_seconds(Time t) { return static_cast<double>(t) / 1e9; }

// s seconds in ns, rounded half away from zero (as std::llround, without its call: the leaps price
// millions of iterations). REQUIRES: s is finite and |s| < about 292 years.
inline Time from_seconds(double s) {
  const double ns = s * 1e9;
  const auto whole = static_cast<Time>(ns);             // truncated
  const double frac = ns - static_cast<double>(whole);  // exact
  return whole + (frac >= 0.5 ? 1 : frac <= -0.5 ? -1 : 0);
}

// s seconds as a Time, or kNever when s is not a finite number in [0, kTimeHorizonSeconds].
inline Time seconds_to_time(double s) {
  if (!(s >= 0 && s <= kTimeHorizonSeconds)) return kNever;  // NaN fails both
  return from_seconds(s);
}

// a + b, or kNever when the sum passes kTimeHorizon (or either is negative or kNever).
inline Time add_time(Time a, Time b) {
  if (a < 0 || b < 0 || a > kTimeHorizon || b > kTimeHorizon - a) return kNever;
  return a + b;
}

}  // namespace servesim
