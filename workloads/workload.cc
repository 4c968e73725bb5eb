#include "workloads/workload.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include <toml++/toml.h>

#include "sim/config/toml_fields.h"
#include "workloads/dag.h"
#include "workloads/explicit_requests.h"
#include "workloads/generate.h"
#include "workloads/load_controls.h"
#include "workloads/replay.h"

namespace servesim {
namespace {

// The load controls that apply after loading: num_prompts, then the re-timing of workloads that
// were not generated (generated ones drew their arrivals under request_rate and burstiness).
Result<Workload> apply_load(Workload w, const LoadControls& load, bool generated) {
  if (!generated && load.burstiness > 0) {
    return Error{"burstiness: applies to generated workloads ([generate]); " + w.path +
                 " lists its requests, whose arrivals keep their own burstiness (use request_rate "
                 "or time_scale to change the rate)"};
  }
  if (Status s = keep_first_prompts(w, load.num_prompts); !s.ok()) return s.error();
  if (!generated && load.request_rate > 0) {
    if (Status s = retime_to_rate(w, load.request_rate); !s.ok()) return s.error();
  }
  if (load.time_scale > 0) {
    if (Status s = scale_arrivals(w, load.time_scale); !s.ok()) return s.error();
  }
  return w;
}

std::string section_header(std::string_view key) {
  return key == "request" ? std::string("[[request]]") : "[" + std::string(key) + "]";
}

// The file's one workload section: request, generate or replay.
Result<std::string_view> workload_section(const toml::table& root, const std::string& path) {
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
  if (present.size() > 1) {
    return error_at(path, present[1].first, present[1].second,
                    "a workload has exactly one of [[request]] entries, [generate] or [replay]; "
                    "this file also has " + section_header(present[0].second) + " on line " +
                        std::to_string(present[0].first.line));
  }
  return present[0].second;
}

// A [replay] table's trace, read.
Result<Workload> replay_section(const toml::table& root, const std::string& path, std::optional<uint64_t> seed_override) {
  const toml::node& node = *root.get("replay");
  if (!node.is_table()) {
    return error_at(path, node.source().begin, "replay",
                    "expected a [replay] table, got " + describe_value(node));
  }
  auto options = parse_replay_table(*node.as_table(), path);
  if (!options) return options.error();
  options.value().seed = seed_override.value_or(0);
  auto replayed = replay_trace(options.value());  // sorted by arrival, no dependencies
  if (!replayed) {
    return Error{replayed.error().message + " (the trace of [replay] at " +
                 format_where(path, node.source().begin) + ")"};
  }
  return replayed;
}

// parse_workload without the load controls that apply after loading; *generated says whether the
// file was a [generate] table.
Result<Workload> parse_workload_section(std::string_view text, const std::string& path,
                                        std::optional<uint64_t> seed_override,
                                        const LoadControls& load, bool* generated) {
  auto parsed = parse_toml(text, path);
  if (!parsed) return parsed.error();
  const toml::table& root = parsed.value();
  const TableFields top(root, path, "");
  Status known = top.check_known({"request", "prefix", "generate", "replay"});
  if (!known) return known.error();
  Result<std::string_view> found = workload_section(root, path);
  if (!found.ok()) return found.error();
  const std::string_view section = found.value();
  if (section == "replay") return replay_section(root, path, seed_override);
  if (const toml::node* prefix = root.get("prefix"); prefix && section != "request") {
    return error_at(path, prefix->source().begin, "prefix",
                    "[[prefix]] entries are named by [[request]] entries; with " +
                        section_header(section) + " they are never used" +
                        (section == "generate" ? " (shared prefixes of generated requests go in "
                                                 "[generate.prefixes])"
                                               : ""));
  }
  Workload w;
  if (section == "request") {
    auto specs = read_explicit_requests(root, path);
    if (!specs) return specs.error();
    w.path = path;
    w.requests = std::move(specs).value();
  } else {
    const toml::node& node = *root.get("generate");
    if (!node.is_table()) {
      return error_at(path, node.source().begin, "generate",
                      "expected a [generate] table, got " + describe_value(node));
    }
    *generated = true;
    auto generated_workload = generate_workload(*node.as_table(), path, seed_override, load);
    if (!generated_workload) return generated_workload.error();
    w = std::move(generated_workload).value();
  }
  // The order that workload.h promises (dag.h). Explicit and session workloads come ordered (then
  // this is one pass), and generated ones in arrival order; a branch may also leave it to this.
  const bool ordered = order_by_dependencies(w.requests);
  assert(ordered);  // the branches rule out cycles
  (void)ordered;
  return w;
}

}  // namespace

bool is_generated_workload_file(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".toml") return false;
  try {
    const toml::table root = toml::parse_file(path);
    return root.contains("generate");
  } catch (const toml::parse_error&) {
    return false;
  }
}

Result<Workload> parse_workload(std::string_view text, const std::string& path,
                                std::optional<uint64_t> seed_override, const LoadControls& load) {
  if (Status s = check_load_controls(load); !s.ok()) return s.error();
  bool generated = false;
  auto w = parse_workload_section(text, path, seed_override, load, &generated);
  if (!w || !load.any()) return w;
  return apply_load(std::move(w).value(), load, generated);
}

Result<std::unique_ptr<RequestStream>> open_request_stream(const std::string& path,
                                                          std::optional<uint64_t> seed_override,
                                                          const LoadControls& load, uint64_t* seed) {
  std::unique_ptr<RequestStream> none;
  if (is_trace_path(path) || load.time_scale > 0) return none;
  if (Status s = check_load_controls(load); !s.ok()) return s.error();
  Result<std::string> text = read_text_file(path);
  if (!text) return text.error();
  auto parsed = parse_toml(text.value(), path);
  if (!parsed) return parsed.error();
  const toml::table& root = parsed.value();
  const toml::node* node = root.get("generate");
  if (root.size() != 1 || node == nullptr || !node->is_table()) return none;  // load_workload says
  return generated_stream(*node->as_table(), path, seed_override, load, seed);
}

Result<Workload> load_workload(const std::string& path, std::optional<uint64_t> seed_override,
                               const LoadControls& load) {
  if (is_trace_path(path)) {
    if (Status s = check_load_controls(load); !s.ok()) return s.error();
    ReplayOptions options;  // a trace file given as it is: its format detected, every row
    options.path = path;
    auto w = replay_trace(options);
    if (!w || !load.any()) return w;
    return apply_load(std::move(w).value(), load, /*generated=*/false);
  }
  Result<std::string> text = read_text_file(path);
  if (!text) return text.error();
  return parse_workload(text.value(), path, seed_override, load);
}

}  // namespace servesim
