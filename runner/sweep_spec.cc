// The definition of a sweep: its grid (from a sweep file or --grid flags), the points it
// spans, the files it names stored by absolute path, and the checks made before any point runs.
// Running the points is runner/sweep.cc's.
#include "runner/sweep.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "analysis/storage/sweep_db.h"
#include "policies/registry.h"
#include "routers/registry.h"
#include "sim/config/config.h"
#include "sim/config/presets.h"
#include "sim/config/toml_fields.h"
#include "workloads/load_controls.h"
#include "workloads/workload.h"

namespace servesim {
namespace {

// `text` as a TOML value when it is one, else as a string.
toml::array value_from_text(const std::string& text) {
  toml::array out;
  try {
    toml::table parsed = toml::parse("v = " + text);
    if (parsed.size() == 1 && parsed.contains("v") && !parsed.get("v")->is_table() &&
        !parsed.get("v")->is_array()) {
      parsed.get("v")->visit([&](const auto& v) { out.push_back(v); });
      return out;
    }
  } catch (const toml::parse_error&) {
  }
  out.push_back(text);
  return out;
}

// One axis of [grid] with its value node's position, for ordering and messages.
struct FileAxis {
  SweepAxis axis;
  toml::source_position where;
};

// A value of an axis: a number, string or boolean (an array of them, one per key, on a tuple axis).
Status check_axis_value(const toml::node& x, size_t arity, const std::string& path, const std::string& key) {
  const auto scalar = [](const toml::node& n) { return !n.is_table() && !n.is_array(); };
  if (arity == 1) {
    if (scalar(x)) return Ok{};
    return error_at(path, x.source().begin, "grid." + key, "each value must be a number, string or boolean");
  }
  const toml::array* tuple = x.as_array();
  if (tuple == nullptr || tuple->size() != arity || !std::all_of(tuple->begin(), tuple->end(), scalar)) {
    return error_at(path, x.source().begin, "grid." + key,
                    "each value must be a list of " + std::to_string(arity) +
                        " values, one per key, e.g. [\"h100-sxm\", 4], got " + describe_value(x));
  }
  return Ok{};
}

// Flattens [grid] into axes with dotted keys.
Status read_grid(const toml::table& grid, const std::string& prefix, const std::string& path,
                 std::vector<FileAxis>& axes) {
  for (const auto& [k, v] : grid) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* t = v.as_table()) {
      if (Status s = read_grid(*t, key, path, axes); !s.ok()) return s;
      continue;
    }
    const toml::array* a = v.as_array();
    if (a == nullptr) {
      return error_at(path, v.source().begin, "grid." + key,
                      "expected a list of values, e.g. [1, 2, 4], got " + describe_value(v));
    }
    if (a->empty()) return error_at(path, v.source().begin, "grid." + key, "empty list: give at least one value");
    SweepAxis axis{key, {}, format_where(path, k.source().begin)};
    const size_t arity = axis.keys().size();
    for (const std::string& part : axis.keys()) {
      if (part.empty()) return error_at(path, k.source().begin, "grid." + key, "an empty key in the tuple");
    }
    for (const toml::node& x : *a) {
      if (Status s = check_axis_value(x, arity, path, key); !s.ok()) return s;
      x.visit([&](const auto& val) { axis.values.push_back(val); });
    }
    axes.push_back({std::move(axis), k.source().begin});
  }
  return Ok{};
}

// The first key that two axes share: "KEY" given at A and at B.
std::optional<std::string> repeated_key(const std::vector<SweepAxis>& grid) {
  for (size_t a = 0; a < grid.size(); ++a) {
    for (size_t b = a + 1; b < grid.size(); ++b) {
      for (const std::string& x : grid[a].keys()) {
        for (const std::string& y : grid[b].keys()) {
          if (x != y) continue;
          const auto at = [](const SweepAxis& axis) {
            return axis.origin.empty() ? "" : " (" + axis.origin + ")";
          };
          return "grid key '" + x + "' is given twice: as '" + grid[a].key + "'" + at(grid[a]) + " and as '" +
                 grid[b].key + "'" + at(grid[b]) + "; give each key in one axis only";
        }
      }
    }
  }
  return std::nullopt;
}

Result<SweepSpec> spec_from_table(const toml::table& root, const std::string& path) {
  SweepSpec spec;
  const TableFields f(root, path, "");
  if (Status s = f.check_known({"name", "log", "fixed", "grid"}); !s.ok()) return s.error();
  if (const toml::node* n = root.get("name")) {
    if (!n->is_string()) return f.expected("name", "a string");
    spec.name = n->as_string()->get();
  }
  if (const toml::node* n = root.get("log")) {
    const auto* s = n->as_string();
    if (s == nullptr || (s->get() != "summary" && s->get() != "requests" && s->get() != "iterations")) {
      return f.expected("log", "\"summary\", \"requests\" or \"iterations\"");
    }
    spec.log = s->get();
  }
  if (const toml::node* n = root.get("fixed")) {
    if (!n->is_table()) return f.expected("fixed", "a table of run configuration keys");
    spec.fixed = *n->as_table();
  }
  if (const toml::node* n = root.get("grid")) {
    if (!n->is_table()) return f.expected("grid", "a table of lists");
    std::vector<FileAxis> axes;
    if (Status s = read_grid(*n->as_table(), "", path, axes); !s.ok()) return s.error();
    // The file's order (TOML tables are read sorted by name): the last key written varies fastest.
    std::stable_sort(axes.begin(), axes.end(), [](const FileAxis& a, const FileAxis& b) {
      return a.where.line != b.where.line ? a.where.line < b.where.line : a.where.column < b.where.column;
    });
    for (FileAxis& a : axes) spec.grid.push_back(std::move(a.axis));
    if (auto repeated = repeated_key(spec.grid)) return Error{path + ": " + *repeated};
  }
  return spec;
}

void set_node(toml::table& table, const std::string& key, const toml::node& value, Status& status) {
  value.visit([&](const auto& v) {
    toml::table holder;
    holder.insert("v", v);
    if (Status s = set_path(table, key, std::move(*holder.get("v"))); !s.ok() && status.ok()) status = s;
  });
}

// Splits "a,b" at commas outside parentheses.
std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char c : text) {
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (c == ',' && depth == 0) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> SweepAxis::keys() const {
  std::vector<std::string> out(1);
  for (char c : key) {
    if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

const toml::node* SweepAxis::value(size_t i, size_t j) const {
  const toml::node* v = values.get(i);
  if (const toml::array* tuple = v->as_array()) return tuple->get(j);
  return v;
}

int64_t SweepSpec::num_points() const {
  int64_t n = 1;
  for (const SweepAxis& a : grid) {
    const auto k = static_cast<int64_t>(a.values.size());
    if (n > kMaxSweepPoints * 10 / std::max<int64_t>(k, 1)) return kMaxSweepPoints * 10;  // saturate
    n *= k;
  }
  return n;
}

std::vector<std::string> SweepSpec::keys() const {
  std::vector<std::string> out;
  for (const SweepAxis& a : grid) {
    for (std::string& k : a.keys()) out.push_back(std::move(k));
  }
  return out;
}

std::vector<const toml::node*> SweepSpec::values(int64_t point) const {
  std::vector<size_t> index(grid.size());
  for (size_t i = grid.size(); i-- > 0;) {
    const auto k = static_cast<int64_t>(grid[i].values.size());
    index[i] = static_cast<size_t>(point % k);
    point /= k;
  }
  std::vector<const toml::node*> out;
  for (size_t i = 0; i < grid.size(); ++i) {
    const size_t arity = grid[i].keys().size();
    for (size_t j = 0; j < arity; ++j) out.push_back(grid[i].value(index[i], j));
  }
  return out;
}

std::string SweepSpec::describe(int64_t point) const {
  std::string out;
  const std::vector<std::string> k = keys();
  const std::vector<const toml::node*> v = values(point);
  for (size_t i = 0; i < k.size(); ++i) out += (i ? " " : "") + k[i] + "=" + plain_value(*v[i]);
  return out;
}

Status SweepSpec::set_point(toml::table& table, int64_t point) const {
  Status status = Ok{};
  const std::vector<std::string> k = keys();
  const std::vector<const toml::node*> v = values(point);
  for (size_t i = 0; i < k.size(); ++i) set_node(table, k[i], *v[i], status);
  if (!status.ok()) return Error{"grid: " + status.error().message};
  return status;
}

toml::table SweepSpec::point_table(int64_t point) const {
  toml::table t = fixed;
  (void)set_point(t, point);  // checked by check_sweep
  if (!t.contains("log")) t.insert("log", log);
  if (!t.contains("name")) {
    t.insert("name", (name.empty() ? std::string("sweep") : name) + " [" + describe(point) + "]");
  }
  return t;
}

std::string SweepSpec::to_toml() const {
  toml::table t;
  if (!name.empty()) t.insert("name", name);
  t.insert("log", log);
  // Without the database: the definition is the same wherever it runs (shards of one sweep in
  // several files are then one sweep to `sim merge`).
  toml::table base = fixed;
  base.erase("db");
  t.insert("fixed", std::move(base));
  toml::table g;
  for (const SweepAxis& a : grid) g.insert(a.key, a.values);  // dotted keys stay quoted
  t.insert("grid", std::move(g));
  std::ostringstream out;
  out << toml::toml_formatter(t);
  return out.str();
}

Result<SweepSpec> load_sweep_file(const std::string& path) {
  Result<std::string> text = read_text_file(path);
  if (!text.ok()) return text.error();
  Result<toml::table> parsed = parse_toml(text.value(), path);
  if (!parsed.ok()) return parsed.error();
  Result<SweepSpec> spec = spec_from_table(parsed.value(), path);
  // Its files are found beside it first, as a workload file's [replay] path is.
  if (spec.ok()) absolutize_paths(spec.value(), std::filesystem::path(path).parent_path().string());
  return spec;
}

namespace {

// Whether a configuration key's value names a file (or a preset, which stays as it is named).
bool names_a_file(const std::string& key) {
  const auto ends_with = [&](std::string_view tail) {
    return key.size() >= tail.size() && key.compare(key.size() - tail.size(), tail.size(), tail) == 0;
  };
  return key == "trace" || key == "hardware" || key == "model" || key == "engine.weights" ||
         (key.rfind("replicas[", 0) == 0 && ends_with(".hardware"));
}

// `node`'s string made absolute when it is a relative path to a file under `base`.
void absolutize(toml::node* node, const std::filesystem::path& base) {
  auto* s = node != nullptr ? node->as_string() : nullptr;
  if (s == nullptr || s->get().empty()) return;
  const std::filesystem::path p(s->get());
  std::error_code ec;
  if (p.is_absolute() || !std::filesystem::is_regular_file(base / p, ec)) return;
  *s = std::filesystem::absolute(base / p, ec).lexically_normal().string();
}

}  // namespace

std::vector<std::string> overridden_keys(const SweepSpec& spec) {
  std::vector<std::string> out;
  for (const std::string& key : spec.keys()) {
    // Walk the fixed configuration along the key's dotted parts ("replicas[1].count" too).
    const toml::node* at = &static_cast<const toml::node&>(spec.fixed);
    std::string_view rest = key;
    while (at != nullptr && !rest.empty()) {
      const size_t dot = rest.find('.');
      std::string_view part = rest.substr(0, dot);
      rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
      const size_t open = part.find('[');
      const toml::table* t = at->as_table();
      at = t != nullptr ? t->get(part.substr(0, open)) : nullptr;
      if (at != nullptr && open != std::string_view::npos) {
        const toml::array* a = at->as_array();
        const size_t index = static_cast<size_t>(std::strtoull(std::string(part.substr(open + 1)).c_str(), nullptr, 10));
        at = a != nullptr ? a->get(index) : nullptr;
      }
    }
    if (at != nullptr && !at->is_table() && !at->is_array()) out.push_back(key + " = " + describe_value(*at));
  }
  return out;
}

namespace {

// Calls `f` on every value of `spec` that names a file (or a preset): the fixed trace, hardware,
// model, engine weights and groups' hardware, and the grid's values of such keys.
template <typename F>
void for_each_file_value(SweepSpec& spec, F f) {
  for (const char* key : {"trace", "hardware", "model"}) f(spec.fixed.get(key), key);
  if (toml::table* engine = spec.fixed.get_as<toml::table>("engine")) f(engine->get("weights"), "engine.weights");
  if (toml::array* groups = spec.fixed.get_as<toml::array>("replicas")) {
    for (toml::node& g : *groups) {
      if (toml::table* t = g.as_table()) f(t->get("hardware"), "replicas.hardware");
    }
  }
  for (SweepAxis& a : spec.grid) {
    const std::vector<std::string> keys = a.keys();
    for (toml::node& v : a.values) {
      for (size_t j = 0; j < keys.size(); ++j) {
        if (names_a_file(keys[j])) f(v.is_array() ? v.as_array()->get(j) : &v, keys[j]);
      }
    }
  }
}

}  // namespace

void absolutize_paths(SweepSpec& spec, const std::string& base_dir) {
  const std::filesystem::path base = base_dir.empty() ? std::filesystem::path(".") : std::filesystem::path(base_dir);
  for_each_file_value(spec, [&](toml::node* node, const std::string&) { absolutize(node, base); });
}

Status check_no_shadowed_presets(SweepSpec& spec) {
  Status out = Ok{};
  for_each_file_value(spec, [&](toml::node* node, const std::string& key) {
    const auto* s = node != nullptr ? node->as_string() : nullptr;
    if (!out.ok() || s == nullptr || s->get().empty()) return;
    const std::filesystem::path p(s->get());
    std::error_code ec;
    // A stored name that is still relative named a preset when the sweep was defined (files were
    // stored by absolute path): a file of that name here would be run instead.
    if (!p.is_absolute() && std::filesystem::is_regular_file(p, ec)) {
      out = Error{key + " = \"" + s->get() + "\" named a preset when the sweep was defined, and ./" + s->get() +
                  " in this folder would be read instead: resume from another folder"};
    }
  });
  return out;
}

Result<SweepSpec> parse_sweep_spec(const std::string& text, const std::string& where,
                                   const std::vector<std::string>& keys) {
  Result<toml::table> parsed = parse_toml(text, where);
  if (!parsed.ok()) return parsed.error();
  // Stored keys are flat and dotted: read them as they are.
  SweepSpec spec;
  const toml::table& root = parsed.value();
  if (const auto* n = root.get_as<std::string>("name")) spec.name = n->get();
  if (const auto* n = root.get_as<std::string>("log")) spec.log = n->get();
  if (const auto* f = root.get_as<toml::table>("fixed")) spec.fixed = *f;
  if (const auto* g = root.get_as<toml::table>("grid")) {
    for (const auto& [k, v] : *g) {
      if (const toml::array* a = v.as_array()) spec.grid.push_back({std::string(k.str()), *a, where});
    }
  }
  // The points were numbered in the order of sweeps.keys, which the [grid] table does not keep.
  const auto rank = [&](const SweepAxis& a) {
    const auto at = std::find(keys.begin(), keys.end(), a.keys().front());
    return at - keys.begin();
  };
  std::stable_sort(spec.grid.begin(), spec.grid.end(),
                   [&](const SweepAxis& a, const SweepAxis& b) { return rank(a) < rank(b); });
  if (spec.keys() != keys) {
    std::string stored;
    for (const std::string& k : keys) stored += (stored.empty() ? "" : ",") + k;
    return Error{where + ": its definition's grid does not match its keys (" + stored +
                 "); the database was changed by hand?"};
  }
  return spec;
}

Result<SweepAxis> parse_grid_flag(const std::string& token) {
  const size_t eq = token.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Error{"--grid '" + token + "': expected KEY=V1,V2,..., e.g. --grid replicas=1,2,4, or "
                 "KEY1,KEY2=(A1,A2),(B1,B2), e.g. --grid hardware,tp=(a100-80gb,8),(h100-sxm,4)"};
  }
  SweepAxis axis{token.substr(0, eq), {}, "--grid " + token.substr(0, eq)};
  const size_t arity = axis.keys().size();
  for (const std::string& k : axis.keys()) {
    if (k.empty()) return Error{"--grid '" + token + "': an empty key"};
  }
  const std::string list = token.substr(eq + 1);
  if (list.empty()) return Error{"--grid '" + token + "': empty list of values"};
  for (const std::string& item : split_top_level(list)) {
    if (item.empty()) return Error{"--grid '" + token + "': an empty value in the list"};
    if (arity == 1) {
      value_from_text(item).for_each([&](const auto& x) { axis.values.push_back(x); });
      continue;
    }
    if (item.size() < 2 || item.front() != '(' || item.back() != ')') {
      return Error{"--grid '" + token + "': '" + item + "': expected a tuple of " + std::to_string(arity) +
                   " values in parentheses, one per key, e.g. (h100-sxm,4)"};
    }
    const std::vector<std::string> parts = split_top_level(item.substr(1, item.size() - 2));
    if (parts.size() != arity) {
      return Error{"--grid '" + token + "': '" + item + "' has " + std::to_string(parts.size()) +
                   " values; the keys " + axis.key + " need " + std::to_string(arity)};
    }
    toml::array tuple;
    for (const std::string& part : parts) {
      if (part.empty()) return Error{"--grid '" + token + "': an empty value in '" + item + "'"};
      value_from_text(part).for_each([&](const auto& x) { tuple.push_back(x); });
    }
    axis.values.push_back(std::move(tuple));
  }
  return axis;
}

Status add_grid_flag(SweepSpec& spec, SweepAxis axis) {
  for (auto it = spec.grid.begin(); it != spec.grid.end(); ++it) {
    const bool from_flag = it->origin.rfind("--grid", 0) == 0;
    if (it->key == axis.key && !from_flag) {  // the flag overrides the file's axis
      *it = std::move(axis);
      return Ok{};
    }
  }
  spec.grid.push_back(std::move(axis));
  if (auto repeated = repeated_key(spec.grid)) return Error{*repeated};
  return Ok{};
}

std::string sweep_db_path(const SweepSpec& spec) {
  if (const auto* db = spec.fixed.get_as<std::string>("db")) return db->get();
  return RunConfig{}.db;
}

namespace {

// An axis's keys are distinct and not `db`; its values are distinct (a value twice would run the
// same configuration twice, under two point numbers).
Status check_axis(const SweepAxis& a) {
  const std::vector<std::string> keys = a.keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == "db") return Error{"grid key 'db': every point of a sweep writes to one database"};
    for (size_t j = 0; j < i; ++j) {
      if (keys[j] == keys[i]) return Error{"grid '" + a.key + "': the key '" + keys[i] + "' is given twice"};
    }
  }
  if (a.values.empty()) return Error{"grid key '" + a.key + "': empty list of values"};
  // Values compare as what they mean: 4, 4.0 and 4e0 are one number.
  const auto same = [](const toml::node& x) {
    if (!x.is_number()) return describe_value(x);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", x.value_or(0.0));
    return std::string(buf);
  };
  std::vector<std::string> seen;
  for (const toml::node& v : a.values) {
    std::string text, key;
    if (const toml::array* tuple = v.as_array()) {
      for (const toml::node& x : *tuple) {
        text += (text.empty() ? "(" : ", ") + describe_value(x);
        key += same(x) + "\n";
      }
      text += ")";
    } else {
      text = describe_value(v);
      key = same(v);
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return Error{"grid key '" + a.key + "': the value " + text + " is given twice"};
    }
    seen.push_back(key);
  }
  return Ok{};
}

}  // namespace

namespace {

// Point p's configuration: its policy and router made, its load controls and files checked. The
// message without the point's prefix.
Status check_point_config(const RunConfig& c) {
  Result<const PolicyInfo*> policy = find_policy(c.policy);
  if (!policy.ok()) return Error{"policy.name: " + policy.error().message};
  if (auto made = policy.value()->make(c.policy_options); !made.ok()) return made.error();
  if (Status s = check_load_controls(load_controls(c)); !s.ok()) return s;
  Result<const RouterInfo*> router = find_router(c.router);
  if (!router.ok()) return Error{"router.name: " + router.error().message};
  if (auto made = router.value()->make(c.router_options, 0); !made.ok()) return made.error();
  if (router.value()->needs_prefix_caching && !policy.value()->prefix_caching) {
    return Error{"router.name: " + c.router + " routes by the replicas' prefix caches, which policy " +
                 c.policy + " does not keep: use policy.name = \"prefix-cached\""};
  }
  const std::pair<const std::string*, PresetKind> names[] = {
      {&c.trace, PresetKind::kWorkload}, {&c.hardware, PresetKind::kHardware}, {&c.model, PresetKind::kModel}};
  for (const auto& [value, kind] : names) {
    if (value->empty()) continue;
    auto r = resolve_preset(*value, kind, kind == PresetKind::kWorkload ? "trace"
                                          : kind == PresetKind::kHardware ? "hardware" : "model");
    if (!r.ok()) return r.error();
    if (kind == PresetKind::kWorkload && c.burstiness > 0 && !is_generated_workload_file(r.value())) {
      return Error{"burstiness: applies to generated workloads ([generate]); " + *value +
                   " lists its requests, whose arrivals keep their own burstiness"};
    }
  }
  return Ok{};
}

// Point p, resolved and checked.
Status check_point(const SweepSpec& spec, int64_t p) {
  const std::string prefix = "point " + std::to_string(p) + " (" + spec.describe(p) + "): ";
  toml::table table = spec.fixed;
  if (Status s = spec.set_point(table, p); !s.ok()) return Error{prefix + s.error().message};
  Result<RunConfig> config = resolve_config(spec.point_table(p));
  if (!config.ok()) return Error{prefix + config.error().message};
  if (config.value().trace.empty()) return Error{"no workload: give --trace FILE or trace in [fixed]"};
  if (Status s = check_point_config(config.value()); !s.ok()) return Error{prefix + s.error().message};
  return Ok{};
}

}  // namespace

Status check_sweep(const SweepSpec& spec) {
  if (spec.grid.empty()) {
    return Error{"the sweep has no grid: give --grid KEY=V1,V2 (e.g. --grid replicas=1,2,4) or a [grid] table"};
  }
  for (const SweepAxis& a : spec.grid) {
    if (Status s = check_axis(a); !s.ok()) return s;
  }
  if (auto repeated = repeated_key(spec.grid)) return Error{*repeated};
  const int64_t n = spec.num_points();
  if (n > kMaxSweepPoints) {
    return Error{"the grid has " + (n >= kMaxSweepPoints * 10 ? "over 10^7" : std::to_string(n)) +
                 " points; at most " + std::to_string(kMaxSweepPoints) + " run in one sweep"};
  }
  // Each distinct value of each key is checked once, in the first point that has it (a full check
  // of every point would cost a million resolutions on a large grid).
  std::vector<int64_t> probes = {0};
  int64_t stride = 1;
  for (size_t i = spec.grid.size(); i-- > 0;) {
    const auto k = static_cast<int64_t>(spec.grid[i].values.size());
    for (int64_t j = 1; j < k; ++j) probes.push_back(j * stride);
    stride *= k;
  }
  for (const int64_t p : probes) {
    if (Status s = check_point(spec, p); !s.ok()) return s;
  }
  return Ok{};
}


}  // namespace servesim
