// The time series of `sim report --html`, from the timeline table (a row per replica and bucket of
// log_resolution seconds that had iterations; see analysis/storage/database.h).
//
// Lines: one per replica for a single run of up to kMaxReplicaLines replicas; otherwise one per run,
// summed over its replicas (a sum of 64 replicas' lines reads better than 64 lines). A long run is
// reduced to at most kMaxSeriesPoints bins per line (reduce_buckets): the line is each bin's mean,
// and a band its min and max when a chart has at most two lines (more bands hide each other).
#include <algorithm>
#include <functional>

#include "analysis/reports/html_report_data.h"
#include "analysis/reports/html_report_sections.h"

namespace servesim::html {
namespace {

constexpr int32_t kMaxReplicaLines = 8;
constexpr size_t kMaxBandLines = 2;

// The timeline's columns summed over the line's replicas, per bucket.
struct Row {
  int64_t bucket;
  double seqs, waiting, prefill, decode, kv_mean, preemptions, emitted;
};

struct Line {
  std::string label;
  int color;
  std::vector<Row> rows;
  int64_t first = 0, last = -1;  // the run's bucket range
  double width = 1;              // seconds (steps) per bucket
  double kv_total = 0;           // blocks, summed over the line's replicas; 0: unlimited
};

Status read_rows(Database& db, int64_t run, int32_t replica, Line& line) {
  // replica < 0: every replica.
  Query q(db,
          "SELECT bucket, sum(seqs_max), sum(waiting_max), sum(prefill_tokens), sum(decode_tokens), "
          "sum(kv_blocks_mean), sum(preemptions), sum(emitted) FROM timeline "
          "WHERE run_id = ?1 AND (?2 < 0 OR replica = ?2) GROUP BY bucket ORDER BY bucket");
  if (!q.ok()) return q.error();
  q.bind(1, run).bind(2, static_cast<int64_t>(replica));
  while (q.step()) {
    line.rows.push_back(
        {q.integer(0), q.real(1), q.real(2), q.real(3), q.real(4), q.real(5), q.real(6), q.real(7)});
  }
  Query total(db,
              "SELECT sum(t) FROM (SELECT max(kv_blocks_total) AS t FROM timeline "
              "WHERE run_id = ?1 AND (?2 < 0 OR replica = ?2) GROUP BY replica)");
  if (!total.ok()) return total.error();
  if (total.bind(1, run).bind(2, static_cast<int64_t>(replica)).step() && !total.null(0))
    line.kv_total = total.real(0);
  return Ok{};
}

// The run's bucket range and width (a row's start over its bucket index; 1 s without one).
Status read_range(Database& db, int64_t run, Line& line) {
  Query q(db, "SELECT max(start / bucket) FROM timeline WHERE run_id = ?1 AND bucket > 0");
  Query all(db, "SELECT min(bucket), max(bucket) FROM timeline WHERE run_id = ?1");
  if (!q.ok()) return q.error();
  if (!all.ok()) return all.error();
  if (all.bind(1, run).step() && !all.null(0)) {
    line.first = all.integer(0);
    line.last = all.integer(1);
  }
  if (q.bind(1, run).step() && !q.null(0) && q.real(0) > 0) line.width = q.real(0);
  return Ok{};
}

// A chart of some of the timeline's quantities: each quantity (value of a row per second or as is)
// becomes a series per line, drawn solid or dashed.
struct Quantity {
  std::string name;  // "running", for the legend when a chart has two
  std::string draw;  // line | dash
  std::function<double(const Row&, double width)> value;
};

Card series_card(const std::string& title, const std::string& y_title, const std::vector<Line>& lines,
                 const std::vector<Quantity>& quantities, const std::string& time_unit,
                 const std::string& what) {
  Card card{.title = title};
  card.chart = make_chart("line", "time (" + time_unit + ")", y_title);
  const bool bands = lines.size() * quantities.size() <= kMaxBandLines;
  int64_t per_bin = 1;
  for (const Line& line : lines) {
    for (const Quantity& q : quantities) {
      std::vector<BucketValue> values;
      values.reserve(line.rows.size());
      for (const Row& r : line.rows) values.push_back({r.bucket, q.value(r, line.width)});
      const ReducedSeries reduced =
          reduce_buckets(values, line.first, line.last, line.width, kMaxSeriesPoints);
      per_bin = std::max(per_bin, reduced.buckets_per_bin);
      const std::string label = quantities.size() > 1 ? line.label + ", " + q.name : line.label;
      nlohmann::json s = make_series(label, line.color, q.draw);
      std::vector<Point> points;
      for (size_t i = 0; i < reduced.x.size(); ++i) points.push_back({reduced.x[i], reduced.mean[i]});
      add_points(s, points);
      if (bands && reduced.reduced) {
        for (size_t i = 0; i < reduced.x.size(); ++i) {
          s["lo"].push_back(round_sig(reduced.lo[i]));
          s["hi"].push_back(round_sig(reduced.hi[i]));
        }
      }
      card.chart["series"].push_back(std::move(s));
    }
  }
  card.caption = what + (per_bin > 1 ? " Each point is the mean of " + std::to_string(per_bin) +
                                           " time buckets" + (bands ? ", the band their min and max." : ".")
                                     : "");
  return card;
}

// The runs' lines (a line per replica when `per_replica`, else per run); what runs logged no
// timeline, in `missing`.
Status read_lines(Database& db, const std::vector<ReportRun>& runs, bool per_replica, std::vector<Line>& lines,
                  std::string& missing) {
  const bool table = has_table(db, "timeline");
  for (size_t i = 0; i < runs.size(); ++i) {
    const ReportRun& run = runs[i];
    if (!table || count_rows(db, "timeline", run.id) == 0) {
      missing += (missing.empty() ? "" : "; ") + run.label() +
                 " logged no timeline rows (--log summary, or a database from before the timeline "
                 "table): rerun with --log requests (the default) or --log iterations";
      continue;
    }
    Line base{.label = run.label(), .color = static_cast<int>(i), .rows = {}};
    if (Status s = read_range(db, run.id, base); !s.ok()) return s.error();
    for (int32_t r = 0; r < (per_replica ? run.replicas : 1); ++r) {
      Line line = base;
      if (per_replica) {
        line.label = "replica " + std::to_string(r);
        line.color = r;
      } else if (run.replicas > 1) {
        line.label += ", sum of " + std::to_string(run.replicas) + " replicas";
      }
      if (Status s = read_rows(db, run.id, per_replica ? r : -1, line); !s.ok()) return s.error();
      lines.push_back(std::move(line));
    }
  }
  return Ok{};
}

// The captions' first words: what a line is, and the time buckets' width.
std::string lines_caption(const std::vector<ReportRun>& runs, const std::vector<Line>& lines, bool per_replica) {
  const std::string t = runs[0].time_unit();
  const std::string scope = per_replica ? "One line per replica."
                            : runs.size() == 1
                                ? "One line: the sum over the run's " + std::to_string(runs[0].replicas) +
                                      " replicas (more than " + std::to_string(kMaxReplicaLines) +
                                      " lines would hide each other)."
                                : "One line per run, summed over its replicas.";
  // One width for every line, or each run's where they differ (by default a run's width follows
  // its workload's span: auto_timeline_resolution).
  std::string bucket = " Time buckets of " + format_number(lines[0].width) + " " + t + ".";
  if (std::any_of(lines.begin(), lines.end(), [&](const Line& l) { return l.width != lines[0].width; })) {
    bucket = " Time buckets of";
    for (size_t i = 0; i < lines.size(); ++i) {
      bucket += std::string(i ? ";" : "") + " " + format_number(lines[i].width) + " " + t + " for " + lines[i].label;
    }
    bucket += ".";
  }
  return scope + bucket;
}

// A quantity per second (step) of its bucket, or as it is.
std::function<double(const Row&, double)> rate_of(double Row::*field) {
  return [field](const Row& r, double w) { return r.*field / w; };
}

std::function<double(const Row&, double)> level_of(double Row::*field) {
  return [field](const Row& r, double) { return r.*field; };
}

// The KV cache's blocks in use, and (dashed) those the replicas have.
Card kv_card(const std::vector<Line>& lines, const std::string& t, const std::string& caption) {
  Card kv = series_card("KV cache blocks used", "blocks", lines, {{"used", "line", level_of(&Row::kv_mean)}}, t,
                        caption +
                            " Blocks in use, time-weighted mean over each bucket's iterations; dashed: the "
                            "blocks the replica has.");
  for (const Line& line : lines) {
    if (line.kv_total <= 0) continue;
    nlohmann::json s = make_series(line.label + ", total", line.color, "dash");
    const double x0 = static_cast<double>(line.first) * line.width,
                 x1 = static_cast<double>(line.last + 1) * line.width;
    add_points(s, std::vector<Point>{{x0, line.kv_total}, {x1, line.kv_total}});
    kv.chart["series"].push_back(std::move(s));
  }
  return kv;
}

// The cards of lines that have a course over time.
std::vector<Card> series_cards(const std::vector<ReportRun>& runs, const std::vector<Line>& lines, bool per_replica) {
  const std::string t = runs[0].time_unit();
  const std::string per = runs[0].unit() ? "step" : "s";
  const std::string caption = lines_caption(runs, lines, per_replica);
  std::vector<Card> cards;
  cards.push_back(
      series_card("Running and waiting requests", "requests", lines,
                  {{"running", "line", level_of(&Row::seqs)}, {"waiting", "dash", level_of(&Row::waiting)}}, t,
                  caption +
                      " Running (solid): the most sequences in one iteration's batch; waiting (dashed): the "
                      "longest queue."));
  cards.push_back(series_card(
      "Prefill and decode tokens", "tokens/" + per, lines,
      {{"prefill", "line", rate_of(&Row::prefill)}, {"decode", "dash", rate_of(&Row::decode)}}, t,
      caption + " Prefill tokens (solid) and decode tokens (dashed) computed per " + per + "."));
  cards.push_back(kv_card(lines, t, caption));
  const bool preempted = std::any_of(lines.begin(), lines.end(), [](const Line& l) {
    return std::any_of(l.rows.begin(), l.rows.end(), [](const Row& r) { return r.preemptions > 0; });
  });
  if (preempted) {
    cards.push_back(series_card(
        "Preemptions", "preemptions/" + per, lines, {{"preemptions", "line", rate_of(&Row::preemptions)}}, t,
        caption + " Requests preempted (their KV blocks freed, to be recomputed) per " + per + "."));
  } else {
    cards.push_back(Card{.title = "Preemptions", .note = "No request was preempted."});
  }
  cards.push_back(series_card("Output throughput", "tokens/" + per, lines,
                              {{"output", "line", rate_of(&Row::emitted)}}, t,
                              caption + " Output tokens emitted per " + per + "."));
  return cards;
}

}  // namespace

Result<Section> timeline_section(Database& db, const std::vector<ReportRun>& runs) {
  Section section{.title = "Over time"};
  std::vector<Line> lines;
  std::string missing;
  const bool per_replica = runs.size() == 1 && runs[0].replicas <= kMaxReplicaLines;
  if (Status s = read_lines(db, runs, per_replica, lines, missing); !s.ok()) return s.error();
  if (lines.empty()) {
    section.cards.push_back(Card{.title = "Time series", .note = missing + "."});
    return section;
  }
  // A run shorter than two buckets has no course over time to show.
  if (std::all_of(lines.begin(), lines.end(), [](const Line& l) { return l.last - l.first < 1; })) {
    section.cards.push_back(
        Card{.title = "Time series",
             .note = "The run" + std::string(runs.size() > 1 ? "s" : "") +
                     " lasted less than two timeline buckets of " + format_number(lines[0].width) + " " +
                     runs[0].time_unit() +
                     ": set a finer resolution (for example --set log_resolution=0.01) for time series."});
    return section;
  }
  section.cards = series_cards(runs, lines, per_replica);
  if (!missing.empty()) {
    for (Card& c : section.cards) c.caption += " Not shown: " + missing + ".";
  }
  return section;
}

}  // namespace servesim::html
