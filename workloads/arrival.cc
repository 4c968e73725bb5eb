#include "workloads/arrival.h"

#include <limits>
#include <string_view>

#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMinCv = 1e-6;
constexpr double kMaxCv = 100.0;
constexpr std::string_view kKnownProcesses = "poisson, gamma, constant, all-at-once";

Result<double> positive(const TableFields& f, std::string_view key) {
  if (Status s = f.require(key); !s) return s.error();
  auto v = f.number(key, 0.0, false, kInf);
  if (!v) return v.error();
  return v.value().value();
}

}  // namespace

double ArrivalProcess::gap(Rng& rng) const {
  switch (kind_) {
    case Kind::kPoisson:
      return sample_exponential(rng, rate_);
    case Kind::kGamma:
      return sample_gamma(rng, gamma_shape_, gamma_scale_);
    case Kind::kConstant:
      return 1.0 / rate_;
    case Kind::kAllAtOnce:
      break;
  }
  return 0.0;
}

Result<ArrivalProcess> make_arrival_process(const toml::table& table, const std::string& path,
                                            const std::string& name) {
  using Kind = ArrivalProcess::Kind;
  const TableFields f(table, path, name);
  if (!f.has("process")) {
    return f.error("missing required key 'process' (one of: " + std::string(kKnownProcesses) +
                   ")");
  }
  auto process = f.string("process");
  if (!process) {
    return f.expected("process", "an arrival process (" + std::string(kKnownProcesses) + ")");
  }
  const std::string p = process.value().value();
  const std::string context = "for process = \"" + p + "\"";

  ArrivalProcess out;
  Status known = Ok{};
  if (p == "poisson") {
    out.kind_ = Kind::kPoisson;
    known = f.check_known({"process", "rate"}, context);
  } else if (p == "gamma") {
    out.kind_ = Kind::kGamma;
    known = f.check_known({"process", "rate", "cv"}, context);
  } else if (p == "constant") {
    out.kind_ = Kind::kConstant;
    known = f.check_known({"process", "rate"}, context);
  } else if (p == "all-at-once") {
    out.kind_ = Kind::kAllAtOnce;
    known = f.check_known({"process"}, context);
  } else {
    return f.error_at_key("process", "unknown arrival process '" + p + "' (known: " +
                                         std::string(kKnownProcesses) + ")");
  }
  if (!known) return known.error();
  if (out.kind_ == Kind::kAllAtOnce) return out;

  auto rate = positive(f, "rate");
  if (!rate) return rate.error();
  out.rate_ = rate.value();
  out.cv_ = out.kind_ == Kind::kPoisson ? 1.0 : 0.0;
  if (out.kind_ == Kind::kGamma) {
    if (Status s = f.require("cv"); !s) return s.error();
    auto cv = f.number("cv", 0.0, false, kMaxCv);
    if (!cv) return cv.error();
    if (cv.value().value() < kMinCv) {
      // Below this the shape 1/cv^2 loses meaning; the process is constant for any practical use.
      return f.expected("cv", "a number from 1e-06 to 100 (for cv = 0 use process = \"constant\")");
    }
    out.cv_ = cv.value().value();
    out.gamma_shape_ = 1.0 / (out.cv_ * out.cv_);
    out.gamma_scale_ = out.cv_ * out.cv_ / out.rate_;
  }
  return out;
}

Time ArrivalClock::next() {
  const int64_t i = count_++;
  if (i > 0) {
    if (process_.kind() == ArrivalProcess::Kind::kConstant) {
      seconds_ = static_cast<double>(i) / process_.rate();
    } else {
      seconds_ += process_.gap(rng_);
    }
  }
  if (!(seconds_ <= kMaxArrivalSeconds)) return kNever;
  return from_seconds(seconds_);
}

}  // namespace servesim
