#include "workloads/sessions.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <optional>
#include <utility>

#include "workloads/arrival.h"
#include "workloads/workload.h"

namespace servesim {
namespace {


// One conversation's running state: the prompt of its next turn, before the new user tokens.
struct History {
  std::vector<Segment> segments;
  int64_t tokens = 0;
};

Time draw_think(const SessionOptions& o, Rng& rng) {
  if (o.think == SessionOptions::Think::kFixed || o.think_time == 0.0) {
    return from_seconds(o.think_time);
  }
  return from_seconds(std::min(sample_exponential(rng, 1.0 / o.think_time), kMaxArrivalSeconds));
}

// Each conversation's number of turns and prefix (-1: none), drawn before any turn is built so that
// the limits are checked first.
struct Plan {
  std::vector<int32_t> turns;
  std::vector<int32_t> prefix;
  int64_t total_turns = 0;
};

Result<Plan> plan(const SessionOptions& options, size_t conversations, Rng& turns_rng,
                  PrefixPicker* picker, const TableFields& where) {
  Plan out;
  out.turns.resize(conversations);
  out.prefix.resize(conversations);
  int64_t segments = 0;  // in all prompts
  for (size_t c = 0; c < conversations; ++c) {
    const int64_t t = out.turns[c] = options.turns.sample(turns_rng);
    out.prefix[c] = picker ? picker->draw() : -1;
    const int64_t p = out.prefix[c] >= 0 ? 1 : 0;
    out.total_turns += t;
    // With the history, turn k has p + 2k + 1 segments; without, p + 1.
    segments += options.share_history ? t * p + t * t : t * (p + 1);
    if (out.total_turns > kMaxGeneratedRequests) {
      return where.error_at_key("turns", "the conversations have more than " +
                                             std::to_string(kMaxGeneratedRequests) +
                                             " turns in all; lower generate.requests or the "
                                             "turns distribution's max");
    }
    if (segments > kMaxSessionSegments) {
      return where.error_at_key("turns", "the conversations' prompts hold more than " +
                                             std::to_string(kMaxSessionSegments) +
                                             " segments in all (each turn repeats the history "
                                             "before it); lower the turns distribution's max or "
                                             "generate.requests");
    }
  }
  return out;
}

// Where each level of turns starts in the order of dag.h: first turns by arrival (the order of the
// conversations), then all second turns by conversation, then all third turns, and so on. Returns
// offset[t], the index of the first turn t; the caller hands out indices from it in conversation
// order.
std::vector<int64_t> level_offsets(const std::vector<int32_t>& turns) {
  const int32_t max_turns = turns.empty() ? 0 : *std::max_element(turns.begin(), turns.end());
  std::vector<int64_t> level(static_cast<size_t>(max_turns), 0);
  for (int32_t n : turns) ++level[static_cast<size_t>(n) - 1];  // conversations of exactly n turns
  // Suffix sums: level[t] = conversations with more than t turns = the size of level t.
  for (size_t t = level.size(); t > 1; --t) level[t - 2] += level[t - 1];
  int64_t offset = 0;
  for (int64_t& size : level) offset += std::exchange(size, offset);
  return level;
}

}  // namespace

Result<SessionOptions> read_session_options(const toml::table& table, const std::string& path,
                                            const std::string& name) {
  const TableFields f(table, path, name);
  Status known = f.check_known({"turns", "think_time", "think", "share_history"});
  if (!known) return known.error();
  auto turns_table = f.subtable("turns");
  if (!turns_table) return turns_table.error();
  if (!turns_table.value()) {
    return f.error("missing required table [" + name +
                   ".turns] (turns per conversation, for "
                   "example dist = \"uniform\", min = 1, max = 6)");
  }
  auto turns = make_distribution(*turns_table.value(), path, f.key_name("turns"));
  if (!turns) return turns.error();
  SessionOptions out{std::move(turns).value()};

  auto think_time = f.number("think_time", 0.0, true, kMaxArrivalSeconds);
  if (!think_time) return think_time.error();
  out.think_time = think_time.value().value_or(0.0);
  auto think = f.string("think");
  if (!think) return f.expected("think", "\"fixed\" or \"exponential\"");
  const std::string t = think.value().value_or("fixed");
  if (t == "exponential") {
    out.think = SessionOptions::Think::kExponential;
  } else if (t != "fixed") {
    return f.error_at_key(
        "think", "unknown think-time distribution '" + t + "' (known: fixed, exponential)");
  }
  if (const toml::node* share = table.get("share_history")) {
    if (!share->is_boolean()) return f.expected("share_history", "true or false");
    out.share_history = share->as_boolean()->get();
  }
  return out;
}

Result<std::vector<RequestSpec>> generate_sessions(const SessionOptions& options,
                                                   const std::vector<Time>& starts,
                                                   const TurnDraws& draws,
                                                   const TableFields& where) {
  assert(draws.output != nullptr);
  Rng turns_rng = Rng::stream(draws.seed, kTurnsStream);
  Rng think_rng = Rng::stream(draws.seed, kThinkStream);
  Rng prompt_rng = Rng::stream(draws.seed, kPromptStream);
  Rng output_rng = Rng::stream(draws.seed, kOutputStream);
  std::optional<PrefixPicker> picker;
  if (draws.prefixes) picker.emplace(*draws.prefixes, draws.seed);

  auto planned = plan(options, starts.size(), turns_rng, picker ? &*picker : nullptr, where);
  if (!planned) return planned.error();
  const Plan& p = planned.value();
  std::vector<int64_t> slot = level_offsets(p.turns);
  std::vector<RequestSpec> out(static_cast<size_t>(p.total_turns));
  History history;
  for (size_t c = 0; c < starts.size(); ++c) {
    const int32_t k = p.prefix[c];
    const std::optional<Segment> prefix =
        k >= 0 ? std::optional(prefix_segment(k, draws.prefixes->tokens)) : std::nullopt;
    history.segments.clear();
    history.tokens = 0;
    if (prefix) {
      history.segments.push_back(*prefix);
      history.tokens = prefix->tokens;
    }
    const std::string conversation = "s" + std::to_string(c) + ".t";
    int64_t previous = -1;  // index of the turn before
    for (int32_t t = 0; t < p.turns[c]; ++t) {
      const int64_t index = slot[static_cast<size_t>(t)]++;
      const auto g = static_cast<uint64_t>(index);  // the turn's number within the workload
      RequestSpec& r = out[static_cast<size_t>(index)];
      r.id = conversation + std::to_string(t);
      r.arrival = t == 0 ? starts[c] : 0;
      const int32_t user = draws.prompt ? draws.prompt->sample(prompt_rng) : 1;
      r.output_tokens = draws.output->sample(output_rng);
      r.max_tokens = draws.max_tokens;
      r.output_id = content_id(kTurnOutputContent, g);
      if (t > 0) {
        r.after = {static_cast<int32_t>(previous)};
        r.think_time = draw_think(options, think_rng);
      }
      const int64_t total = history.tokens + user;
      if (total > kMaxTokens) {
        return where.error("conversation s" + std::to_string(c) + " reaches a prompt of more " +
                           "than " + std::to_string(kMaxTokens) + " tokens at turn " +
                           std::to_string(t) + "; lower the turns or lengths' max");
      }
      r.prompt_tokens = static_cast<int32_t>(total);
      if (options.share_history) {
        r.prompt.reserve(history.segments.size() + 1);
        r.prompt = history.segments;
        r.prompt.push_back(Segment{content_id(kUserContent, g), user});
      } else {
        if (prefix) r.prompt.push_back(*prefix);
        r.prompt.push_back(Segment{content_id(kUserContent, g),
                                   static_cast<int32_t>(total - (prefix ? prefix->tokens : 0))});
      }
      // What the next turn repeats: this prompt and the response as generated.
      const int32_t generated =
          draws.max_tokens > 0 ? std::min(r.output_tokens, draws.max_tokens) : r.output_tokens;
      history.segments.push_back(Segment{content_id(kUserContent, g), user});
      history.segments.push_back(Segment{r.output_id, generated});
      history.tokens = total + generated;
      previous = index;
    }
  }
  return out;
}

}  // namespace servesim
