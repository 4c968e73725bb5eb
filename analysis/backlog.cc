#include "analysis/backlog.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "analysis/radix_sort.h"

namespace servesim {

bool interval_before(const std::pair<double, double>& a, const std::pair<double, double>& b) {
  const uint64_t ka = double_order_key(a.first), kb = double_order_key(b.first);
  return ka != kb ? ka < kb : a.second < b.second;
}

void sort_intervals(std::vector<std::pair<double, double>>& intervals) {
  // By due time in linear passes, then the few that share one by finish time.
  std::vector<std::pair<double, double>> scratch;
  radix_sort(intervals.data(), intervals.size(), scratch,
             [](const std::pair<double, double>& i) { return double_order_key(i.first); });
  for (auto tie = intervals.begin(); tie != intervals.end();) {
    const auto end = std::find_if(tie + 1, intervals.end(), [&](const auto& i) { return i.first != tie->first; });
    if (end - tie > 1) std::sort(tie, end, interval_before);
    tie = end;
  }
}

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
