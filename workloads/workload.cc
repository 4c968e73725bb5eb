#include "workloads/workload.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <utility>

#include <toml++/toml.h>

#include "workloads/arrival.h"
#include "workloads/distribution.h"
#include "workloads/rng.h"
#include "sim/toml_fields.h"

namespace servesim {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Result<toml::table> parse_toml(std::string_view text, const std::string& path) {
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& e) {
    return error_at(path, e.source().begin, "",
                    "malformed TOML: " + std::string(e.description()));
  }
#else
  toml::parse_result parsed = toml::parse(text, std::string_view(path));
  if (!parsed) {
    return error_at(path, parsed.error().source().begin, "",
                    "malformed TOML: " + std::string(parsed.error().description()));
  }
  return std::move(parsed).table();
#endif
}

// An optional int32 field: the value, `fallback` when absent, or the error.
Result<int32_t> int32_field(const TableFields& f, std::string_view key, int32_t fallback) {
  auto v = f.integer(key, 1, kInt32Max);
  if (!v) return v.error();
  return static_cast<int32_t>(v.value().value_or(fallback));
}

// Reads one [[request]] entry (index i) into `spec`.
Status read_request(const toml::table& t, const std::string& path, size_t i, RequestSpec& spec,
                    bool& default_id) {
  const TableFields f(t, path, "request[" + std::to_string(i) + "]");
  Status known = f.check_known({"id", "arrival", "prompt_tokens", "output_tokens", "max_tokens"});
  if (!known) return known;
  if (Status s = f.require("output_tokens"); !s) return s;
  auto id = f.string("id");
  if (!id) return id.error();
  default_id = !id.value().has_value();
  spec.id = default_id ? "r" + std::to_string(i) : std::move(id).value().value();
  auto arrival = f.number("arrival", 0.0, true, kMaxArrivalSeconds);
  if (!arrival) return arrival.error();
  spec.arrival = from_seconds(arrival.value().value_or(0.0));
  auto prompt = int32_field(f, "prompt_tokens", 1);
  if (!prompt) return prompt.error();
  spec.prompt_tokens = prompt.value();
  auto output = int32_field(f, "output_tokens", 1);
  if (!output) return output.error();
  spec.output_tokens = output.value();
  // output_tokens > max_tokens is allowed: the simulator caps generation at max_tokens, as engines do.
  auto max_tokens = int32_field(f, "max_tokens", 0);
  if (!max_tokens) return max_tokens.error();
  spec.max_tokens = max_tokens.value();
  spec.line = f.line();
  return Ok{};
}

Result<std::vector<RequestSpec>> read_requests(const toml::node& node, const std::string& path) {
  const toml::source_position pos = node.source().begin;
  if (node.is_table()) {
    return error_at(path, pos, "request",
                    "expected [[request]] entries (an array of tables), got a single [request] "
                    "table; write [[request]], with double brackets");
  }
  const toml::array* array = node.as_array();
  if (!array || array->empty() || !array->is_array_of_tables()) {
    return error_at(path, pos, "request",
                    "expected [[request]] entries (an array of tables), got " +
                        (array && array->empty() ? std::string("an empty array")
                                                 : describe_value(node)));
  }
  std::vector<RequestSpec> specs(array->size());
  // id -> index of the request that has it, to name both lines of a duplicate. The views point into
  // specs, which never reallocates.
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const toml::table& t = *array->get(i)->as_table();
    bool default_id = false;
    if (Status s = read_request(t, path, i, specs[i], default_id); !s) return s.error();
    const auto [it, inserted] = seen.emplace(specs[i].id, i);
    if (inserted) continue;
    const std::string other = "request[" + std::to_string(it->second) + "] on line " +
                              std::to_string(specs[it->second].line);
    const TableFields f(t, path, "request[" + std::to_string(i) + "]");
    if (default_id) {
      return f.error("its default id '" + specs[i].id + "' is already the id of " + other +
                     "; give it an explicit id");
    }
    return f.error_at_key("id", "duplicate id '" + specs[i].id + "' (also the id of " + other + ")");
  }
  return specs;
}

Result<Workload> generate(const toml::table& table, const std::string& path,
                          std::optional<uint64_t> seed_override) {
  const TableFields g(table, path, "generate");
  if (g.has("prefixes")) {
    return g.error_at_key("prefixes",
                          "[generate.prefixes] (shared prompt prefixes) is not supported yet");
  }
  Status known = g.check_known({"requests", "duration", "seed", "max_tokens", "arrival",
                                "prompt_tokens", "output_tokens"});
  if (!known) return known.error();

  if (g.has("requests") && g.has("duration")) {
    return g.error_at_key("duration", "give either requests or duration, not both");
  }
  if (!g.has("requests") && !g.has("duration")) {
    return g.error("missing required key 'requests' or 'duration' (give exactly one)");
  }
  auto count_field = g.integer("requests", 1, kMaxGeneratedRequests);
  if (!count_field) return count_field.error();
  const std::optional<int64_t> count = count_field.value();
  auto duration_field = g.number("duration", 0.0, false, kMaxArrivalSeconds);
  if (!duration_field) return duration_field.error();
  const std::optional<double> duration = duration_field.value();
  auto seed = g.integer("seed", 0, kInt64Max);
  if (!seed) return seed.error();
  auto max_tokens = int32_field(g, "max_tokens", 0);
  if (!max_tokens) return max_tokens.error();

  auto arrival_table = g.subtable("arrival");
  if (!arrival_table) return arrival_table.error();
  if (!arrival_table.value()) {
    return g.error("missing required table [generate.arrival] (with process = \"poisson\", "
                   "\"gamma\", \"constant\" or \"all-at-once\")");
  }
  auto process = make_arrival_process(*arrival_table.value(), path, "generate.arrival");
  if (!process) return process.error();
  if (duration && process.value().kind() == ArrivalProcess::Kind::kAllAtOnce) {
    return g.error_at_key("duration", "cannot be used with process = \"all-at-once\" (every "
                                      "request arrives at 0); give requests = N instead");
  }
  const std::string too_many = "yields more than " + std::to_string(kMaxGeneratedRequests) +
                               " requests at this rate; lower generate.arrival.rate or duration";
  // Fail fast rather than generate ten million requests first; the loop below catches the rest.
  if (duration && process.value().rate() * *duration > static_cast<double>(kMaxGeneratedRequests)) {
    return g.error_at_key("duration", too_many);
  }

  auto prompt_table = g.subtable("prompt_tokens");
  if (!prompt_table) return prompt_table.error();
  std::optional<LengthDistribution> prompt;  // absent: every prompt is 1 token
  if (prompt_table.value()) {
    auto d = make_distribution(*prompt_table.value(), path, "generate.prompt_tokens");
    if (!d) return d.error();
    prompt = std::move(d).value();
  }
  auto output_table = g.subtable("output_tokens");
  if (!output_table) return output_table.error();
  if (!output_table.value()) {
    return g.error("missing required table [generate.output_tokens] (for example dist = "
                   "\"fixed\", value = 128)");
  }
  auto output = make_distribution(*output_table.value(), path, "generate.output_tokens");
  if (!output) return output.error();

  Workload w;
  w.path = path;
  w.seed = seed_override ? *seed_override : static_cast<uint64_t>(seed.value().value_or(0));
  ArrivalClock clock(process.value(), Rng::stream(w.seed, kArrivalStream));
  Rng prompt_rng = Rng::stream(w.seed, kPromptStream);
  Rng output_rng = Rng::stream(w.seed, kOutputStream);
  const Time end = duration ? from_seconds(*duration) : kNever;
  if (count) w.requests.reserve(static_cast<size_t>(*count));
  for (int64_t i = 0; !count || i < *count; ++i) {
    const Time t = clock.next();
    if (duration && t >= end) break;  // arrivals strictly before T only
    if (t == kNever) {
      return g.error_at_key("requests", "arrivals run past 1e9 seconds at this rate; raise "
                                        "generate.arrival.rate or lower requests");
    }
    if (i == kMaxGeneratedRequests) return g.error_at_key("duration", too_many);
    RequestSpec& r = w.requests.emplace_back();
    r.id = "r" + std::to_string(i);
    r.arrival = t;
    r.prompt_tokens = prompt ? prompt->sample(prompt_rng) : 1;
    r.output_tokens = output.value().sample(output_rng);
    r.max_tokens = max_tokens.value();
  }
  return w;
}

}  // namespace

Result<Workload> parse_workload(std::string_view text, const std::string& path,
                                std::optional<uint64_t> seed_override) {
  auto parsed = parse_toml(text, path);
  if (!parsed) return parsed.error();
  const toml::table& root = parsed.value();
  const TableFields top(root, path, "");
  Status known = top.check_known({"request", "generate", "replay"});
  if (!known) return known.error();

  // The sections present, in file order, to say which two clash.
  std::vector<std::pair<toml::source_position, std::string_view>> present;
  for (std::string_view key : {"request", "generate", "replay"}) {
    if (const toml::node* node = root.get(key)) present.emplace_back(node->source().begin, key);
  }
  if (present.empty()) {
    return error_at(path, {}, "",
                    "no workload: expected [[request]] entries, a [generate] table or a [replay] "
                    "table");
  }
  std::stable_sort(present.begin(), present.end(), [](const auto& a, const auto& b) {
    return a.first.line != b.first.line ? a.first.line < b.first.line
                                        : a.first.column < b.first.column;
  });
  auto header = [](std::string_view key) {
    return key == "request" ? std::string("[[request]]") : "[" + std::string(key) + "]";
  };
  if (present.size() > 1) {
    return error_at(path, present[1].first, present[1].second,
                    "a workload has exactly one of [[request]] entries, [generate] or [replay]; "
                    "this file also has " + header(present[0].second) + " on line " +
                        std::to_string(present[0].first.line));
  }

  Workload w;
  const std::string_view section = present[0].second;
  if (section == "replay") {
    return error_at(path, present[0].first, "",
                    "[replay] (trace replay) is not supported yet; use [[request]] or [generate]");
  }
  if (section == "request") {
    auto specs = read_requests(*root.get("request"), path);
    if (!specs) return specs.error();
    w.path = path;
    w.requests = std::move(specs).value();
  } else {
    const toml::node& node = *root.get("generate");
    if (!node.is_table()) {
      return error_at(path, node.source().begin, "generate",
                      "expected a [generate] table, got " + describe_value(node));
    }
    auto generated = generate(*node.as_table(), path, seed_override);
    if (!generated) return generated.error();
    w = std::move(generated).value();
  }
  const auto by_arrival = [](const RequestSpec& a, const RequestSpec& b) {
    return a.arrival < b.arrival;
  };
  if (!std::is_sorted(w.requests.begin(), w.requests.end(), by_arrival)) {
    std::stable_sort(w.requests.begin(), w.requests.end(), by_arrival);  // ties keep file order
  }
  return w;
}

Result<Workload> load_workload(const std::string& path, std::optional<uint64_t> seed_override) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Error{path + ": cannot open file (it is a directory)"};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open file"};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error{path + ": cannot read file"};
  return parse_workload(text.str(), path, seed_override);
}

}  // namespace servesim
