#include "workloads/prefixes.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

constexpr double kMaxExponent = 100.0;

}  // namespace

Result<PrefixOptions> read_prefix_options(const toml::table& table, const std::string& path,
                                          const std::string& name) {
  const TableFields f(table, path, name);
  PrefixOptions out;
  auto popularity = f.string("popularity");
  if (!popularity) return f.expected("popularity", "\"uniform\" or \"zipf\"");
  const std::string p = popularity.value().value_or("uniform");
  const std::string context = "for popularity = \"" + p + "\"";
  Status known = Ok{};
  if (p == "uniform") {
    known = f.check_known({"share", "count", "tokens", "popularity"}, context);
  } else if (p == "zipf") {
    out.popularity = PrefixOptions::Popularity::kZipf;
    known = f.check_known({"share", "count", "tokens", "popularity", "exponent"}, context);
  } else {
    return f.error_at_key("popularity", "unknown popularity '" + p + "' (known: uniform, zipf)");
  }
  if (!known) return known.error();

  for (const char* key : {"share", "count", "tokens"}) {
    if (Status s = f.require(key); !s) return s.error();
  }
  auto share = f.number("share", 0.0, true, 1.0);
  if (!share) return share.error();
  out.share = share.value().value();
  auto count = f.integer("count", 1, kMaxPrefixes);
  if (!count) return count.error();
  out.count = static_cast<int32_t>(count.value().value());
  auto tokens = f.integer("tokens", 1, kMaxTokens);
  if (!tokens) return tokens.error();
  out.tokens = static_cast<int32_t>(tokens.value().value());
  auto exponent = f.number("exponent", 0.0, false, kMaxExponent);
  if (!exponent) return exponent.error();
  out.exponent = exponent.value().value_or(1.0);
  return out;
}

PrefixPicker::PrefixPicker(const PrefixOptions& options, uint64_t seed)
    : options_(options), rng_(Rng::stream(seed, kPrefixStream)) {
  if (options_.popularity != PrefixOptions::Popularity::kZipf) return;
  zipf_cdf_.resize(static_cast<size_t>(options_.count));
  double total = 0.0;
  for (int32_t k = 0; k < options_.count; ++k) {
    total += std::pow(static_cast<double>(k) + 1.0, -options_.exponent);
    zipf_cdf_[static_cast<size_t>(k)] = total;
  }
}

int32_t PrefixPicker::draw() {
  const double u = rng_.uniform();
  const double v = rng_.uniform();
  if (!(u < options_.share)) return -1;  // share = 1: uniform() < 1 always; share = 0: never
  const int32_t last = options_.count - 1;
  if (zipf_cdf_.empty()) {
    // floor(v * count) is uniform on 0..count-1 up to a bias of count / 2^53.
    return std::min(last, static_cast<int32_t>(v * static_cast<double>(options_.count)));
  }
  const double x = v * zipf_cdf_.back();
  const auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), x);
  return std::min(last, static_cast<int32_t>(it - zipf_cdf_.begin()));
}

bool prepend_prefix(RequestSpec& r, Segment prefix, uint64_t user_n) {
  assert(r.prompt.empty() && prefix.tokens >= 1 && r.prompt_tokens >= 1);
  const int64_t total = int64_t{prefix.tokens} + r.prompt_tokens;
  if (total > kMaxTokens) return false;
  r.prompt = {prefix, Segment{content_id(kUserContent, user_n), r.prompt_tokens}};
  r.prompt_tokens = static_cast<int32_t>(total);
  return true;
}

}  // namespace servesim
