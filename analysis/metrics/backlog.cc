#include "analysis/metrics/backlog.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "analysis/metrics/radix_sort.h"

namespace servesim {

bool interval_before(const Sojourn& a, const Sojourn& b) {
  const uint64_t ka = double_order_key(a.due), kb = double_order_key(b.due);
  return ka != kb ? ka < kb : a.finished != b.finished ? a.finished < b.finished : a.scheduled < b.scheduled;
}

void sort_intervals(std::vector<Sojourn>& intervals) {
  // By due time in linear passes, then the few that share one by finish time.
  std::vector<Sojourn> scratch;
  radix_sort(intervals.data(), intervals.size(), scratch,
             [](const Sojourn& i) { return double_order_key(i.due); });
  for (auto tie = intervals.begin(); tie != intervals.end();) {
    const auto end = std::find_if(tie + 1, intervals.end(), [&](const auto& i) { return i.due != tie->due; });
    if (end - tie > 1) std::sort(tie, end, interval_before);
    tie = end;
  }
}

BacklogTrend backlog_trend(std::span<const Sojourn> intervals) {
  BacklogTrend t;
  if (static_cast<int64_t>(intervals.size()) < kOverloadMinRequests) return t;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const Sojourn& r : intervals) {
    first = std::min(first, r.due);
    last = std::max(last, r.due);
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
    double moment = 0, queue_moment = 0, arrivals = 0;
    // The integral of (t - c) over [a, b] within the quarter.
    const auto part = [&](double from, double to) {
      const double a = std::max(from, lo), b = std::min(to, hi);
      return b > a ? ((b - c) * (b - c) - (a - c) * (a - c)) / 2 : 0.0;
    };
    for (const Sojourn& r : intervals) {
      if (r.due > lo && r.due <= hi) arrivals += 1;
      moment += part(r.due, r.finished);
      queue_moment += part(r.due, r.scheduled);
    }
    const double growth = moment / (len * len * len / 12) * len;
    const double queue_growth = queue_moment / (len * len * len / 12) * len;
    const auto grows = [&](double g) { return g >= kOverloadGrowthShare * arrivals && g >= kOverloadMinGrowth; };
    const bool over = grows(growth) && grows(queue_growth);
    // Report the overloaded quarter with the largest share, else the largest growth.
    const bool take = over ? (!t.overloaded || growth / arrivals > t.share()) : (!t.overloaded && growth > t.growth);
    if (take) {
      t.growth = growth;
      t.queue_growth = queue_growth;
      t.arrivals = arrivals;
      t.quarter = q;
    }
    t.overloaded = t.overloaded || over;
  }
  return t;
}

}  // namespace servesim
