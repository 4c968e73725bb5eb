#include "analysis/slo.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace servesim::slo {
namespace {

const char* const kStats[] = {"mean", "p50", "p90", "p99"};
const char* const kLatencies[] = {"ttft", "tpot", "itl", "e2el", "queue"};

// Counts whole (19365, not 1.937e+04), other values to 4 significant digits.
std::string number(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

// A latency in seconds as text in `unit`: "3.21 s", "150 ms".
std::string in_unit(double seconds, const std::string& unit) {
  return unit == "ms" ? number(seconds * 1000) + " ms" : number(seconds) + " s";
}

// The key's metric name, or "" when it is no objective's key.
std::string metric_of_key(const std::string& key) {
  if (key == "slo_attainment" || key == "rejected") return key;
  const size_t us = key.find('_');
  if (us == std::string::npos) return "";
  const std::string stat = key.substr(0, us), what = key.substr(us + 1);
  const bool ok_stat = std::find(std::begin(kStats), std::end(kStats), stat) != std::end(kStats);
  const bool ok_what = std::find(std::begin(kLatencies), std::end(kLatencies), what) != std::end(kLatencies);
  return ok_stat && ok_what ? what + "_" + stat : "";
}

Result<Objective> make(const std::string& key, const std::string& where) {
  Objective o;
  o.key = key;
  o.metric = metric_of_key(key);
  if (o.metric.empty()) return Error{where + ": unknown SLO '" + key + "' (known: " + known_keys() + ")"};
  o.at_least = key == "slo_attainment";
  return o;
}

bool is_fraction_key(const std::string& key) { return key == "slo_attainment" || key == "rejected"; }

}  // namespace

std::string Objective::bound_text() const { return latency() ? in_unit(bound, unit) : number(bound); }

std::string known_keys() {
  std::string out;
  for (const char* s : kStats) {
    for (const char* l : kLatencies) out += std::string(out.empty() ? "" : ", ") + s + "_" + l;
  }
  return out + ", slo_attainment, rejected";
}

Result<Objective> parse(const std::string& token) {
  const size_t eq = token.find('=');
  const std::string quoted = "--slo '" + token + "'";
  if (eq == std::string::npos || eq == 0) {
    return Error{quoted + ": expected KEY=VALUE, e.g. p99_ttft=2s (keys: " + known_keys() + ")"};
  }
  Result<Objective> made = make(token.substr(0, eq), quoted);
  if (!made.ok()) return made.error();
  Objective o = made.value();
  std::string value = token.substr(eq + 1);
  const bool time = !is_fraction_key(o.key);
  double scale = 1;
  if (time && value.size() > 2 && value.compare(value.size() - 2, 2, "ms") == 0) {
    o.unit = "ms";
    scale = 1e-3;
    value.resize(value.size() - 2);
  } else if (time && value.size() > 1 && value.back() == 's') {
    o.unit = "s";
    value.pop_back();
  } else if (!time && !value.empty() && value.back() == '%') {
    scale = 0.01;
    value.pop_back();
  }
  const std::string expected = time ? "a time > 0 with its unit, s or ms, e.g. 2s or 150ms"
                                    : "a fraction in [0, 1], e.g. 0.99 or 99%";
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if ((time && o.unit.empty()) || value.empty() || end != value.c_str() + value.size() || !std::isfinite(v) ||
      v < 0 || (time && v == 0) || (!time && v * scale > 1)) {
    return Error{quoted + ": expected " + expected};
  }
  o.bound = v * scale;
  return o;
}

Result<std::vector<Objective>> from_table(const toml::table& slo) {
  std::vector<Objective> out;
  for (const auto& [k, node] : slo) {
    const std::string key(k.str());
    if (const auto* text = node.as_string()) {
      Result<Objective> o = parse(key + "=" + text->get());
      if (!o.ok()) return Error{"slo." + key + ": " + o.error().message};
      out.push_back(o.value());
      continue;
    }
    Result<Objective> made = make(key, "slo." + key);
    if (!made.ok()) return made.error();
    Objective o = made.value();
    const std::optional<double> v = node.value<double>();
    if (!v || !std::isfinite(*v) || *v < 0) return Error{"slo." + key + ": expected a number >= 0"};
    o.bound = *v;
    if (!is_fraction_key(key)) o.unit = *v < 1 ? "ms" : "s";
    out.push_back(o);
  }
  return out;
}

double rejected_share(std::span<const Metric> metrics) {
  const double rejected = find_metric(metrics, "rejected").value_or(0);
  const double total = rejected + find_metric(metrics, "completed").value_or(0);
  return total > 0 ? rejected / total : 0;
}

std::string miss(std::span<const Objective> objectives, const std::string& status, const std::string& error,
                 std::span<const Metric> metrics) {
  if (status != "done") return (status.empty() ? "not run" : status) + (error.empty() ? "" : ": " + error);
  if (find_metric(metrics, "overloaded").value_or(0) > 0) return "overloaded";
  const bool rejected_allowed = std::any_of(objectives.begin(), objectives.end(),
                                            [](const Objective& o) { return o.metric == "rejected"; });
  const double rejected = find_metric(metrics, "rejected").value_or(0);
  if (!rejected_allowed && rejected > 0) {
    const double total = rejected + find_metric(metrics, "completed").value_or(0);
    return "rejected " + number(rejected) + " of " + number(total) + " requests (" +
           number(100 * rejected / total) + " %; --slo rejected=F allows a share)";
  }
  for (const Objective& o : objectives) {
    const std::optional<double> v =
        o.metric == "rejected" ? std::optional<double>(rejected_share(metrics)) : find_metric(metrics, o.metric);
    if (!v) return o.key + " not measured";
    if (o.at_least ? *v >= o.bound : *v <= o.bound) continue;
    const std::string value = o.latency() ? in_unit(*v, o.unit) : number(*v);
    return o.key + " " + value + (o.at_least ? " < " : " > ") + o.bound_text();
  }
  return "";
}

}  // namespace servesim::slo
