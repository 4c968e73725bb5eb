// Length distributions: how many tokens a generated prompt or response has.
//
// A LengthDistribution is built once from a TOML table such as [generate.prompt_tokens] and then only
// sampled. `dist` picks the family:
//
//   fixed      value                every draw is `value`
//   uniform    min, max             integers uniform in [min, max], both ends included
//   normal     mean, std            Normal(mean, std)
//   lognormal  sigma, mean|median   exp(Normal(mu, sigma)), mu = ln(median), or ln(mean) - sigma^2/2
//   pareto     shape, scale         classic Pareto, values >= scale, mean shape*scale/(shape-1)
//   zipf       exponent, n          k in 1..n with P(k) proportional to k^-exponent (n <= 10,000,000)
//
// Every family also takes optional integer `min` and `max` (1 <= min <= max): a draw is rounded to the
// nearest integer and clamped into [min, max]. Without `min` the floor is 1 (a length is at least one
// token). Without `max` draws are clamped at kDefaultMaxLength (kMaxTokens, 10^8, the most tokens
// any length may have); that is not meant as a realistic limit, so give `max` for heavy-tailed
// families. For uniform, min and
// max are the family's own parameters and are required.
#pragma once

#include "sim/request.h"

#include <cstdint>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sim/result.h"
#include "workloads/rng.h"

namespace servesim {

// The ceiling of a draw when the table gives no `max`.
inline constexpr int32_t kDefaultMaxLength = kMaxTokens;
// The largest zipf `n` (its table of n cumulative weights is built at load time: 8 bytes each).
inline constexpr int64_t kMaxZipfN = 10'000'000;

class LengthDistribution {
 public:
  enum class Kind { kFixed, kUniform, kNormal, kLognormal, kPareto, kZipf };

  Kind kind() const { return kind_; }
  // The clamp range: every sample lies in [min(), max()].
  int32_t min() const { return min_; }
  int32_t max() const { return max_; }

  // One length, drawn from `rng` (which it advances), rounded and clamped into [min(), max()].
  int32_t sample(Rng& rng) const;

 private:
  friend Result<LengthDistribution> make_distribution(const toml::table& table,
                                                      const std::string& path,
                                                      const std::string& name);
  LengthDistribution() = default;

  Kind kind_ = Kind::kFixed;
  double a_ = 1.0;  // fixed: value; normal: mean; lognormal: mu; pareto: shape; zipf: exponent
  double b_ = 0.0;  // normal: std; lognormal: sigma; pareto: scale
  int32_t min_ = 1;
  int32_t max_ = kDefaultMaxLength;
  std::vector<double> zipf_cdf_;  // zipf: cumulative weights of 1..n (not normalized)
};

// Builds the distribution that `table` describes. `path` and `name` (the table's dotted name, e.g.
// "generate.prompt_tokens") are used only in messages. Errors: a missing, unknown or mistyped key, a
// parameter out of range, min > max; each names the file, line and key.
Result<LengthDistribution> make_distribution(const toml::table& table, const std::string& path,
                                             const std::string& name);

}  // namespace servesim
