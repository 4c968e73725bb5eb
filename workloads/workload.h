// The workload loader: a workload TOML file in, the list of requests to simulate out.
//
// A workload file has exactly one of (see DESIGN.md, "Workload TOML"):
//   [[request]] entries  explicit requests: id, arrival (s), prompt_tokens, output_tokens, max_tokens,
//                        priority (vLLM's: lower first), and optionally prefix (the id of a [[prefix]] entry, prepended to the prompt),
//                        after (ids of requests that must finish first) and think_time (s); the
//                        [[prefix]] entries (id, tokens) may only go with them (explicit_requests.h)
//   [generate]           requests drawn at random: requests = N or duration = T (s), seed, max_tokens,
//                        and the tables [generate.arrival] (required; see arrival.h),
//                        [generate.output_tokens] (required) and [generate.prompt_tokens] (optional,
//                        default: every prompt 1 token), each a length distribution (distribution.h);
//                        optionally [generate.prefixes] (shared prompt prefixes, prefixes.h),
//                        [generate.sessions] (N counts multi-turn conversations, sessions.h) and
//                        [generate.priority] (request priorities drawn, priorities.h)
//   [replay]             a trace file replayed (replay.h): Azure, Vidur, Mooncake or named-column CSV
//
// Generated requests are named r0, r1, ... in arrival order (turns of conversations: s0.t0, s0.t1,
// ...). The same file and seed give the same requests on every platform: arrivals, prompt lengths,
// output lengths, prefixes, turn counts and think times each draw from their own stream of the seed
// (rng.h), so editing one distribution (or adding prefixes) leaves the other draws unchanged.
//
// A shared prefix is PREPENDED: a request with a prefix of P tokens whose own prompt is N tokens (the
// drawn length, or an explicit request's prompt_tokens) has prompt_tokens = P + N.
//
// Bad input never throws and never crashes: every function returns an Error whose one-line message is
// `PATH:LINE:COL: KEY: what was expected, got WHAT` (malformed TOML: `PATH:LINE:COL: malformed TOML:
// ...`; an unreadable file: `PATH: cannot open file`).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/request.h"
#include "sim/request_stream.h"
#include "sim/result.h"
#include "workloads/load_controls.h"

namespace servesim {

// The most requests one [generate] table may produce (requests = N, or what duration = T yields).
inline constexpr int64_t kMaxGeneratedRequests = 10'000'000;

struct Workload {
  std::string path;                   // the file it came from
  // The requests, in this order (dag.h), which the simulator relies on:
  //   1. the requests without `after` (independent ones), in non-decreasing arrival order; ties keep
  //      file / generation order;
  //   2. then the dependent requests, breadth-first: each as soon as all its parents are placed.
  // So every request's parents have smaller indices than it has, and `after` holds indices into this
  // vector. A dependent request's `arrival` is 0 (ignored: it arrives when its parents finish, plus
  // think_time).
  std::vector<RequestSpec> requests;
  uint64_t seed = 0;                  // the seed actually used for generation (0 for explicit-only)
};

// Reads the workload TOML file at `path`. seed_override (the CLI's --seed) replaces [generate].seed;
// it has no effect on explicit [[request]] workloads (whose Workload::seed is 0).
// `load` applies vLLM bench's load controls (load_controls.h); the defaults change nothing.
Result<Workload> load_workload(const std::string& path, std::optional<uint64_t> seed_override,
                               const LoadControls& load = {});

// The same requests one at a time, for a run that should not hold them all: opens `path` as a
// stream when it is a [generate] workload without sessions (and without time_scale, which the
// stream does not apply), and sets *seed to the seed used; otherwise returns nullptr, and
// load_workload is the way (traces, explicit requests, conversations, and anything wrong with the
// file, which load_workload reports). Errors in the [generate] table itself are returned as
// load_workload would return them.
Result<std::unique_ptr<RequestStream>> open_request_stream(const std::string& path,
                                                          std::optional<uint64_t> seed_override,
                                                          const LoadControls& load, uint64_t* seed);

// Whether the file at `path` is a [generate] workload (a TOML file with a [generate] table): the
// workloads that draw their arrivals, to which burstiness applies. Reads only the TOML, generates
// nothing; false for traces and for anything it cannot read (load_workload says what is wrong).
bool is_generated_workload_file(const std::string& path);

// Same from text already in memory; `path` is used only in messages and copied into Workload::path.
Result<Workload> parse_workload(std::string_view text, const std::string& path,
                                std::optional<uint64_t> seed_override, const LoadControls& load = {});

}  // namespace servesim
