#include "sim/config/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "sim/config/options.h"
#include "sim/request.h"
#include "sim/config/toml_fields.h"

namespace servesim {

Result<toml::table> load_config_file(const std::string& path) {
  Result<std::string> text = read_text_file(path);
  if (!text.ok()) return text.error();
  return parse_toml(text.value(), path);
}

namespace {

// "replicas[1]" -> ("replicas", 1); a part without an index -> (part, -1); a malformed index -> -2.
std::pair<std::string_view, int64_t> split_index(std::string_view part) {
  const size_t open = part.find('[');
  if (open == std::string_view::npos) return {part, -1};
  if (part.back() != ']' || open == 0) return {part, -2};
  const std::string_view digits = part.substr(open + 1, part.size() - open - 2);
  int64_t index = -2;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || index < 0) return {part, -2};
  if (digits.size() > 1 && digits.front() == '0') return {part, -2};  // replicas[01] would be a second name of [1]
  return {part.substr(0, open), index};
}

Status with_set_prefix(Status s) {
  if (s.ok()) return s;
  return Error{"--set " + s.error().message};
}

}  // namespace

Status set_path(toml::table& table, std::string_view dotted_key, toml::node&& value) {
  const std::string key(dotted_key);
  toml::table* t = &table;
  std::string_view rest = dotted_key;
  while (true) {
    const size_t dot = rest.find('.');
    const auto [part, index] = split_index(rest.substr(0, dot));
    if (part.empty()) return Error{key + ": empty key part"};
    if (index == -2) {
      return Error{key + ": '" + std::string(rest.substr(0, dot)) +
                   "': expected NAME[INDEX], the index without leading zeros, e.g. replicas[0].count (the first "
                   "[[replicas]] group)"};
    }
    toml::node* child = t->get(part);
    if (index >= 0) {  // an element of an array of tables: [[replicas]] groups
      toml::array* groups = child != nullptr ? child->as_array() : nullptr;
      const size_t n = groups != nullptr ? groups->size() : 0;
      if (groups == nullptr || static_cast<size_t>(index) >= n || !(*groups)[static_cast<size_t>(index)].is_table()) {
        return Error{key + ": the configuration has " +
                     (groups == nullptr ? "no [[" + std::string(part) + "]] tables"
                                        : std::to_string(n) + " [[" + std::string(part) + "]] tables (" +
                                              std::string(part) + "[0] to " + std::string(part) + "[" +
                                              std::to_string(n == 0 ? 0 : n - 1) + "])")};
      }
      if (dot == std::string_view::npos) {
        return Error{key + ": name a key of the table, e.g. " + std::string(part) + "[" +
                     std::to_string(index) + "].count"};
      }
      t = (*groups)[static_cast<size_t>(index)].as_table();
      rest = rest.substr(dot + 1);
      continue;
    }
    if (dot == std::string_view::npos) {
      if (child != nullptr && child->is_array_of_tables() && !value.is_array_of_tables()) {
        // [[replicas]] groups would silently become one number: the groups' counts say it.
        return Error{key + ": the configuration gives [[" + key + "]] groups, which this would "
                     "replace; set a group's key instead (" + key + "[0].count, " + key + "[1].count, ...), "
                     "or drop the groups"};
      }
      t->insert_or_assign(part, std::move(value));
      return Ok{};
    }
    if (child == nullptr) {
      t->insert(part, toml::table{});
      child = t->get(part);
    }
    if (!child->is_table()) {
      return Error{key + ": '" + std::string(part) + "' is a value, not a table"};
    }
    t = child->as_table();
    rest = rest.substr(dot + 1);
  }
}

Status apply_set(toml::table& table, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Error{"--set '" + std::string(assignment) + "': expected key=value, e.g. --set kv.blocks=512"};
  }
  const std::string_view key = assignment.substr(0, eq);
  const std::string text(assignment.substr(eq + 1));
  toml::table parsed;
  bool is_value = false;
  try {
    parsed = toml::parse("v = " + text);
    is_value = parsed.size() == 1 && parsed.contains("v");
  } catch (const toml::parse_error&) {
    is_value = false;
  }
  if (is_value) {
    // Copy the value without its source position: messages then say "command line".
    toml::node* v = parsed.get("v");
    toml::table holder;
    v->visit([&](const auto& x) { holder.insert("v", x); });
    return with_set_prefix(set_path(table, key, std::move(*holder.get("v"))));
  }
  if (text.empty()) return Error{"--set " + std::string(key) + ": empty value"};
  return with_set_prefix(set_path(table, key, toml::value<std::string>(text)));
}

Status apply_goodput_token(std::string_view token, toml::table& table) {
  const size_t colon = token.find(':');
  const std::string name(token.substr(0, colon));
  const std::string quoted = "--goodput '" + std::string(token) + "'";
  if (colon == std::string_view::npos) {
    return Error{quoted + ": expected KEY:MILLISECONDS with KEY ttft, tpot or e2el, e.g. ttft:2000"};
  }
  if (name != "ttft" && name != "tpot" && name != "e2el") {
    return Error{quoted + ": unknown SLO '" + name + "' (known: ttft, tpot, e2el)"};
  }
  const std::string number(token.substr(colon + 1));
  char* end = nullptr;
  const double ms = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !(ms > 0) || !std::isfinite(ms)) {
    return Error{quoted + ": expected a number of milliseconds > 0 after '" + name + ":', got '" +
                 number + "'"};
  }
  return set_path(table, "goodput." + name, toml::value<double>(ms));
}

NodePrice node_price(const RunConfig& c, int32_t file_gpus, double file_node_price, double gpu_price) {
  NodePrice n;
  n.gpus = c.gpus_per_node > 0 ? c.gpus_per_node : file_gpus;
  n.per_hour = c.node_price_per_hour_usd >= 0                      ? c.node_price_per_hour_usd
               : c.price_per_hour_usd >= 0 || c.gpus_per_node > 0 ? n.gpus * gpu_price
                                                                   : file_node_price;
  return n;
}

namespace {

constexpr int64_t kMax32 = INT32_MAX;

// The top level's plain keys: the files, the database, the engine's limits.
void read_top_level(OptionReader& top, const toml::table& table, RunConfig& c) {
  c.trace = top.string("trace", "");
  c.backend = top.string("backend", c.backend);
  c.hardware = top.string("hardware", "");
  c.model = top.string("model", "");
  c.db = top.string("db", c.db);
  c.db_sync = top.choice("db_sync", c.db_sync, {"off", "normal", "full"});
  c.name = top.string("name", "");
  if (table.contains("seed")) {
    c.seed = static_cast<uint64_t>(top.integer("seed", 0, 0, INT64_MAX));
  } else {
    top.allow("seed");
  }
  c.max_num_seqs = static_cast<int32_t>(top.integer("max_num_seqs", c.max_num_seqs, 1, 1 << 20));
  c.max_num_batched_tokens = static_cast<int32_t>(
      top.integer("max_num_batched_tokens", c.max_num_batched_tokens, 1, kMax32));
  c.max_tokens = static_cast<int32_t>(top.integer("max_tokens", c.max_tokens, 1, kMaxTokens));
  c.max_model_len = top.integer("max_model_len", c.max_model_len, 1, kMaxTokens);
  c.dtype = top.choice("dtype", "", {"fp16", "bf16", "fp32", "fp8", "int8", "int4", "fp4", "float16", "bfloat16", "float32"});
  c.gpu_memory_utilization = top.number("gpu_memory_utilization", c.gpu_memory_utilization, 0.01, 1.0);
  c.tp = static_cast<int32_t>(top.integer("tp", c.tp, 1, 1024));
  c.pp = static_cast<int32_t>(top.integer("pp", c.pp, 1, 1024));
  c.dp = static_cast<int32_t>(top.integer("dp", c.dp, 1, 1024));
  c.enable_expert_parallel = top.boolean("enable_expert_parallel", c.enable_expert_parallel);
  c.enforce_eager = top.boolean("enforce_eager", c.enforce_eager);
  if (table.contains("async_scheduling")) {
    c.async_scheduling = top.boolean("async_scheduling", true) ? 1 : 0;
  } else {
    top.allow("async_scheduling");
  }
}

// One [[replicas]] group's keys (its [replicas.policy] options are moved later, by move_options).
Status read_replica_group(const toml::table& group, const std::string& name, ReplicaGroup& rg) {
  OptionReader r(group, name);
  rg.count = static_cast<int32_t>(r.integer("count", 0, 1, 4096));
  rg.hardware = r.string("hardware", "");
  rg.tp = static_cast<int32_t>(r.integer("tp", 0, 1, 1024));
  rg.role = r.choice("role", "", {"prefill", "decode"});
  rg.max_num_seqs = static_cast<int32_t>(r.integer("max_num_seqs", 0, 1, 1 << 20));
  rg.max_num_batched_tokens = static_cast<int32_t>(r.integer("max_num_batched_tokens", 0, 1, kMax32));
  if (const toml::table* policy = r.table("policy")) {
    OptionReader p(*policy, name + ".policy");
    rg.has_policy = true;
    rg.policy = p.string("name", "");
    if (!p.ok()) return p.error();
  }
  r.reject_unknown();
  if (!r.ok()) return r.error();
  if (!group.contains("count")) return Error{where(group) + ": " + name + ": count is required"};
  return Ok{};
}

// Disaggregated groups (they have roles) need a group of each role.
void refuse_missing_pool(OptionReader& top, const RunConfig& c) {
  if (!top.ok() || c.replica_groups.empty() || c.replica_groups.front().role.empty()) return;
  for (const char* role : {"prefill", "decode"}) {
    if (std::none_of(c.replica_groups.begin(), c.replica_groups.end(),
                     [&](const ReplicaGroup& rg) { return rg.role == role; })) {
      top.refuse("replicas", std::string("disaggregated serving needs a ") + role +
                                 " pool: no [[replicas]] group has role = \"" + role + "\"");
      return;
    }
  }
}

// A key every group sets for itself would be used by none: refused, not silently dropped (a
// --hardware flag, a grid over tp, beside groups that each name theirs).
void refuse_overridden_keys(OptionReader& top, const toml::table& table, const RunConfig& c) {
  const std::pair<const char*, bool (*)(const ReplicaGroup&)> overridden[] = {
      {"hardware", [](const ReplicaGroup& g) { return !g.hardware.empty(); }},
      {"tp", [](const ReplicaGroup& g) { return g.tp > 0; }},
      {"max_num_seqs", [](const ReplicaGroup& g) { return g.max_num_seqs > 0; }},
      {"max_num_batched_tokens", [](const ReplicaGroup& g) { return g.max_num_batched_tokens > 0; }}};
  for (const auto& [key, sets] : overridden) {
    if (top.ok() && table.contains(key) && !c.replica_groups.empty() &&
        std::all_of(c.replica_groups.begin(), c.replica_groups.end(), sets)) {
      top.refuse(key, std::string("every [[replicas]] group sets its own ") + key +
                          ", so this one would be used by none: set it in the groups (replicas[0]." + key +
                          ", ...), or leave a group without it to take this one");
    }
  }
  const toml::table* top_policy = table.get_as<toml::table>("policy");
  if (top.ok() && top_policy != nullptr && top_policy->contains("name") &&
      std::all_of(c.replica_groups.begin(), c.replica_groups.end(),
                  [](const ReplicaGroup& g) { return !g.policy.empty(); })) {
    top.refuse("policy", "name: every [[replicas]] group names its own policy, so this one would be used by "
                         "none: set it in the groups (replicas[0].policy.name, ...), or leave a group's "
                         "policy without a name to take this one");
  }
}

// [[replicas]] count = 4, hardware = "h100-sxm", tp = 2: groups of a mixed deployment; or the
// top level's replicas.
Status read_replicas(OptionReader& top, const toml::table& table, RunConfig& c) {
  const toml::array* groups = table.get_as<toml::array>("replicas");
  if (groups == nullptr) {
    c.replicas = static_cast<int32_t>(top.integer("replicas", c.replicas, 1, 4096));
    return Ok{};
  }
  top.allow("replicas");
  if (groups->empty()) top.refuse("replicas", "expected at least one [[replicas]] group (count, hardware, tp)");
  int64_t total = 0;
  for (size_t g = 0; g < groups->size() && top.ok(); ++g) {
    const toml::table* group = (*groups)[g].as_table();
    const std::string name = "replicas[" + std::to_string(g) + "]";
    if (group == nullptr) {
      top.refuse("replicas", name + ": expected a table with count, hardware and tp ([[replicas]])");
      break;
    }
    ReplicaGroup rg;
    if (Status s = read_replica_group(*group, name, rg); !s.ok()) return s;
    if (g > 0 && rg.role.empty() != c.replica_groups.front().role.empty()) {
      return Error{where(*group) + ": " + name + ": role: either every [[replicas]] group has a role " +
                   "(prefill or decode: disaggregated serving) or none has"};
    }
    total += rg.count;
    c.replica_groups.push_back(std::move(rg));
  }
  refuse_missing_pool(top, c);
  if (top.ok() && total > 4096) top.refuse("replicas", "the groups add up to " + std::to_string(total) + " replicas; at most 4096");
  c.replicas = static_cast<int32_t>(total);
  refuse_overridden_keys(top, table, c);
  return Ok{};
}

// prefill_replicas and decode_replicas: two pools of the run's hardware, a prefill group, then a
// decode group.
void read_pools(OptionReader& top, const toml::table& table, RunConfig& c) {
  if (!top.has("prefill_replicas") && !top.has("decode_replicas")) return;
  const int64_t prefill = top.integer("prefill_replicas", 0, 1, 4096);
  const int64_t decode = top.integer("decode_replicas", 0, 1, 4096);
  if (!top.ok()) return;
  const char* given = !top.has("prefill_replicas") ? "decode_replicas" : !top.has("decode_replicas") ? "prefill_replicas" : nullptr;
  if (given != nullptr) {
    top.refuse(given, std::string("disaggregated serving needs both pools: give ") +
                          (given[0] == 'p' ? "decode_replicas (--decode-replicas M)" : "prefill_replicas (--prefill-replicas N)") +
                          " too");
  } else if (!c.replica_groups.empty()) {
    top.refuse("prefill_replicas", "the configuration gives [[replicas]] groups too; give the pools as "
                                   "groups with role = \"prefill\" and role = \"decode\", or drop the groups");
  } else if (table.contains("replicas")) {
    top.refuse("prefill_replicas", "cannot be combined with replicas (" + std::to_string(c.replicas) +
                                       "): the pools' sizes make the replicas");
  } else if (prefill + decode > 4096) {
    top.refuse("prefill_replicas", "the pools add up to " + std::to_string(prefill + decode) + " replicas; at most 4096");
  } else {
    for (const auto& [count, role] : {std::pair{prefill, "prefill"}, std::pair{decode, "decode"}}) {
      ReplicaGroup pool;
      pool.count = static_cast<int32_t>(count);
      pool.role = role;
      c.replica_groups.push_back(std::move(pool));
    }
    c.replicas = static_cast<int32_t>(prefill + decode);
  }
}

// [disaggregation]: the KV link between the pools.
Status read_disaggregation(OptionReader& top, RunConfig& c) {
  const toml::table* d = top.table("disaggregation");
  if (d == nullptr) return Ok{};
  OptionReader r(*d, "disaggregation");
  c.link_gbs = r.number("link_gbs", 0, 1e-6, 1e6);
  c.link_latency_us = r.number("link_latency_us", -1, 0, 1e9);
  r.reject_unknown();
  if (!r.ok()) return r.error();
  if (top.ok() && !c.disaggregated()) {
    top.refuse("disaggregation", "the run is not disaggregated: give --prefill-replicas N --decode-replicas M, "
                                 "or [[replicas]] groups with role = \"prefill\" and \"decode\"");
  }
  return Ok{};
}

// The load controls, the prices, and what the run logs and how it runs.
void read_load_and_logging(OptionReader& top, const toml::table& table, RunConfig& c) {
  c.hardware_sample = top.integer("hardware_sample", -1, -1, 1'000'000);
  const double inf = std::numeric_limits<double>::infinity();
  c.request_rate = top.number("request_rate", 0, 1e-9, inf);
  c.burstiness = top.number("burstiness", 0, 1e-4, inf);
  c.time_scale = top.number("time_scale", 0, 1e-9, 1e9);
  c.rate_scale = top.number("rate_scale", 0, 1e-9, 1e9);
  c.num_prompts = top.integer("num_prompts", 0, 1, 10'000'000'000LL);
  c.max_concurrency = top.integer("max_concurrency", 0, 1, INT32_MAX);
  c.price_per_hour_usd = top.number("price_per_hour_usd", -1, 0, 1e6);
  c.price_by_node = top.choice("price_by", "gpu", {"gpu", "node"}) == "node";
  c.gpus_per_node = static_cast<int32_t>(top.integer("gpus_per_node", 0, 1, 1024));
  c.node_price_per_hour_usd = top.number("node_price_per_hour_usd", -1, 0, 1e7);
  c.log = top.choice("log", "", {"iterations", "requests", "summary"});
  if (const toml::node* n = table.get("log_resolution")) {  // seconds, or "auto" (0, the default)
    top.allow("log_resolution");
    const std::optional<double> seconds = n->is_number() ? n->value<double>() : std::nullopt;
    if (seconds && *seconds >= 1e-6 && *seconds <= 1e9) {
      c.log_resolution = *seconds;
    } else if (n->value<std::string>() != "auto") {
      top.fail(*n, "log_resolution", "a number of seconds in [1e-06, 1e+09], or \"auto\"");
    }
  }
  c.leap = top.boolean("leap", c.leap);
  c.threads = static_cast<int32_t>(top.integer("threads", c.threads, 0, 4096));
  if (top.has("metric_percentiles")) {
    Result<std::vector<double>> list = parse_percentile_list(top.string("metric_percentiles", ""));
    if (list.ok()) {
      c.metric_percentiles = list.value();
    } else {
      top.refuse("metric_percentiles", list.error().message);
    }
  }
}

// The sections of their own: [goodput], [policy], [router], [kv], [engine].
// kv.full_groups, kv.windowed_groups, kv.window, kv.window_kind, kv.state_groups: a hybrid layout's
// groups (sim/kv_groups.h), as the cross-check drives vLLM's scheduler with them.
Status read_kv_groups(const toml::table& table, OptionReader& k, RunConfig& c) {
  const bool given = table.contains("full_groups") || table.contains("windowed_groups") ||
                     table.contains("window") || table.contains("window_kind") || table.contains("state_groups");
  if (!given) return Ok{};
  KvGroups g;
  g.extra_full = static_cast<int32_t>(k.integer("full_groups", 1, 1, 1024)) - 1;
  g.windowed = static_cast<int32_t>(k.integer("windowed_groups", 0, 0, 1024));
  g.window = k.integer("window", 0, 1, kMax32);
  g.chunked = k.choice("window_kind", "sliding", {"sliding", "chunked"}) == "chunked";
  g.state = static_cast<int32_t>(k.integer("state_groups", 0, 0, 1024));
  if (!k.ok()) return k.error();
  if (g.windowed > 0 && g.window == 0) k.refuse("windowed_groups", "needs kv.window (tokens)");
  if (g.windowed == 0 && table.contains("window")) k.refuse("window", "needs kv.windowed_groups >= 1");
  if (!k.ok()) return k.error();
  c.kv_groups = g;
  return Ok{};
}

Status read_sections(OptionReader& top, RunConfig& c) {
  if (const toml::table* goodput = top.table("goodput")) {
    OptionReader g(*goodput, "goodput");
    c.slo_ttft = g.number("ttft", 0, 1e-6, 1e12) / 1e3;  // milliseconds, as vLLM's --goodput
    c.slo_tpot = g.number("tpot", 0, 1e-6, 1e12) / 1e3;
    c.slo_e2el = g.number("e2el", 0, 1e-6, 1e12) / 1e3;
    g.reject_unknown();
    if (!g.ok()) return g.error();
  }
  if (const toml::table* policy = top.table("policy")) {
    OptionReader p(*policy, "policy");
    c.policy = p.string("name", c.policy);
    if (!p.ok()) return p.error();
  }
  if (const toml::table* router = top.table("router")) {
    OptionReader r(*router, "router");
    c.router = r.string("name", c.router);
    c.session_affinity = r.boolean("session_affinity", c.session_affinity);
    if (!r.ok()) return r.error();
  }
  if (const toml::table* kv = top.table("kv")) {
    OptionReader k(*kv, "kv");
    c.block_size = static_cast<int32_t>(k.integer("block_size", c.block_size, 1, 1 << 16));
    c.kv_blocks = k.integer("blocks", c.kv_blocks, 1, kMax32);
    c.kv_dtype = k.choice("dtype", "", {"fp16", "bf16", "fp8", "int4", "float16", "bfloat16"});
    if (Status s = read_kv_groups(*kv, k, c); !s.ok()) return s;
    k.reject_unknown();
    if (!k.ok()) return k.error();
  }
  if (const toml::table* moe = top.table("moe")) {
    OptionReader m(*moe, "moe");
    c.moe_routing_skew = m.number("routing_skew", 0, 0, 10);
    m.reject_unknown();
    if (!m.ok()) return m.error();
  }
  if (const toml::table* engine = top.table("engine")) {
    OptionReader e(*engine, "engine");
    c.engine_weights = e.string("weights", "");
    c.engine_profile = e.string("profile", "");
    e.reject_unknown();
    if (!e.ok()) return e.error();
  }
  return Ok{};
}

// The policies' and the router's own options, moved out of `table` (moving keeps each value's file
// position for their messages).
void move_options(toml::table& table, RunConfig& c) {
  if (toml::table* policy = table.get_as<toml::table>("policy")) {
    c.policy_options = std::move(*policy);
    c.policy_options.erase("name");
  }
  if (toml::array* groups = table.get_as<toml::array>("replicas")) {
    // The groups' own policy options, moved too.
    for (size_t g = 0; g < groups->size() && g < c.replica_groups.size(); ++g) {
      toml::table* policy = (*groups)[g].as_table() ? (*groups)[g].as_table()->get_as<toml::table>("policy") : nullptr;
      if (policy == nullptr) continue;
      c.replica_groups[g].policy_options = std::move(*policy);
      c.replica_groups[g].policy_options.erase("name");
    }
  }
  if (toml::table* router = table.get_as<toml::table>("router")) {
    c.router_options = std::move(*router);
    c.router_options.erase("name");
    c.router_options.erase("session_affinity");
  }
}

// Keys that are each fine alone but not together.
Status check_combinations(const RunConfig& c) {
  if (c.rate_scale > 0 && (c.time_scale > 0 || c.request_rate > 0)) {
    return Error{std::string("rate_scale: cannot be combined with ") + (c.time_scale > 0 ? "time_scale" : "request_rate") +
                 " (rate_scale F is time_scale 1/F; request_rate re-times arrivals to a mean rate); give one of them"};
  }
  if (c.request_rate > 0 && c.time_scale > 0) {
    return Error{"time_scale: cannot be combined with request_rate (request_rate re-times arrivals "
                 "to a mean rate; time_scale multiplies them); give one of the two"};
  }
  if (c.max_num_batched_tokens < c.max_num_seqs) {
    return Error{"max_num_batched_tokens (" + std::to_string(c.max_num_batched_tokens) +
                 ") must be at least max_num_seqs (" + std::to_string(c.max_num_seqs) +
                 "), as vLLM requires: every running sequence needs a token each iteration"};
  }
  return Ok{};
}

}  // namespace

Result<RunConfig> resolve_config(toml::table table) {
  RunConfig c;
  OptionReader top(table, "");
  read_top_level(top, table, c);
  if (Status s = read_replicas(top, table, c); !s.ok()) return s.error();
  read_pools(top, table, c);
  if (Status s = read_disaggregation(top, c); !s.ok()) return s.error();
  read_load_and_logging(top, table, c);
  if (Status s = read_sections(top, c); !s.ok()) return s.error();
  top.reject_unknown();
  if (!top.ok()) return top.error();
  move_options(table, c);
  if (Status s = check_combinations(c); !s.ok()) return s.error();
  return c;
}

Result<std::vector<double>> parse_percentile_list(std::string_view list) {
  std::vector<double> out;
  const auto bad = [&](std::string_view item) {
    return Error{"'" + std::string(item) + "' is not a percentile in [0, 100]; expected a comma-separated " +
                 "list such as 25,50,90,95,99"};
  };
  size_t at = 0;
  while (true) {
    const size_t comma = list.find(',', at);
    std::string_view item = list.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    double p = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), p);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || !(p >= 0 && p <= 100)) {
      return bad(item);
    }
    out.push_back(p);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

namespace {

// The [[replicas]] groups, as read.
toml::array groups_to_toml(const std::vector<ReplicaGroup>& replica_groups) {
  toml::array groups;
  for (const ReplicaGroup& g : replica_groups) {
    toml::table group;
    group.insert("count", g.count);
    if (!g.hardware.empty()) group.insert("hardware", g.hardware);
    if (g.tp > 0) group.insert("tp", g.tp);
    if (!g.role.empty()) group.insert("role", g.role);
    if (g.max_num_seqs > 0) group.insert("max_num_seqs", g.max_num_seqs);
    if (g.max_num_batched_tokens > 0) group.insert("max_num_batched_tokens", g.max_num_batched_tokens);
    if (g.has_policy) {
      toml::table policy = g.policy_options;
      if (!g.policy.empty()) policy.insert_or_assign("name", g.policy);
      group.insert("policy", std::move(policy));
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

// The top level's keys, as read_top_level, read_replicas and read_disaggregation read them.
void deployment_to_toml(const RunConfig& c, toml::table& t) {
  t.insert("trace", c.trace);
  t.insert("backend", c.backend);
  if (!c.hardware.empty()) t.insert("hardware", c.hardware);
  if (!c.model.empty()) t.insert("model", c.model);
  t.insert("db", c.db);
  if (c.db_sync != RunConfig{}.db_sync) t.insert("db_sync", c.db_sync);
  if (c.seed) t.insert("seed", static_cast<int64_t>(*c.seed));
  if (!c.name.empty()) t.insert("name", c.name);
  t.insert("max_num_seqs", c.max_num_seqs);
  t.insert("max_num_batched_tokens", c.max_num_batched_tokens);
  if (c.max_tokens > 0) t.insert("max_tokens", c.max_tokens);
  if (c.max_model_len > 0) t.insert("max_model_len", c.max_model_len);
  if (!c.dtype.empty()) t.insert("dtype", c.dtype);
  t.insert("gpu_memory_utilization", c.gpu_memory_utilization);
  t.insert("tp", c.tp);
  if (c.pp != 1) t.insert("pp", c.pp);
  if (c.dp != 1) t.insert("dp", c.dp);
  if (c.enable_expert_parallel) t.insert("enable_expert_parallel", true);
  if (c.enforce_eager) t.insert("enforce_eager", true);
  if (c.async_scheduling >= 0) t.insert("async_scheduling", c.async_scheduling == 1);
  if (c.replica_groups.empty()) {
    t.insert("replicas", c.replicas);
  } else {
    t.insert("replicas", groups_to_toml(c.replica_groups));
  }
  if (c.link_gbs > 0 || c.link_latency_us >= 0) {
    toml::table d;
    if (c.link_gbs > 0) d.insert("link_gbs", c.link_gbs);
    if (c.link_latency_us >= 0) d.insert("link_latency_us", c.link_latency_us);
    t.insert("disaggregation", std::move(d));
  }
}

// The keys read_load_and_logging reads.
void load_and_logging_to_toml(const RunConfig& c, toml::table& t) {
  if (c.hardware_sample >= 0) t.insert("hardware_sample", c.hardware_sample);
  if (c.request_rate > 0) t.insert("request_rate", c.request_rate);
  if (c.burstiness > 0) t.insert("burstiness", c.burstiness);
  if (c.time_scale > 0) t.insert("time_scale", c.time_scale);
  if (c.rate_scale > 0) t.insert("rate_scale", c.rate_scale);
  if (c.num_prompts > 0) t.insert("num_prompts", c.num_prompts);
  if (c.max_concurrency > 0) t.insert("max_concurrency", c.max_concurrency);
  if (c.price_per_hour_usd >= 0) t.insert("price_per_hour_usd", c.price_per_hour_usd);
  if (c.price_by_node) t.insert("price_by", "node");
  if (c.gpus_per_node > 0) t.insert("gpus_per_node", c.gpus_per_node);
  if (c.node_price_per_hour_usd >= 0) t.insert("node_price_per_hour_usd", c.node_price_per_hour_usd);
  if (!c.log.empty()) t.insert("log", c.log);
  if (c.log_resolution != RunConfig{}.log_resolution) t.insert("log_resolution", c.log_resolution);
  if (!c.leap) t.insert("leap", false);
  if (c.threads != 0) t.insert("threads", c.threads);
  if (!c.metric_percentiles.empty()) {
    std::string list;
    for (double p : c.metric_percentiles) {
      char buf[64];
      list += (list.empty() ? "" : ",") + std::string(buf, std::to_chars(buf, buf + sizeof buf, p).ptr);
    }
    t.insert("metric_percentiles", list);
  }
}

// The sections read_sections reads, with the policy's and the router's options.
void sections_to_toml(const RunConfig& c, const toml::table& policy_options, toml::table& t) {
  if (c.slo_ttft > 0 || c.slo_tpot > 0 || c.slo_e2el > 0) {
    toml::table g;
    if (c.slo_ttft > 0) g.insert("ttft", c.slo_ttft * 1e3);
    if (c.slo_tpot > 0) g.insert("tpot", c.slo_tpot * 1e3);
    if (c.slo_e2el > 0) g.insert("e2el", c.slo_e2el * 1e3);
    t.insert("goodput", std::move(g));
  }
  toml::table policy = policy_options;
  policy.insert_or_assign("name", c.policy);
  t.insert("policy", std::move(policy));
  toml::table router = c.router_options;
  router.insert_or_assign("name", c.router);
  router.insert_or_assign("session_affinity", c.session_affinity);
  t.insert("router", std::move(router));
  toml::table kv{{"block_size", c.block_size}};
  if (c.kv_blocks >= 0) kv.insert("blocks", c.kv_blocks);
  if (!c.kv_dtype.empty()) kv.insert("dtype", c.kv_dtype);
  if (c.kv_groups) {
    kv.insert("full_groups", c.kv_groups->extra_full + 1);
    kv.insert("windowed_groups", c.kv_groups->windowed);
    if (c.kv_groups->windowed > 0) {
      kv.insert("window", c.kv_groups->window);
      kv.insert("window_kind", c.kv_groups->chunked ? "chunked" : "sliding");
    }
    kv.insert("state_groups", c.kv_groups->state);
  }
  t.insert("kv", std::move(kv));
  if (!c.engine_weights.empty() || !c.engine_profile.empty()) {
    toml::table e;
    if (!c.engine_weights.empty()) e.insert("weights", c.engine_weights);
    if (!c.engine_profile.empty()) e.insert("profile", c.engine_profile);
    t.insert("engine", std::move(e));
  }
  if (c.moe_routing_skew > 0) t.insert("moe", toml::table{{"routing_skew", c.moe_routing_skew}});
}

}  // namespace

std::string config_to_toml(const RunConfig& c, const toml::table& policy_options) {
  toml::table t;
  deployment_to_toml(c, t);
  load_and_logging_to_toml(c, t);
  sections_to_toml(c, policy_options, t);
  std::ostringstream out;
  out << toml::toml_formatter(t);
  return out.str();
}

}  // namespace servesim
