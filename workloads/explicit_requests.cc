#include "workloads/explicit_requests.h"

#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "sim/config/toml_fields.h"
#include "workloads/arrival.h"
#include "workloads/dag.h"
#include "workloads/prefixes.h"

namespace servesim {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

struct Prefix {
  std::string id;
  int32_t tokens = 1;
  int32_t line = 0;
};

// The prefixes by id, and their ids in file order for messages.
struct Prefixes {
  std::vector<Prefix> list;
  std::unordered_map<std::string, int32_t> index;
};

// One id named in a request's `after`, and where it is written.
struct AfterRef {
  std::string id;
  toml::source_position pos;
};

std::string entry(std::string_view key, size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "]";
}

// root[key] as a non-empty array of tables ([[key]] entries), or the error.
Result<const toml::array*> table_array(const toml::node& node, const std::string& path,
                                       std::string_view key) {
  const toml::source_position pos = node.source().begin;
  const std::string header = "[[" + std::string(key) + "]]";
  if (node.is_table()) {
    return error_at(path, pos, key,
                    "expected " + header + " entries (an array of tables), got a single [" +
                        std::string(key) + "] table; write " + header + ", with double brackets");
  }
  const toml::array* array = node.as_array();
  if (!array || array->empty() || !array->is_array_of_tables()) {
    return error_at(
        path, pos, key,
        "expected " + header + " entries (an array of tables), got " +
            (array && array->empty() ? std::string("an empty array") : describe_value(node)));
  }
  return array;
}

// An optional token count: from 1 to kMaxTokens, `fallback` when absent, or the error.
Result<int32_t> int32_field(const TableFields& f, std::string_view key, int32_t fallback) {
  auto v = f.integer(key, 1, kMaxTokens);
  if (!v) return v.error();
  return static_cast<int32_t>(v.value().value_or(fallback));
}

Result<Prefixes> read_prefixes(const toml::node& node, const std::string& path) {
  auto array = table_array(node, path, "prefix");
  if (!array) return array.error();
  Prefixes out;
  for (size_t i = 0; i < array.value()->size(); ++i) {
    const TableFields f(*array.value()->get(i)->as_table(), path, entry("prefix", i));
    if (Status s = f.check_known({"id", "tokens"}); !s) return s.error();
    if (Status s = f.require("id"); !s) return s.error();
    if (Status s = f.require("tokens"); !s) return s.error();
    auto id = f.string("id");
    if (!id) return id.error();
    auto tokens = int32_field(f, "tokens", 1);
    if (!tokens) return tokens.error();
    const auto [it, inserted] = out.index.emplace(id.value().value(), static_cast<int32_t>(i));
    if (!inserted) {
      const Prefix& other = out.list[static_cast<size_t>(it->second)];
      return f.error_at_key("id", "duplicate prefix id '" + other.id + "' (also the id of " +
                                      entry("prefix", static_cast<size_t>(it->second)) +
                                      " on line " + std::to_string(other.line) + ")");
    }
    out.list.push_back(Prefix{id.value().value(), tokens.value(), f.line()});
  }
  return out;
}

// Reads `after` (REQUIRES: present) into `refs`.
Status read_after(const TableFields& f, std::vector<AfterRef>& refs) {
  const toml::array* array = f.table().get("after")->as_array();
  const std::string expected = "a non-empty array of request ids, like [\"A\", \"B\"]";
  if (!array) return f.expected("after", expected);
  if (array->empty()) {
    return f.error_at_key("after", "expected " + expected + ", got an empty array");
  }
  for (size_t j = 0; j < array->size(); ++j) {
    const toml::node& node = *array->get(j);
    const std::string key = entry(f.key_name("after"), j);
    if (!node.is_string() || node.as_string()->get().empty()) {
      return error_at(f.path(), node.source().begin, key,
                      "expected a request id (a non-empty string), got " + describe_value(node));
    }
    const std::string& id = node.as_string()->get();
    for (const AfterRef& seen : refs) {
      if (seen.id == id) {
        return error_at(f.path(), node.source().begin, key, "'" + id + "' is listed twice");
      }
    }
    refs.push_back(AfterRef{id, node.source().begin});
  }
  return Ok{};
}

// Reads [[request]] entry i into `spec` and the ids it waits for into `refs`.
Status read_request(const TableFields& f, size_t i, const Prefixes& prefixes, RequestSpec& spec,
                    bool& default_id, std::vector<AfterRef>& refs) {
  Status known = f.check_known({"id", "arrival", "prompt_tokens", "output_tokens", "max_tokens",
                                "priority", "prefix", "after", "think_time"});
  if (!known) return known;
  if (Status s = f.require("output_tokens"); !s) return s;
  auto id = f.string("id");
  if (!id) return id.error();
  default_id = !id.value().has_value();
  spec.id = default_id ? default_request_id(static_cast<int64_t>(i)) : std::move(id).value().value();
  spec.line = f.line();
  auto arrival = f.number("arrival", 0.0, true, kMaxArrivalSeconds);
  if (!arrival) return arrival.error();
  spec.arrival = from_seconds(arrival.value().value_or(0.0));
  auto prompt = int32_field(f, "prompt_tokens", 1);
  if (!prompt) return prompt.error();
  spec.prompt_tokens = prompt.value();
  auto output = int32_field(f, "output_tokens", 1);
  if (!output) return output.error();
  spec.output_tokens = output.value();
  // output_tokens > max_tokens is allowed: the simulator caps generation at max_tokens, as
  // engines do.
  auto max_tokens = int32_field(f, "max_tokens", 0);
  if (!max_tokens) return max_tokens.error();
  spec.max_tokens = max_tokens.value();
  // vLLM's request priority: lower is served first under scheduling_policy = "priority".
  if (const toml::node* p = f.table().get("priority")) {
    const auto* n = p->as_integer();
    if (n == nullptr || n->get() < std::numeric_limits<int32_t>::min() || n->get() > kInt32Max) {
      return f.expected("priority", "a 32-bit integer (lower is served first)");
    }
    spec.priority = static_cast<int32_t>(n->get());
  }

  auto prefix = f.string("prefix");
  if (!prefix) return prefix.error();
  if (prefix.value()) {
    const std::string& name = *prefix.value();
    const auto it = prefixes.index.find(name);
    if (it == prefixes.index.end()) {
      std::string known_ids;
      for (const Prefix& p : prefixes.list) known_ids += (known_ids.empty() ? "" : ", ") + p.id;
      return f.error_at_key("prefix", "unknown prefix '" + name + "' (" +
                                          (known_ids.empty() ? "this file has no [[prefix]] entries"
                                                             : "known: " + known_ids) +
                                          ")");
    }
    const Prefix& p = prefixes.list[static_cast<size_t>(it->second)];
    if (!prepend_prefix(spec, prefix_segment(it->second, p.tokens), i)) {
      return f.error_at_key("prefix", "prefix '" + name + "' (" + std::to_string(p.tokens) +
                                          " tokens) and prompt_tokens (" +
                                          std::to_string(spec.prompt_tokens) +
                                          ") add up to more than " + std::to_string(kMaxTokens) +
                                          " tokens");
    }
  }

  auto think = f.number("think_time", 0.0, true, kMaxArrivalSeconds);
  if (!think) return think.error();
  if (!f.has("after")) {
    if (f.has("think_time")) {
      return f.error_at_key("think_time",
                            "only allowed with after (it is the pause between the "
                            "end of the requests in after and this arrival); give "
                            "after, or remove think_time");
    }
    return Ok{};
  }
  if (f.has("arrival")) {
    return f.error_at_key("arrival",
                          "not allowed with after: the request arrives when the "
                          "requests in after have finished, plus think_time; remove "
                          "arrival, or after");
  }
  spec.arrival = 0;
  spec.think_time = from_seconds(think.value().value_or(0.0));
  return read_after(f, refs);
}

}  // namespace

Result<std::vector<RequestSpec>> read_explicit_requests(const toml::table& root,
                                                        const std::string& path) {
  Prefixes prefixes;
  if (const toml::node* node = root.get("prefix")) {
    auto read = read_prefixes(*node, path);
    if (!read) return read.error();
    prefixes = std::move(read).value();
  }
  auto array = table_array(*root.get("request"), path, "request");
  if (!array) return array.error();
  const toml::array& tables = *array.value();
  const auto fields = [&](size_t i) {
    return TableFields(*tables.get(i)->as_table(), path, entry("request", i));
  };

  std::vector<RequestSpec> specs(tables.size());
  std::vector<std::vector<AfterRef>> refs(tables.size());
  // id -> index of the request that has it, to name both lines of a duplicate. The views point into
  // specs, which never reallocates.
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const TableFields f = fields(i);
    bool default_id = false;
    if (Status s = read_request(f, i, prefixes, specs[i], default_id, refs[i]); !s) {
      return s.error();
    }
    const auto [it, inserted] = seen.emplace(specs[i].id, i);
    if (inserted) continue;
    const std::string other =
        entry("request", it->second) + " on line " + std::to_string(specs[it->second].line);
    if (default_id) {
      return f.error("its default id '" + specs[i].id + "' is already the id of " + other +
                     "; give it an explicit id");
    }
    return f.error_at_key("id",
                          "duplicate id '" + specs[i].id + "' (also the id of " + other + ")");
  }

  for (size_t i = 0; i < specs.size(); ++i) {
    for (const AfterRef& ref : refs[i]) {
      const auto it = seen.find(ref.id);
      if (it == seen.end()) {
        return error_at(path, ref.pos, entry("request", i) + ".after",
                        "request '" + specs[i].id + "' (line " + std::to_string(specs[i].line) +
                            ") waits for '" + ref.id + "', but no request has that id");
      }
      specs[i].after.push_back(static_cast<int32_t>(it->second));
    }
  }
  seen.clear();  // its views point into specs, which is about to be reordered
  if (!order_by_dependencies(specs)) {
    const std::vector<int32_t> cycle = find_dependency_cycle(specs);
    return fields(static_cast<size_t>(cycle.front()))
        .error("dependency cycle: " + describe_cycle(specs, cycle));
  }
  return specs;
}

}  // namespace servesim
