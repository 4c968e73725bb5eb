// Multi-turn sessions: a generated workload of conversations instead of independent requests.
//
// With [generate.sessions], [generate].requests = N (or duration = T) counts conversations; their
// first turns arrive by [generate.arrival]. Each conversation has a number of turns drawn from
// [generate.sessions.turns] (a length distribution, distribution.h). Turn k + 1 waits for turn k
// (after = [turn k]) and arrives when it finishes plus a think time. Every turn draws its new user
// tokens from [generate.prompt_tokens] (1 when absent) and its output from [generate.output_tokens].
//
// Prompts (share_history = true, the default) repeat the conversation so far, as a chat client sends
// it:
//   turn 0      prompt = [prefix?] + {user 0}
//   turn k + 1  prompt = turn k's prompt + {turn k's output_id, turn k's output} + {user k + 1}
// where {user k} is {content_id(kUserContent, g), new user tokens} (g: the turn's number within the
// workload), "turn k's output" is its output_tokens capped at [generate].max_tokens when that is given,
// and every turn has output_id = content_id(kTurnOutputContent, g). prompt_tokens is the sum of the
// segments. With share_history = false every turn has the same lengths, but its prompt after the
// prefix (if any) is one fresh kUserContent segment: the history is never shared, only the prefix.
// With [generate.prefixes], each conversation draws (once) whether it starts with a prefix; the first
// turn has it in front and the history carries it.
//
// Turns are named "s{conversation}.t{turn}" (s0.t0, s0.t1, ...). Dependent turns have arrival 0 (their
// arrival is decided by the simulator). The result is in the order of dag.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sim/request.h"
#include "sim/result.h"
#include "sim/time.h"
#include "sim/config/toml_fields.h"
#include "workloads/distribution.h"
#include "workloads/prefixes.h"

namespace servesim {

// The Rng streams of sessions (Rng::stream), separate from arrivals and lengths.
inline constexpr uint64_t kTurnsStream = 0x7475726e73212121;  // "turns!!!"
inline constexpr uint64_t kThinkStream = 0x7468696e6b212121;  // "think!!!"

// The most prompt segments all turns together may hold. With share_history a conversation of T turns
// holds about T^2 segments (16 bytes each), so this bounds the memory that long conversations take.
inline constexpr int64_t kMaxSessionSegments = 20'000'000;

// [generate.sessions]:
//   turns          table [generate.sessions.turns]: the number of turns per conversation (required)
//   think_time     seconds >= 0 (at most 1e9), default 0: the pause between a turn's end and the next
//   think          "fixed" (default): every pause is think_time; "exponential": mean think_time
//                  (each pause is at most 1e9 s)
//   share_history  bool, default true: see above
struct SessionOptions {
  enum class Think { kFixed, kExponential };
  LengthDistribution turns;
  double think_time = 0.0;  // seconds
  Think think = Think::kFixed;
  bool share_history = true;
};

// Reads [generate.sessions] from `table`; `path` and `name` ("generate.sessions") are used only in
// messages. Errors: a missing, unknown or mistyped key, a value out of range, a bad turns table.
Result<SessionOptions> read_session_options(const toml::table& table, const std::string& path,
                                            const std::string& name);

// What every generated turn draws from, besides the session options.
struct TurnDraws {
  const LengthDistribution* prompt = nullptr;  // new user tokens per turn; nullptr: 1 token
  const LengthDistribution* output = nullptr;  // output tokens per turn; REQUIRED non-null
  int32_t max_tokens = 0;                      // [generate].max_tokens; 0: not given
  const PrefixOptions* prefixes = nullptr;     // [generate.prefixes]; nullptr: none
  uint64_t seed = 0;
};

// The turns of one conversation per entry of `starts` (the first turns' arrivals, non-decreasing),
// ordered as dag.h says. Draws: turn counts (kTurnsStream), think times (kThinkStream), prefixes
// (kPrefixStream, once per conversation), and per turn, in order, one prompt and one output length
// (kPromptStream, kOutputStream). `where` is [generate.sessions], for messages. Errors: more than
// kMaxGeneratedRequests turns, more than kMaxSessionSegments segments, or a prompt longer than
// INT32_MAX tokens.
Result<std::vector<RequestSpec>> generate_sessions(const SessionOptions& options,
                                                   const std::vector<Time>& starts,
                                                   const TurnDraws& draws,
                                                   const TableFields& where);

}  // namespace servesim
