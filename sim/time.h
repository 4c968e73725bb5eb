// Simulated time. An integer count of nanoseconds, so that ordering is exact and runs are
// reproducible bit for bit. Time is always passed in; nothing in sim/ or policies/ reads a clock.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace servesim {

using Time = int64_t;  // nanoseconds since the start of the workload

inline constexpr Time kNsPerSecond = 1'000'000'000;
inline constexpr Time kNever = std::numeric_limits<Time>::max();

inline double to_seconds(Time t) { return static_cast<double>(t) / 1e9; }

// REQUIRES: s is finite and |s| < about 292 years.
inline Time from_seconds(double s) { return static_cast<Time>(std::llround(s * 1e9)); }

}  // namespace servesim
