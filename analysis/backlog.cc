#include "analysis/backlog.h"

#include <algorithm>
#include <limits>

namespace servesim {

BacklogTrend backlog_trend(std::span<const std::pair<double, double>> intervals) {
  BacklogTrend t;
  if (static_cast<int64_t>(intervals.size()) < kOverloadMinRequests) return t;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto& [due, fin] : intervals) {
    first = std::min(first, due);
    last = std::max(last, due);
  }
  if (!(last > first)) return t;
  t.known = true;
  t.growth = -std::numeric_limits<double>::infinity();
  const double length = (last - first) / 4;
  for (int q = 2; q <= 4; ++q) {
    const double lo = first + length * (q - 1), hi = q == 4 ? last : first + length * q;
    // Least-squares slope of N(t) on [lo, hi]: the integral of (t - c) N(t) over the integral of
    // (t - c)^2, which is length^3 / 12; each request adds the integral over its own interval.
    const double c = (lo + hi) / 2, len = hi - lo;
    double moment = 0, arrivals = 0;
    for (const auto& [due, fin] : intervals) {
      if (due > lo && due <= hi) arrivals += 1;
      const double a = std::max(due, lo), b = std::min(fin, hi);
      if (b > a) moment += ((b - c) * (b - c) - (a - c) * (a - c)) / 2;
    }
    const double growth = moment / (len * len * len / 12) * len;
    const bool over = growth >= kOverloadGrowthShare * arrivals && growth >= kOverloadMinGrowth;
    // Report the overloaded quarter with the largest share, else the largest growth.
    const bool take = over ? (!t.overloaded || growth / arrivals > t.share()) : (!t.overloaded && growth > t.growth);
    if (take) {
      t.growth = growth;
      t.arrivals = arrivals;
      t.quarter = q;
    }
    t.overloaded = t.overloaded || over;
  }
  return t;
}

}  // namespace servesim
