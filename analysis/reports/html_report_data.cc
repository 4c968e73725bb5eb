#include "analysis/reports/html_report_data.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "analysis/metrics/metrics.h"

namespace servesim::html {

double round_sig(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  const double rounded = std::round(v * scale) / scale;
  return std::isfinite(rounded) ? rounded : v;
}

std::vector<Point> cdf_points(std::span<const double> sorted, size_t max_points) {
  assert(max_points >= 2);
  std::vector<Point> out;
  const size_t n = sorted.size();
  if (n == 0) return out;
  if (n + 1 <= max_points) {
    // The steps of the empirical CDF: from 0 at the least value, up 1/n at each value.
    out.reserve(n + 1);
    out.push_back({sorted[0], 0.0});
    for (size_t i = 0; i < n; ++i)
      out.push_back({sorted[i], static_cast<double>(i + 1) / static_cast<double>(n)});
    return out;
  }
  out.reserve(max_points);
  for (size_t j = 0; j < max_points; ++j) {
    const double q = static_cast<double>(j) / static_cast<double>(max_points - 1);
    out.push_back({percentile(sorted, 100 * q), q});
  }
  return out;
}

std::vector<Point> quantile_points(std::span<const Point> quantile_value, size_t max_points) {
  std::vector<Point> out;
  const size_t n = quantile_value.size();
  const size_t keep = std::min(n, max_points);
  out.reserve(keep);
  for (size_t j = 0; j < keep; ++j) {
    // Evenly spaced indices from the first to the last.
    const size_t i = keep == 1 ? 0 : (j * (n - 1) + (keep - 1) / 2) / (keep - 1);
    out.push_back({quantile_value[i].y, quantile_value[i].x});
  }
  return out;
}

ReducedSeries reduce_buckets(std::span<const BucketValue> rows, int64_t first, int64_t last, double width,
                             size_t max_points) {
  assert(max_points >= 1);
  ReducedSeries out;
  if (last < first) return out;
  const int64_t buckets = last - first + 1;
  const auto cap = static_cast<int64_t>(max_points);
  const int64_t k = (buckets + cap - 1) / cap;
  const auto bins = static_cast<size_t>((buckets + k - 1) / k);
  out.reduced = k > 1;
  out.buckets_per_bin = k;
  std::vector<double> sum(bins, 0.0);
  std::vector<double> lo(bins, std::numeric_limits<double>::infinity());
  std::vector<double> hi(bins, -std::numeric_limits<double>::infinity());
  std::vector<int64_t> present(bins, 0);
  for (const BucketValue& r : rows) {
    assert(r.bucket >= first && r.bucket <= last);
    const auto b = static_cast<size_t>((r.bucket - first) / k);
    sum[b] += r.value;
    lo[b] = std::min(lo[b], r.value);
    hi[b] = std::max(hi[b], r.value);
    ++present[b];
  }
  for (size_t b = 0; b < bins; ++b) {
    const int64_t start = first + static_cast<int64_t>(b) * k;
    const int64_t count = std::min(k, last + 1 - start);
    if (present[b] < count) {  // idle buckets are zeros
      lo[b] = std::min(lo[b], 0.0);
      hi[b] = std::max(hi[b], 0.0);
    }
    out.x.push_back((static_cast<double>(start) + static_cast<double>(count) / 2) * width);
    out.mean.push_back(sum[b] / static_cast<double>(count));
    out.lo.push_back(lo[b]);
    out.hi.push_back(hi[b]);
  }
  return out;
}

int64_t sample_stride(int64_t n, int64_t max_items) {
  if (max_items <= 0) return std::max<int64_t>(n, 1);
  return std::max<int64_t>(1, (n + max_items - 1) / max_items);
}

nlohmann::json make_chart(const std::string& type, const std::string& x_title, const std::string& y_title) {
  return {{"type", type},
          {"x", {{"title", x_title}}},
          {"y", {{"title", y_title}}},
          {"series", nlohmann::json::array()}};
}

nlohmann::json make_series(const std::string& label, int color, const std::string& draw) {
  return {{"label", label},
          {"color", color},
          {"draw", draw},
          {"x", nlohmann::json::array()},
          {"y", nlohmann::json::array()}};
}

void add_points(nlohmann::json& series, std::span<const Point> points) {
  nlohmann::json& xs = series["x"];
  nlohmann::json& ys = series["y"];
  for (const Point& p : points) {
    xs.push_back(round_sig(p.x, 6));
    ys.push_back(round_sig(p.y, 4));
  }
}

}  // namespace servesim::html
