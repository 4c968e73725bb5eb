#include "workloads/generate.h"

#include <cmath>
#include <string>
#include <string_view>
#include <limits>
#include <utility>

#include "sim/config/toml_fields.h"
#include "workloads/arrival.h"
#include "workloads/distribution.h"
#include "workloads/prefixes.h"
#include "workloads/priorities.h"
#include "workloads/rng.h"
#include "workloads/sessions.h"

namespace servesim {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();


// duration = T asks for more than kMaxGeneratedRequests requests.
Error too_many_requests(const TableFields& g) {
  return g.error_at_key("duration", "yields more than " + std::to_string(kMaxGeneratedRequests) +
                                        " requests at this rate; lower generate.arrival.rate or "
                                        "duration");
}

// The arrival times of the generated requests (with sessions: of the conversations' first turns):
// `count` of them, or those before `end`.
Result<std::vector<Time>> arrival_times(ArrivalClock& clock, std::optional<int64_t> count,
                                        std::optional<Time> end, const TableFields& g) {
  std::vector<Time> starts;
  if (count) starts.reserve(static_cast<size_t>(*count));
  for (int64_t i = 0; !count || i < *count; ++i) {
    const Time t = clock.next();
    if (end && t >= *end) break;  // arrivals strictly before T only
    if (t == kNever) {
      return g.error_at_key("requests", "arrivals run past 1e9 seconds at this rate; raise "
                                        "generate.arrival.rate or lower requests");
    }
    if (!count && i == kMaxGeneratedRequests) return too_many_requests(g);
    starts.push_back(t);
  }
  return starts;
}

// An optional sub-table of [generate] read by `read` (read_prefix_options, read_session_options).
template <class T, class Read>
Result<std::optional<T>> optional_table(const TableFields& g, std::string_view key, Read read) {
  auto table = g.subtable(key);
  if (!table) return table.error();
  if (!table.value()) return std::optional<T>{};
  auto options = read(*table.value(), g.path(), g.key_name(key));
  if (!options) return options.error();
  return std::optional<T>(std::move(options).value());
}

// A table that must be there: read(table, path, name), or an error naming it with `example`.
template <typename Read>
auto required_table(const TableFields& g, std::string_view key, Read read, std::string_view example)
    -> decltype(read(std::declval<const toml::table&>(), g.path(), g.key_name(key))) {
  auto table = g.subtable(key);
  if (!table) return table.error();
  if (!table.value()) {
    return g.error("missing required table [" + g.key_name(key) + "] (" + std::string(example) + ")");
  }
  return read(*table.value(), g.path(), g.key_name(key));
}

bool sessions_present(const TableFields& g) { return g.has("sessions"); }

// The arrival process of a [generate] table under the load controls: Poisson at request_rate, or
// gamma of shape burstiness (vLLM's --request-rate and --burstiness), else the table's own.
Result<ArrivalProcess> controlled_arrivals(const ArrivalProcess& own, const LoadControls& load,
                                           const TableFields& g) {
  if (load.request_rate <= 0 && load.burstiness <= 0) return own;
  const double rate = load.request_rate > 0 ? load.request_rate : own.rate();
  toml::table t;
  if (std::isinf(rate)) {
    t.insert("process", "all-at-once");
  } else if (rate <= 0) {
    return g.error("burstiness: the workload's arrivals are all-at-once, which has no rate to "
                   "shape; give request_rate too");
  } else if (std::isinf(load.burstiness)) {
    t.insert("process", "constant");  // vLLM: burstiness inf makes every gap 1 / rate
    t.insert("rate", rate);
  } else if (load.burstiness > 0 && load.burstiness != 1.0) {
    t.insert("process", "gamma");
    t.insert("rate", rate);
    t.insert("cv", 1.0 / std::sqrt(load.burstiness));  // shape 1/cv^2 = burstiness
  } else {
    t.insert("process", "poisson");
    t.insert("rate", rate);
  }
  return make_arrival_process(t, "command line", "load controls");
}

// What a [generate] table asks for, checked: everything needed to draw its requests.
struct GenerationPlan {
  uint64_t seed = 0;
  std::optional<ArrivalProcess> process;
  std::optional<int64_t> count;  // requests = N (or num_prompts)
  std::optional<Time> end;       // duration = T: arrivals strictly before it
  // Under request_rate, vLLM bench's timing: the first of N + 1 drawn arrivals is dropped and the
  // rest multiplied by `factor` (1 when there is nothing to rescale).
  bool normalize = false;
  double factor = 1.0;
  std::optional<LengthDistribution> prompt;
  std::optional<LengthDistribution> output;
  std::optional<PrefixOptions> prefixes;
  std::optional<SessionOptions> sessions;
  std::optional<PriorityOptions> priority;
  int32_t max_tokens = 0;
  // The message for a prefix that pushes a drawn prompt past kMaxTokens, with its file position.
  std::string prefix_error;
  int64_t size = 0;   // the requests it gives
  Time last = -1;     // the last one's arrival (before rescaling by factor)
};

// How many requests a [generate] table asks for: requests = N, duration = T, or num_prompts.
struct Amount {
  std::optional<int64_t> count;
  std::optional<double> duration;
};

Result<Amount> read_amount(const TableFields& g, const LoadControls& load) {
  if (g.has("requests") && g.has("duration")) {
    return g.error_at_key("duration", "give either requests or duration, not both");
  }
  if (!g.has("requests") && !g.has("duration")) {
    return g.error("missing required key 'requests' or 'duration' (give exactly one)");
  }
  auto count = g.integer("requests", 1, kMaxGeneratedRequests);
  if (!count) return count.error();
  auto duration = g.number("duration", 0.0, false, kMaxArrivalSeconds);
  if (!duration) return duration.error();
  if (load.num_prompts > 0 && !g.has("sessions")) {
    // num_prompts draws exactly that many requests, in place of requests or duration.
    if (load.num_prompts > kMaxGeneratedRequests) {
      return Error{"num_prompts = " + std::to_string(load.num_prompts) + ": at most " +
                   std::to_string(kMaxGeneratedRequests) + " requests are generated"};
    }
    return Amount{load.num_prompts, std::nullopt};
  }
  return Amount{count.value(), duration.value()};
}

// The table's arrival process under the load controls, checked against its duration.
Result<ArrivalProcess> read_arrivals(const TableFields& g, const LoadControls& load,
                                     const std::optional<double>& duration) {
  auto own_process = required_table(g, "arrival", make_arrival_process,
                                    "with process = \"poisson\", \"gamma\", \"constant\" or \"all-at-once\"");
  if (!own_process) return own_process.error();
  auto process = controlled_arrivals(own_process.value(), load, g);
  if (!process) return process.error();
  if (duration && process.value().kind() == ArrivalProcess::Kind::kAllAtOnce) {
    return g.error_at_key("duration", "cannot be used with process = \"all-at-once\" (every "
                                      "request arrives at 0); give requests = N instead");
  }
  // Fail fast rather than generate ten million requests first; the arrival scan catches the rest.
  if (duration && process.value().rate() * *duration > static_cast<double>(kMaxGeneratedRequests)) {
    return too_many_requests(g);
  }
  return process;
}

// The requests' lengths, prefixes, sessions and priorities, into `plan`.
Status read_request_shapes(const TableFields& g, GenerationPlan& plan) {
  auto prompt = optional_table<LengthDistribution>(g, "prompt_tokens", make_distribution);
  if (!prompt) return prompt.error();  // absent: every prompt is 1 token
  auto output = required_table(g, "output_tokens", make_distribution,
                               "for example dist = \"fixed\", value = 128");
  if (!output) return output.error();
  auto prefixes = optional_table<PrefixOptions>(g, "prefixes", read_prefix_options);
  if (!prefixes) return prefixes.error();
  auto sessions = optional_table<SessionOptions>(g, "sessions", read_session_options);
  if (!sessions) return sessions.error();
  auto priority = optional_table<PriorityOptions>(g, "priority", read_priority_options);
  if (!priority) return priority.error();
  plan.prompt = std::move(prompt).value();
  plan.output = std::move(output).value();
  plan.prefixes = std::move(prefixes).value();
  plan.sessions = std::move(sessions).value();
  plan.priority = std::move(priority).value();
  return Ok{};
}

// Runs the plan's arrival clock once: `count` arrivals (one more to drop when normalizing), or
// those before `end`; the plan's size, last arrival and rescaling factor.
Status scan_arrivals(const TableFields& g, const LoadControls& load, GenerationPlan& plan) {
  ArrivalClock clock(*plan.process, Rng::stream(plan.seed, kArrivalStream));
  const std::optional<int64_t> draws = plan.normalize ? std::optional<int64_t>(*plan.count + 1) : plan.count;
  Time last = 0;
  for (int64_t i = 0; !draws || i < *draws; ++i) {
    const Time t = clock.next();
    if (plan.end && t >= *plan.end) break;  // arrivals strictly before T only
    if (t == kNever) {
      return g.error_at_key("requests", "arrivals run past 1e9 seconds at this rate; raise "
                                        "generate.arrival.rate or lower requests");
    }
    // A count is checked where it is read; only a duration can ask for too many (the count's one
    // more draw, dropped when normalizing, is not a request).
    if (!draws && i == kMaxGeneratedRequests) return too_many_requests(g);
    last = t;
    ++plan.size;
  }
  if (plan.normalize && plan.size > 0) --plan.size;  // the first is dropped
  if (plan.size > 0) plan.last = last;
  if (plan.normalize) {
    const double target = static_cast<double>(*plan.count) / load.request_rate;
    if (to_seconds(last) > 0 && target <= kMaxArrivalSeconds) plan.factor = target / to_seconds(last);
  }
  return Ok{};
}

// Reads and checks a [generate] table, and runs its arrival clock once to check the arrivals (and
// find vLLM bench's rescaling factor) without keeping them.
Result<GenerationPlan> plan_generation(const toml::table& table, const std::string& path,
                                       std::optional<uint64_t> seed_override, const LoadControls& load) {
  const TableFields g(table, path, "generate");
  Status known = g.check_known({"requests", "duration", "seed", "max_tokens", "arrival",
                                "prompt_tokens", "output_tokens", "prefixes", "sessions",
                                "priority"});
  if (!known) return known.error();
  Result<Amount> amount = read_amount(g, load);
  if (!amount.ok()) return amount.error();
  auto seed = g.integer("seed", 0, kInt64Max);
  if (!seed) return seed.error();
  auto max_tokens = g.integer("max_tokens", 1, kMaxTokens);
  if (!max_tokens) return max_tokens.error();
  Result<ArrivalProcess> process = read_arrivals(g, load, amount.value().duration);
  if (!process.ok()) return process.error();
  GenerationPlan plan;
  if (Status s = read_request_shapes(g, plan); !s.ok()) return s.error();
  plan.seed = seed_override ? *seed_override : static_cast<uint64_t>(seed.value().value_or(0));
  plan.process = process.value();
  if (amount.value().duration) plan.end = from_seconds(*amount.value().duration);
  plan.count = amount.value().count;
  // Under request_rate, a fixed number of requests is timed as `vllm bench serve` times them: the
  // first is sent one drawn gap after the start, and all are rescaled so that the last is sent at
  // exactly N / rate (vLLM's normalize_factor).
  plan.normalize = load.request_rate > 0 && !std::isinf(load.request_rate) && plan.count &&
                   !sessions_present(g);
  plan.max_tokens = static_cast<int32_t>(max_tokens.value().value_or(0));
  if (plan.prefixes) {
    const TableFields pf(*g.table().get("prefixes")->as_table(), path, "generate.prefixes");
    plan.prefix_error = pf.error_at_key("tokens", "a prefix plus a drawn prompt exceed " +
                                                      std::to_string(kMaxTokens) + " tokens; lower tokens or "
                                                      "generate.prompt_tokens.max").message;
  }
  if (Status s = scan_arrivals(g, load, plan); !s.ok()) return s.error();
  return plan;
}

// Draws the requests of a plan without sessions one at a time: the i-th is "r<i>", drawn from the
// arrival, prompt, output, prefix and priority streams in turn.
class GeneratedRequests final : public RequestStream {
 public:
  explicit GeneratedRequests(GenerationPlan plan)
      : plan_(std::move(plan)),
        clock_(*plan_.process, Rng::stream(plan_.seed, kArrivalStream)),
        prompt_rng_(Rng::stream(plan_.seed, kPromptStream)),
        output_rng_(Rng::stream(plan_.seed, kOutputStream)) {
    if (plan_.prefixes) picker_.emplace(*plan_.prefixes, plan_.seed);
    if (plan_.priority) priority_.emplace(*plan_.priority, plan_.seed);
    if (plan_.normalize) clock_.next();  // vLLM bench drops the first arrival
  }

  bool next(RequestSpec& r) override {
    if (!error_.empty() || (plan_.count && i_ >= *plan_.count)) return false;
    Time t = clock_.next();
    if (plan_.end && t >= *plan_.end) return false;
    if (plan_.factor != 1.0) t = from_seconds(to_seconds(t) * plan_.factor);
    r = RequestSpec{};
    r.id = default_request_id(static_cast<int64_t>(i_));
    r.arrival = t;
    r.prompt_tokens = plan_.prompt ? plan_.prompt->sample(prompt_rng_) : 1;
    r.output_tokens = plan_.output->sample(output_rng_);
    r.max_tokens = plan_.max_tokens;
    const int32_t k = picker_ ? picker_->draw() : -1;
    if (k >= 0 && !prepend_prefix(r, prefix_segment(k, picker_->options().tokens), static_cast<uint64_t>(i_))) {
      error_ = plan_.prefix_error;
      return false;
    }
    if (priority_) r.priority = priority_->draw();
    ++i_;
    return true;
  }

  const std::string& error() const override { return error_; }
  int64_t size() const override { return plan_.size; }
  Time last_arrival() const override {
    return plan_.last < 0 || plan_.factor == 1.0 ? plan_.last : from_seconds(to_seconds(plan_.last) * plan_.factor);
  }

 private:
  GenerationPlan plan_;
  ArrivalClock clock_;
  Rng prompt_rng_, output_rng_;
  std::optional<PrefixPicker> picker_;
  std::optional<PriorityPicker> priority_;
  int64_t i_ = 0;
  std::string error_;
};

}  // namespace

Result<Workload> generate_workload(const toml::table& table, const std::string& path,
                                   std::optional<uint64_t> seed_override, const LoadControls& load) {
  auto planned = plan_generation(table, path, seed_override, load);
  if (!planned) return planned.error();
  GenerationPlan& plan = planned.value();
  Workload w;
  w.path = path;
  w.seed = plan.seed;
  if (plan.sessions) {
    ArrivalClock clock(*plan.process, Rng::stream(plan.seed, kArrivalStream));
    const TableFields g(table, path, "generate");
    auto starts = arrival_times(clock, plan.count, plan.end, g);
    if (!starts) return starts.error();
    const TurnDraws draws{plan.prompt ? &*plan.prompt : nullptr, &*plan.output, plan.max_tokens,
                          plan.prefixes ? &*plan.prefixes : nullptr, w.seed};
    const TableFields s(*table.get("sessions")->as_table(), path, "generate.sessions");
    auto turns = generate_sessions(*plan.sessions, starts.value(), draws, s);
    if (!turns) return turns.error();
    w.requests = std::move(turns).value();
    if (plan.priority) assign_priorities(*plan.priority, w.seed, w.requests);
    return w;
  }
  w.requests.reserve(static_cast<size_t>(plan.size));
  GeneratedRequests stream(std::move(plan));
  RequestSpec r;
  while (stream.next(r)) w.requests.push_back(std::move(r));
  if (!stream.error().empty()) return Error{stream.error()};
  return w;
}

Result<std::unique_ptr<RequestStream>> generated_stream(const toml::table& table, const std::string& path,
                                                       std::optional<uint64_t> seed_override,
                                                       const LoadControls& load, uint64_t* seed) {
  std::unique_ptr<RequestStream> none;
  if (table.contains("sessions")) return none;  // conversations depend on each other
  auto plan = plan_generation(table, path, seed_override, load);
  if (!plan) return plan.error();
  if (plan.value().prefixes) {
    const int64_t longest = int64_t{plan.value().prompt ? plan.value().prompt->max() : 1} +
                            plan.value().prefixes->tokens;
    if (longest > kMaxTokens) return none;  // generate_workload reports a prompt that is too long
  }
  *seed = plan.value().seed;
  return std::unique_ptr<RequestStream>(std::make_unique<GeneratedRequests>(std::move(plan).value()));
}

}  // namespace servesim
