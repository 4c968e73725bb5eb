#include "workloads/distribution.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>

#include "sim/request.h"
#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::string_view kKnownDists = "fixed, uniform, normal, lognormal, pareto, zipf";

// A required number > 0 (or >= 0): the value, or the error to return.
Result<double> required_number(const TableFields& f, std::string_view key, bool zero_ok) {
  if (Status s = f.require(key); !s) return s.error();
  auto v = f.number(key, 0.0, zero_ok, kInf);
  if (!v) return v.error();
  return v.value().value();
}

}  // namespace

int32_t LengthDistribution::sample(Rng& rng) const {
  double x = 0.0;
  switch (kind_) {
    case Kind::kFixed:
      return min_;  // make_distribution stores the value as min_ == max_
    case Kind::kUniform:
      return min_ + static_cast<int32_t>(rng.below(static_cast<uint64_t>(max_ - min_) + 1));
    case Kind::kNormal:
      x = sample_normal(rng, a_, b_);
      break;
    case Kind::kLognormal:
      x = sample_lognormal(rng, a_, b_);
      break;
    case Kind::kPareto:
      x = sample_pareto(rng, a_, b_);
      break;
    case Kind::kZipf: {
      const double u = rng.uniform() * zipf_cdf_.back();
      const auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
      const auto k = std::min<ptrdiff_t>(it - zipf_cdf_.begin(), std::ssize(zipf_cdf_) - 1);
      x = static_cast<double>(k + 1);
      break;
    }
  }
  // Clamp before rounding so that inf and nan cannot reach the integer conversion; the bounds are
  // integers, so this equals rounding first and clamping after.
  if (!(x >= min_)) return min_;
  if (x > max_) return max_;
  return static_cast<int32_t>(std::round(x));
}

Result<LengthDistribution> make_distribution(const toml::table& table, const std::string& path,
                                             const std::string& name) {
  using Kind = LengthDistribution::Kind;
  const TableFields f(table, path, name);
  if (!f.has("dist")) {
    return f.error("missing required key 'dist' (one of: " + std::string(kKnownDists) + ")");
  }
  auto dist = f.string("dist");
  if (!dist) return f.expected("dist", "a distribution name (" + std::string(kKnownDists) + ")");
  const std::string d = dist.value().value();

  LengthDistribution out;
  Status known = Ok{};
  const std::string context = "for dist = \"" + d + "\"";
  if (d == "fixed") {
    out.kind_ = Kind::kFixed;
    known = f.check_known({"dist", "value", "min", "max"}, context);
  } else if (d == "uniform") {
    out.kind_ = Kind::kUniform;
    known = f.check_known({"dist", "min", "max"}, context);
  } else if (d == "normal") {
    out.kind_ = Kind::kNormal;
    known = f.check_known({"dist", "mean", "std", "min", "max"}, context);
  } else if (d == "lognormal") {
    out.kind_ = Kind::kLognormal;
    known = f.check_known({"dist", "sigma", "mean", "median", "min", "max"}, context);
  } else if (d == "pareto") {
    out.kind_ = Kind::kPareto;
    known = f.check_known({"dist", "shape", "scale", "min", "max"}, context);
  } else if (d == "zipf") {
    out.kind_ = Kind::kZipf;
    known = f.check_known({"dist", "exponent", "n", "min", "max"}, context);
  } else if (d == "empirical") {
    return f.error_at_key("dist", "distribution 'empirical' is not supported yet (known: " +
                                      std::string(kKnownDists) + ")");
  } else {
    return f.error_at_key("dist", "unknown distribution '" + d + "' (known: " +
                                      std::string(kKnownDists) + ")");
  }
  if (!known) return known.error();

  // The clamp range, shared by every family (for uniform it is the family itself).
  if (out.kind_ == Kind::kUniform) {
    if (Status s = f.require("min"); !s) return s.error();
    if (Status s = f.require("max"); !s) return s.error();
  }
  auto lo = f.integer("min", 1, kMaxTokens);
  if (!lo) return lo.error();
  auto hi = f.integer("max", 1, kMaxTokens);
  if (!hi) return hi.error();
  out.min_ = static_cast<int32_t>(lo.value().value_or(1));
  out.max_ = static_cast<int32_t>(hi.value().value_or(kDefaultMaxLength));
  // min is at most kMaxTokens, the ceiling without max, so only a given max can be below it.
  if (out.min_ > out.max_) {
    return f.expected("max", "an integer >= min (" + std::to_string(out.min_) + ")");
  }

  switch (out.kind_) {
    case Kind::kFixed: {
      if (Status s = f.require("value"); !s) return s.error();
      auto v = f.integer("value", out.min_, out.max_);
      if (!v) return v.error();
      out.min_ = out.max_ = static_cast<int32_t>(v.value().value());
      out.a_ = static_cast<double>(out.min_);
      break;
    }
    case Kind::kUniform:
      break;
    case Kind::kNormal: {
      auto mean = required_number(f, "mean", false);
      if (!mean) return mean.error();
      auto sd = required_number(f, "std", true);
      if (!sd) return sd.error();
      out.a_ = mean.value();
      out.b_ = sd.value();
      break;
    }
    case Kind::kLognormal: {
      auto sigma = required_number(f, "sigma", false);
      if (!sigma) return sigma.error();
      out.b_ = sigma.value();
      if (f.has("mean") && f.has("median")) {
        return f.error_at_key("median", "give either mean or median, not both");
      }
      if (!f.has("mean") && !f.has("median")) {
        return f.error("missing required key 'mean' or 'median'");
      }
      const bool by_mean = f.has("mean");
      auto m = required_number(f, by_mean ? "mean" : "median", false);
      if (!m) return m.error();
      // mean = exp(mu + sigma^2 / 2); median = exp(mu).
      out.a_ = std::log(m.value()) - (by_mean ? 0.5 * out.b_ * out.b_ : 0.0);
      break;
    }
    case Kind::kPareto: {
      auto shape = required_number(f, "shape", false);
      if (!shape) return shape.error();
      auto scale = required_number(f, "scale", false);
      if (!scale) return scale.error();
      out.a_ = shape.value();
      out.b_ = scale.value();
      break;
    }
    case Kind::kZipf: {
      auto exponent = required_number(f, "exponent", false);
      if (!exponent) return exponent.error();
      if (Status s = f.require("n"); !s) return s.error();
      auto n = f.integer("n", 1, kMaxZipfN);
      if (!n) return n.error();
      out.a_ = exponent.value();
      const int64_t size = n.value().value();
      out.zipf_cdf_.resize(static_cast<size_t>(size));
      double total = 0.0;
      for (int64_t k = 1; k <= size; ++k) {
        total += std::pow(static_cast<double>(k), -out.a_);
        out.zipf_cdf_[static_cast<size_t>(k - 1)] = total;
      }
      break;
    }
  }
  return out;
}

}  // namespace servesim
