// The overload test of a run (MetricsAccumulator's overloaded and backlog_growth metrics).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace servesim {

// The overload test: is the deployment falling behind its arrivals? The number of requests
// outstanding (due to be sent and not yet finished) is followed over the span of due times, cut
// into four quarters. In each of the last three (the first holds the warm-up, while the system
// fills to its working level) the outstanding count is fitted by least squares against time; the
// fit's rise across the quarter is the backlog's growth there. The run is overloaded when in some
// quarter the backlog grows by at least 10 % of the requests that arrived in it, and by at least 8
// requests: completions fell at least 10 % behind arrivals for a quarter of the run; and when the
// queue (requests due and not yet scheduled) grows by as much in that quarter. A stable system's
// backlog keeps its level (a growth near 0, either sign); an overloaded one's grows by (arrival
// rate - service rate) x the quarter's length, and once its batches are full, in its queue.
// Arrival bursts that a deployment cannot absorb (a trace's busy hour) count: its latencies are
// set by that growing queue. The queue's part keeps a short run of long responses, whose
// outstanding count still climbs toward its level after the first quarter (requests that stay for
// minutes while nothing waits), from reading as overloaded. Runs with fewer than 80 requests, or
// whose requests all arrive at one instant, are not judged.
inline constexpr double kOverloadGrowthShare = 0.10;
inline constexpr double kOverloadMinGrowth = 8;
inline constexpr int64_t kOverloadMinRequests = 80;

// A request's times in seconds: when it was due to be sent, first scheduled and finished
// (infinity when it never was).
struct Sojourn {
  double due = 0, finished = 0, scheduled = 0;
  bool operator==(const Sojourn&) const = default;
  // By due time, then finish time, then scheduling.
  bool operator<(const Sojourn& o) const {
    return due != o.due ? due < o.due : finished != o.finished ? finished < o.finished : scheduled < o.scheduled;
  }
};

struct BacklogTrend {
  bool known = false;     // enough requests over a span of time to judge
  double growth = 0;      // requests: the largest quarter's fitted rise (of quarters 2-4)
  double queue_growth = 0;  // requests: the queue's fitted rise in that quarter
  double arrivals = 0;    // requests that arrived in that quarter
  int quarter = 0;        // 2, 3 or 4
  double share() const { return arrivals > 0 ? growth / arrivals : 0; }
  bool overloaded = false;
};

// The order backlog_trend's sums take the requests in, so that its result does not depend on the
// order requests settled in: Sojourn's (no NaN).
bool interval_before(const Sojourn& a, const Sojourn& b);
// Sorts them in that order, in place.
void sort_intervals(std::vector<Sojourn>& intervals);

// The trend of outstanding and queued requests, as described above.
BacklogTrend backlog_trend(std::span<const Sojourn> intervals);

}  // namespace servesim
