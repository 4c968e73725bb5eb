// Shared prompt prefixes: system prompts, few-shot examples, RAG context that many requests start with.
//
// A prefix is a piece of content (content_id(kPrefixContent, k)) of a fixed number of tokens. A request
// that uses one has it PREPENDED to its own prompt: its RequestSpec gets
//   prompt        = [{content_id(kPrefixContent, k), prefix tokens}, {content_id(kUserContent, n), own}]
//   prompt_tokens = prefix tokens + own
// where `own` is what the request itself asked for (a generated prompt length, or an explicit
// request's prompt_tokens) and n is a number unique within the workload. So two requests with the same
// prefix share their leading blocks, and a prefix never shortens a request's own prompt.
//
// Generated workloads describe prefixes with [generate.prefixes] (PrefixOptions, drawn by a
// PrefixPicker); explicit workloads list them as [[prefix]] entries (explicit_requests.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sim/request.h"
#include "sim/result.h"
#include "workloads/rng.h"

namespace servesim {

// The Rng stream of prefix draws (Rng::stream): separate from arrivals and lengths, so that adding or
// editing [generate.prefixes] leaves every arrival and length as it was.
inline constexpr uint64_t kPrefixStream = 0x7072656669786573;  // "prefixes"

// The most prefixes [generate.prefixes] may declare (a zipf table holds one double per prefix).
inline constexpr int64_t kMaxPrefixes = 10'000'000;

// [generate.prefixes]:
//   share       fraction of requests that start with a prefix, in [0, 1] (required)
//   count       number of distinct prefixes, 1 .. kMaxPrefixes (required)
//   tokens      each prefix's length in tokens, >= 1 (required)
//   popularity  "uniform" (default): each prefix equally likely; "zipf": prefix k (0-based) with
//               probability proportional to (k + 1)^-exponent
//   exponent    zipf only: > 0 (at most 100), default 1.0
struct PrefixOptions {
  enum class Popularity { kUniform, kZipf };
  double share = 0.0;
  int32_t count = 1;
  int32_t tokens = 1;
  Popularity popularity = Popularity::kUniform;
  double exponent = 1.0;
};

// Reads [generate.prefixes] from `table`. `path` and `name` ("generate.prefixes") are used only in
// messages. Errors: a missing, unknown or mistyped key, a value out of range; each names the file, line
// and key.
Result<PrefixOptions> read_prefix_options(const toml::table& table, const std::string& path,
                                          const std::string& name);

// Draws, request by request, whether a request starts with a prefix and which one.
class PrefixPicker {
 public:
  // Draws from stream kPrefixStream of `seed`.
  PrefixPicker(const PrefixOptions& options, uint64_t seed);

  const PrefixOptions& options() const { return options_; }

  // The prefix of the next request: its number k in [0, count), or -1 for none. Every call takes
  // exactly two uniform draws (one for share, one for k) whatever the outcome, so that raising share
  // only gives prefixes to more requests and never changes which prefix another request has.
  int32_t draw();

 private:
  PrefixOptions options_;
  Rng rng_;
  std::vector<double> zipf_cdf_;  // zipf: cumulative weights of prefixes 0..count-1 (not normalized)
};

// Segment of shared prefix number k (a [generate.prefixes] draw, or the index of a [[prefix]] entry).
inline Segment prefix_segment(int32_t k, int32_t tokens) {
  return Segment{content_id(kPrefixContent, static_cast<uint64_t>(k)), tokens};
}

// Prepends `prefix` to `r`, whose prompt_tokens is its own part: sets r.prompt to [prefix,
// {content_id(kUserContent, user_n), own}] and r.prompt_tokens to prefix.tokens + own. Returns false,
// leaving `r` unchanged, when the total would exceed INT32_MAX.
// REQUIRES: r.prompt is empty, prefix.tokens >= 1, r.prompt_tokens >= 1.
bool prepend_prefix(RequestSpec& r, Segment prefix, uint64_t user_n);

}  // namespace servesim
