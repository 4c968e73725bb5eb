// The reducers that keep a report's charts small however large the run (a million requests, days of
// simulated time), and the helpers that write a chart in the form html_report.js reads.
//
// Every chart is bounded: a CDF by its number of quantiles, a time series by its number of display
// bins, a scatter by a deterministic stride. The page's size thus depends on the number of charts,
// runs and replicas shown, not on the number of requests or iterations.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::html {

// Points per chart line, at most.
inline constexpr size_t kMaxCdfPoints = 500;
inline constexpr size_t kMaxSeriesPoints = 1000;
inline constexpr int64_t kMaxScatterPoints = 3000;

// v rounded to `digits` significant digits (0, inf and NaN unchanged): shorter JSON, same picture.
double round_sig(double v, int digits = 4);

struct Point {
  double x, y;
};

// The empirical CDF of `sorted` (ascending) in at most max_points points, x a value and y the
// fraction of values <= x. When the values fit (n + 1 <= max_points): its steps, (least value, 0)
// then each value with its rank / n, to be drawn as steps; else the quantiles at max_points evenly
// spaced probabilities from 0 to 1 (numpy's linear method), to be drawn as a line.
// REQUIRES: max_points >= 2.
std::vector<Point> cdf_points(std::span<const double> sorted, size_t max_points);

// A stored quantile function (quantile, value) pairs sorted by quantile, cut to at most max_points
// evenly spaced pairs (the first and last kept), as CDF points (x: value, y: quantile).
std::vector<Point> quantile_points(std::span<const Point> quantile_value, size_t max_points);

// One time bucket's value of a series (a timeline row).
struct BucketValue {
  int64_t bucket;
  double value;
};

// A series over time buckets, reduced for display: the buckets first..last are cut into at most
// max_points bins of k consecutive buckets each (k as small as allows that), and each bin gives the
// mean, min and max of its buckets' values, a bucket without a row counting as 0 (a replica with no
// iteration in a bucket was idle). x is each bin's middle, in seconds (width: seconds per bucket).
// `reduced` is false when k is 1: then lo and hi equal mean and need not be drawn.
struct ReducedSeries {
  std::vector<double> x, mean, lo, hi;
  bool reduced = false;
  int64_t buckets_per_bin = 1;
};
// REQUIRES: rows sorted by bucket, each bucket at most once and in [first, last]; max_points >= 1.
ReducedSeries reduce_buckets(std::span<const BucketValue> rows, int64_t first, int64_t last, double width,
                             size_t max_points);

// The stride that keeps at most max_items of n items by taking every stride-th (from the first).
int64_t sample_stride(int64_t n, int64_t max_items);

// Chart builders (see the top of html_report.js for the form).

// A chart with a numeric x axis ("line": lines, steps and point clouds) or categories ("bar").
nlohmann::json make_chart(const std::string& type, const std::string& x_title, const std::string& y_title);

// A series: label, palette colour, how it is drawn (line | dash | step | points | markers | bar).
nlohmann::json make_series(const std::string& label, int color, const std::string& draw);

// Appends the points to a series' x and y, rounded for display (x to 6 digits, as it may be a time
// in a long run; y to 4).
void add_points(nlohmann::json& series, std::span<const Point> points);

}  // namespace servesim::html
