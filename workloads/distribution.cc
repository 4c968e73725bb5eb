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

namespace {

using Kind = LengthDistribution::Kind;

// The family `d` names, the table's keys checked against it.
Result<Kind> read_family(const TableFields& f, const std::string& d) {
  const std::string context = "for dist = \"" + d + "\"";
  Kind kind = Kind::kFixed;
  Status known = Ok{};
  if (d == "fixed") {
    known = f.check_known({"dist", "value", "min", "max"}, context);
  } else if (d == "uniform") {
    kind = Kind::kUniform;
    known = f.check_known({"dist", "min", "max"}, context);
  } else if (d == "normal") {
    kind = Kind::kNormal;
    known = f.check_known({"dist", "mean", "std", "min", "max"}, context);
  } else if (d == "lognormal") {
    kind = Kind::kLognormal;
    known = f.check_known({"dist", "sigma", "mean", "median", "min", "max"}, context);
  } else if (d == "pareto") {
    kind = Kind::kPareto;
    known = f.check_known({"dist", "shape", "scale", "min", "max"}, context);
  } else if (d == "zipf") {
    kind = Kind::kZipf;
    known = f.check_known({"dist", "exponent", "n", "min", "max"}, context);
  } else if (d == "empirical") {
    return f.error_at_key("dist", "distribution 'empirical' is not supported yet (known: " +
                                      std::string(kKnownDists) + ")");
  } else {
    return f.error_at_key("dist", "unknown distribution '" + d + "' (known: " +
                                      std::string(kKnownDists) + ")");
  }
  if (!known) return known.error();
  return kind;
}

// A family's parameters: LengthDistribution's a_, b_ and zipf_cdf_.
struct Parameters {
  double a = 1.0;
  double b = 0.0;
  std::vector<double> zipf_cdf;
};

// Two required numbers > 0 (`b` >= 0 when `b_zero_ok`).
Result<Parameters> read_two(const TableFields& f, std::string_view a, std::string_view b, bool b_zero_ok) {
  auto x = required_number(f, a, false);
  if (!x) return x.error();
  auto y = required_number(f, b, b_zero_ok);
  if (!y) return y.error();
  return Parameters{x.value(), y.value(), {}};
}

Result<Parameters> read_lognormal(const TableFields& f) {
  Parameters p;
  auto sigma = required_number(f, "sigma", false);
  if (!sigma) return sigma.error();
  p.b = sigma.value();
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
  p.a = std::log(m.value()) - (by_mean ? 0.5 * p.b * p.b : 0.0);
  return p;
}

Result<Parameters> read_zipf(const TableFields& f) {
  Parameters p;
  auto exponent = required_number(f, "exponent", false);
  if (!exponent) return exponent.error();
  if (Status s = f.require("n"); !s) return s.error();
  auto n = f.integer("n", 1, kMaxZipfN);
  if (!n) return n.error();
  p.a = exponent.value();
  const int64_t size = n.value().value();
  p.zipf_cdf.resize(static_cast<size_t>(size));
  double total = 0.0;
  for (int64_t k = 1; k <= size; ++k) {
    total += std::pow(static_cast<double>(k), -p.a);
    p.zipf_cdf[static_cast<size_t>(k - 1)] = total;
  }
  return p;
}

// The parameters of family `kind`; a fixed value narrows [min, max] to itself.
Result<Parameters> read_parameters(const TableFields& f, Kind kind, int32_t& min, int32_t& max) {
  switch (kind) {
    case Kind::kFixed: {
      if (Status s = f.require("value"); !s) return s.error();
      auto v = f.integer("value", min, max);
      if (!v) return v.error();
      min = max = static_cast<int32_t>(v.value().value());
      return Parameters{static_cast<double>(min), 0.0, {}};
    }
    case Kind::kUniform: return Parameters{};
    case Kind::kNormal: return read_two(f, "mean", "std", true);
    case Kind::kLognormal: return read_lognormal(f);
    case Kind::kPareto: return read_two(f, "shape", "scale", false);
    case Kind::kZipf: return read_zipf(f);
  }
  return Parameters{};
}

}  // namespace

Result<LengthDistribution> make_distribution(const toml::table& table, const std::string& path,
                                             const std::string& name) {
  const TableFields f(table, path, name);
  if (!f.has("dist")) {
    return f.error("missing required key 'dist' (one of: " + std::string(kKnownDists) + ")");
  }
  auto dist = f.string("dist");
  if (!dist) return f.expected("dist", "a distribution name (" + std::string(kKnownDists) + ")");
  Result<Kind> kind = read_family(f, dist.value().value());
  if (!kind.ok()) return kind.error();
  LengthDistribution out;
  out.kind_ = kind.value();

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
  Result<Parameters> p = read_parameters(f, out.kind_, out.min_, out.max_);
  if (!p.ok()) return p.error();
  out.a_ = p.value().a;
  out.b_ = p.value().b;
  out.zipf_cdf_ = std::move(p.value().zipf_cdf);
  return out;
}

}  // namespace servesim
