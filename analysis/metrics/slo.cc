#include "analysis/metrics/slo.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

const char* const kStats[] = {"mean", "p50", "p90", "p99"};
const char* const kLatencies[] = {"ttft", "tpot", "itl", "e2el", "queue"};

bool is_latency(const Slo& s) { return s.latency(); }

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A latency in the SLO's unit: "2345 ms", "2.345 s".
std::string in_unit(const Slo& s, double seconds) {
  return s.unit == "ms" ? number(seconds * 1e3) + " ms" : number(seconds) + " s";
}

std::string count(double v) { return std::to_string(std::llround(v)); }

// "rejected 45 % of requests (450 of 1000: 450 longer than the model's context)".
std::string rejected_text(std::span<const Metric> metrics, double share, double rejected, double total) {
  const std::pair<const char*, const char*> causes[] = {
      {"rejected_context_length", "longer than the model's context"},
      {"rejected_kv_capacity", "larger than the KV cache"},
      {"rejected_batch_tokens", "larger than the token budget"},
      {"rejected_parent", "after their conversation's earlier turn"}};
  std::string why;
  for (const auto& [name, text] : causes) {
    const double n = find_metric(metrics, name).value_or(0);
    if (n > 0) why += (why.empty() ? ": " : ", ") + count(n) + " " + text;
  }
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.3g", share * 100);
  return "rejected " + std::string(percent) + " % of requests (" + count(rejected) + " of " + count(total) + why + ")";
}

}  // namespace

std::string known_slo_keys() {
  std::string out;
  for (const char* s : kStats) {
    for (const char* l : kLatencies) out += std::string(out.empty() ? "" : ", ") + s + "_" + l;
  }
  return out + ", slo_attainment, rejected";
}

namespace {

// The metric an SLO's key names: slo_attainment, rejected, or STAT_LATENCY (p99_ttft: ttft_p99).
Status read_slo_key(Slo& slo, const std::string& quoted) {
  if (slo.key == "slo_attainment" || slo.key == "rejected") {
    slo.metric = slo.key;
    slo.at_least = slo.key == "slo_attainment";
    slo.unit = "";
    return Ok{};
  }
  const size_t us = slo.key.find('_');
  const std::string stat = slo.key.substr(0, us), what = us == std::string::npos ? "" : slo.key.substr(us + 1);
  const bool ok_stat = std::find(std::begin(kStats), std::end(kStats), stat) != std::end(kStats);
  const bool ok_what = std::find(std::begin(kLatencies), std::end(kLatencies), what) != std::end(kLatencies);
  if (!ok_stat || !ok_what) {
    return Error{quoted + ": unknown SLO '" + slo.key + "' (known: " + known_slo_keys() + ")"};
  }
  slo.metric = what + "_" + stat;
  return Ok{};
}

// What the unit after an SLO's number scales it by (a latency's s or ms, a share's %).
Result<double> read_slo_unit(Slo& slo, bool time, const std::string& number, const std::string& unit,
                             const std::string& value, const std::string& quoted) {
  if (time) {
    if (unit.empty()) {
      // A bare number is not read as seconds: 2 could mean 2 s or 2 ms.
      const std::string n = number.empty() ? "2" : number;
      return Error{quoted + ": give the unit: " + n + "s or " + n + "ms"};
    }
    if (unit != "s" && unit != "ms") {
      return Error{quoted + ": unknown unit '" + unit + "': give s or ms, e.g. 2s or 150ms"};
    }
    slo.unit = unit;
    return unit == "ms" ? 1e-3 : 1;
  }
  if (unit == "%") return 0.01;
  if (!unit.empty()) {
    return Error{quoted + ": expected a fraction in [0, 1], e.g. 0.99 or 99%, got '" + value + "'"};
  }
  return 1.0;
}

}  // namespace

Result<Slo> parse_slo(const std::string& token) {
  const size_t eq = token.find('=');
  const std::string quoted = "--slo '" + token + "'";
  if (eq == std::string::npos || eq == 0) {
    return Error{quoted + ": expected KEY=VALUE, e.g. p99_ttft=2s (keys: " + known_slo_keys() + ")"};
  }
  Slo slo;
  slo.key = token.substr(0, eq);
  std::string value = token.substr(eq + 1);
  slo.given = value;
  if (Status s = read_slo_key(slo, quoted); !s.ok()) return s.error();
  const bool time = is_latency(slo);
  // The number (decimal digits, a point, an exponent) and its unit after it.
  const size_t unit_at = value.find_first_not_of("0123456789.eE+-");
  const std::string number = value.substr(0, unit_at), unit = unit_at == std::string::npos ? "" : value.substr(unit_at);
  Result<double> scale = read_slo_unit(slo, time, number, unit, value, quoted);
  if (!scale.ok()) return scale.error();
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(v) || v < 0 || (time && v == 0)) {
    return Error{quoted + ": expected " +
                 (time ? std::string("a time > 0 with s or ms, e.g. 2s or 150ms")
                       : std::string("a fraction in [0, 1], e.g. 0.99 or 99%"))};
  }
  slo.bound = v * scale.value();
  if (!time && slo.bound > 1) return Error{quoted + ": expected a fraction in [0, 1], e.g. 0.99 or 99%"};
  return slo;
}

Result<std::vector<Slo>> slos_from_table(const toml::table& table) {
  std::vector<Slo> out;
  for (const auto& [key, value] : table) {
    std::string text;
    const std::optional<double> number = value.is_string() ? std::nullopt : value.value<double>();
    if (const auto* s = value.as_string()) {
      text = s->get();
    } else if (number) {
      text = format_number(*number);
      if (key.str() != "slo_attainment" && key.str() != "rejected") text += "s";
    }
    Result<Slo> slo = parse_slo(std::string(key.str()) + "=" + text);
    if (!slo.ok()) return Error{"slo." + std::string(key.str()) + ": " + slo.error().message};
    if (number && slo.value().latency() && slo.value().bound < 1) slo.value().unit = "ms";  // "80 ms", not "0.08 s"
    out.push_back(std::move(slo).value());
  }
  return out;
}

std::string Slo::bound_text() const {
  if (!latency()) return number(bound);
  return unit == "ms" ? number(bound * 1e3) + " ms" : number(bound) + " s";
}

bool misses_at_any_load(std::span<const Slo> slos, const std::string& status, std::span<const Metric> metrics) {
  if (status == "failed") return true;
  if (status != "done") return false;  // interrupted: nothing is known
  const double share = rejected_share(metrics);
  if (share == 0) return false;
  double allowed = 0;
  for (const Slo& s : slos) {
    if (s.metric == "rejected") allowed = s.bound;
  }
  return share > allowed;
}

double rejected_share(std::span<const Metric> metrics) {
  const double rejected = find_metric(metrics, "rejected").value_or(0);
  const double total = rejected + find_metric(metrics, "completed").value_or(0);
  return total > 0 ? rejected / total : 0;
}

std::string slo_miss(std::span<const Slo> slos, const std::string& status, const std::string& error,
                     std::span<const Metric> metrics) {
  if (status != "done") return status + (error.empty() ? "" : ": " + error);
  if (find_metric(metrics, "overloaded").value_or(0) > 0) return "overloaded";
  const double rejected = find_metric(metrics, "rejected").value_or(0);
  const double total = rejected + find_metric(metrics, "completed").value_or(0);
  const double share = rejected_share(metrics);
  const bool allows_rejections = std::any_of(slos.begin(), slos.end(), [](const Slo& s) { return s.metric == "rejected"; });
  // A deployment that turns requests away does not serve the traffic, whatever its latencies.
  if (!allows_rejections && rejected > 0) {
    return rejected_text(metrics, share, rejected, total) + "; --slo rejected=SHARE allows some";
  }
  for (const Slo& s : slos) {
    const std::optional<double> v = s.metric == "rejected" ? std::optional<double>(share) : find_metric(metrics, s.metric);
    if (!v) return s.key + " not measured";
    if (s.at_least ? *v >= s.bound : *v <= s.bound) continue;
    if (is_latency(s)) return s.key + " " + in_unit(s, *v) + " > " + in_unit(s, s.bound);
    if (s.metric == "rejected") return rejected_text(metrics, share, rejected, total) + " > " + number(s.bound * 100) + " %";
    return s.key + " " + number(*v) + " < " + number(s.bound);
  }
  return "";
}

}  // namespace servesim
