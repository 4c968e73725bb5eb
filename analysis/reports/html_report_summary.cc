// The summary table and the banners of a runs page of `sim report --html`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "analysis/reports/html_report_sections.h"
#include "sim/config/presets.h"

namespace servesim::html {
namespace {

enum class Format { kNumber, kPercent, kLatency, kFlag };

struct Shown {
  std::string_view name, label;
  Format format;
};

// Labels as `sim report` prints them; metrics not listed show under their own name.
constexpr Shown kShown[] = {
    {"completed", "Successful requests", Format::kNumber},
    {"rejected", "Rejected requests", Format::kNumber},
    {"rejected_context_length", "Rejected: context length", Format::kNumber},
    {"rejected_kv_capacity", "Rejected: KV capacity", Format::kNumber},
    {"rejected_batch_tokens", "Rejected: batch tokens", Format::kNumber},
    {"rejected_parent", "Rejected: parent rejected", Format::kNumber},
    {"capped", "Capped at max_tokens", Format::kNumber},
    {"duration", "Benchmark duration (s)", Format::kNumber},
    {"total_input_tokens", "Total input tokens", Format::kNumber},
    {"total_output_tokens", "Total generated tokens", Format::kNumber},
    {"request_throughput", "Request throughput (req/s)", Format::kNumber},
    {"output_throughput", "Output token throughput (tok/s)", Format::kNumber},
    {"total_token_throughput", "Total token throughput (tok/s)", Format::kNumber},
    {"request_goodput", "Request goodput (req/s)", Format::kNumber},
    {"slo_attainment", "SLO attainment", Format::kPercent},
    {"slot_utilization", "Slot utilization", Format::kPercent},
    {"kv_utilization_mean", "KV cache utilization (mean)", Format::kPercent},
    {"preemptions", "Preemptions", Format::kNumber},
    {"iterations", "Iterations", Format::kNumber},
    {"prefix_hit_rate", "Prefix cache hit rate (tokens)", Format::kPercent},
    {"prefix_request_hit_rate", "Prefix cache hit rate (requests)", Format::kPercent},
    {"overloaded", "Overloaded", Format::kFlag},
    {"backlog_growth", "Backlog growth (requests)", Format::kNumber},
    {"backlog_growth_share", "Backlog growth (share of arrivals)", Format::kPercent},
    {"cost_per_hour", "Cost (USD/hour)", Format::kNumber},
    {"cost_per_million_output_tokens", "Cost (USD/M output tokens)", Format::kNumber},
    {"validate_mape", "Prediction error, MAPE", Format::kPercent},
    {"validate_p50", "Prediction error, p50", Format::kPercent},
    {"validate_p90", "Prediction error, p90", Format::kPercent},
};

// Shown in the deployment rows instead.
constexpr std::string_view kDeployment[] = {"gpus", "kv_blocks_per_replica", "kv_tokens_per_replica",
                                            "kv_gib_per_replica"};

constexpr std::pair<std::string_view, std::string_view> kLatencyKinds[] = {
    {"ttft", "TTFT"}, {"tpot", "TPOT"}, {"itl", "ITL"}, {"e2el", "E2E latency"}, {"queue", "Queueing delay"}};

// "TTFT p99" for ttft_p99 and the like; "" for other names.
std::string latency_label(const std::string& name) {
  for (const auto& [kind, word] : kLatencyKinds) {
    if (name.size() > kind.size() && name.rfind(kind, 0) == 0 && name[kind.size()] == '_') {
      return std::string(word) + " " + name.substr(kind.size() + 1);
    }
  }
  return "";
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

std::string cell(const ReportRun& run, const std::string& name, Format format, bool unit_in_cell) {
  const std::optional<double> v = run.metric(name);
  if (!v) return "-";
  switch (format) {
    case Format::kPercent: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f%%", 100 * *v);
      return buf;
    }
    case Format::kLatency:
      return format_number(*v * run.latency_scale()) + (unit_in_cell ? " " + run.latency_unit() : "");
    case Format::kFlag: return *v > 0 ? "yes" : "no";
    case Format::kNumber: break;
  }
  return format_number(*v);
}

std::string deployment(const ReportRun& r) {
  std::string out = std::to_string(r.replicas) + (r.replicas == 1 ? " replica" : " replicas");
  if (r.unit()) return out;
  const double gpus = r.metric("gpus").value_or(static_cast<double>(r.replicas) * r.tp);
  const std::optional<double> nodes = r.metric("nodes");
  return out + " \u00d7 tp " + std::to_string(r.tp) + " = " + format_number(gpus) + " GPUs" +
         (nodes ? " (" + format_number(*nodes) + (*nodes == 1 ? " node)" : " nodes)") : "");
}

std::string kv_cache(const ReportRun& r) {
  const std::optional<double> blocks = r.metric("kv_blocks_per_replica");
  if (!blocks) return "-";
  std::string out = format_number(*blocks) + " blocks";
  if (auto tokens = r.metric("kv_tokens_per_replica")) out += ", " + format_number(*tokens) + " tokens";
  if (auto gib = r.metric("kv_gib_per_replica")) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", *gib);
    out += std::string(", ") + buf + " GiB";
  }
  return out;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

// The relative difference of run r's metric from the first run's, as " (+12.34%)"; "" when either
// lacks it, for the first run, or when the first is 0 (" (+0)" when both are).
std::string relative_to_first(const std::vector<ReportRun>& runs, const ReportRun& r, const std::string& name) {
  if (&r == &runs.front()) return "";
  const std::optional<double> a = runs.front().metric(name), b = r.metric(name);
  if (!a || !b) return "";
  if (*a == 0) return *b == 0 ? " (+0)" : "";
  char buf[32];
  std::snprintf(buf, sizeof buf, " (%+.2f%%)", 100 * (*b - *a) / *a);
  return buf;
}

// Rows of a table with a column per run: row(label, cell of a run).
struct Rows {
  const std::vector<ReportRun>& runs;
  Table& table;
  template <class Cell>
  void operator()(const std::string& label, Cell cell) {
    std::vector<std::string> cells = {label};
    for (const ReportRun& r : runs) cells.push_back(cell(r));
    table.rows.push_back(std::move(cells));
  }
};

Table run_table(const std::vector<ReportRun>& runs, const std::vector<std::string>& header) {
  Table t{.title = runs.size() == 1 ? "Run" : "Runs", .header = header, .rows = {}};
  Rows row{runs, t};
  row("Name", [](const ReportRun& r) { return or_dash(r.name); });
  row("Status", [](const ReportRun& r) { return or_dash(r.status); });
  row("Policy", [](const ReportRun& r) { return or_dash(r.policy); });
  row("Backend", [](const ReportRun& r) { return or_dash(r.backend); });
  row("Hardware",
      [](const ReportRun& r) { return or_dash(preset_display_name(r.hardware, PresetKind::kHardware)); });
  row("Model", [](const ReportRun& r) { return or_dash(preset_display_name(r.model, PresetKind::kModel)); });
  row("Workload", [](const ReportRun& r) { return or_dash(r.workload); });
  row("Deployment", deployment);
  row("KV cache per replica", kv_cache);
  if (std::any_of(runs.begin(), runs.end(), [](const ReportRun& r) { return !r.error.empty(); })) {
    row("Error", [](const ReportRun& r) { return or_dash(r.error); });
  }
  return t;
}

// One run's latencies compactly: a row per kind; a column for the mean, the std and each stored
// percentile (the standard ones and any --metric-percentiles), ascending.
Table latency_matrix(const ReportRun& run, const std::vector<std::string>& names) {
  std::vector<std::pair<double, std::string>> percentiles;  // (p, "_p99.9")
  for (const std::string& name : names) {
    for (const auto& [kind, word] : kLatencyKinds) {
      const std::string prefix = std::string(kind) + "_p";
      if (name.rfind(prefix, 0) != 0) continue;
      char* end = nullptr;
      const double p = std::strtod(name.c_str() + prefix.size(), &end);
      if (*end != '\0') continue;
      const std::string suffix = name.substr(kind.size());
      if (std::find(percentiles.begin(), percentiles.end(), std::pair(p, suffix)) == percentiles.end()) {
        percentiles.emplace_back(p, suffix);
      }
    }
  }
  std::sort(percentiles.begin(), percentiles.end());
  std::vector<std::string> stats = {"_mean", "_std"};
  for (const auto& [p, suffix] : percentiles) stats.push_back(suffix);
  Table t{.title = "Latency (" + run.latency_unit() + ")", .header = {""}, .rows = {}};
  for (const std::string& stat : stats) t.header.push_back(stat.substr(1));
  for (const auto& [kind, word] : kLatencyKinds) {
    std::vector<std::string> row = {std::string(word)};
    bool any = false;
    for (const std::string& stat : stats) {
      const std::string name = std::string(kind) + stat;
      any = any || std::find(names.begin(), names.end(), name) != names.end();
      row.push_back(cell(run, name, Format::kLatency, false));
    }
    if (any) t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

std::vector<Table> summary_tables(const std::vector<ReportRun>& runs) {
  std::vector<std::string> header = {""};
  for (const ReportRun& r : runs) header.push_back("run " + std::to_string(r.id));
  std::vector<Table> out = {run_table(runs, header)};

  // Every metric any run has, in the runs' order (metric_names() first, then by name).
  std::vector<std::string> names;
  for (const ReportRun& r : runs) {
    for (const Metric& m : r.metrics) {
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    }
  }
  const bool all_unit = std::all_of(runs.begin(), runs.end(), [](const ReportRun& r) { return r.unit(); });
  const bool mixed_units =
      !all_unit && std::any_of(runs.begin(), runs.end(), [](const ReportRun& r) { return r.unit(); });
  Table metrics{.title = "Metrics", .header = header, .rows = {}};
  Table latency{.title = std::string("Latency") + (mixed_units ? ""
                                                   : all_unit  ? " (steps)"
                                                               : " (ms)"),
                .header = header,
                .rows = {}};
  for (const std::string& name : names) {
    if (std::find(std::begin(kDeployment), std::end(kDeployment), name) != std::end(kDeployment)) continue;
    if (std::string l = latency_label(name); !l.empty()) {
      Rows{runs, latency}(l, [&](const ReportRun& r) {
        return cell(r, name, Format::kLatency, mixed_units) + relative_to_first(runs, r, name);
      });
      continue;
    }
    std::string label = name;
    Format format = Format::kNumber;
    for (const Shown& s : kShown) {
      if (s.name == name) {
        label = std::string(s.label);
        format = s.format;
      }
    }
    if (all_unit) label = replace_all(replace_all(label, "(s)", "(steps)"), "/s)", "/step)");
    Rows{runs, metrics}(label, [&](const ReportRun& r) {
      return cell(r, name, format, mixed_units) + (format == Format::kFlag ? "" : relative_to_first(runs, r, name));
    });
  }
  metrics.footnote = "As `vllm bench serve` defines them; `sim report` prints the same.";
  for (const ReportRun& r : runs) {
    // A cache over prompts that name no content cannot hit: its hit rate is not a finding.
    if (r.metric("prefix_cacheable_requests") == 0.0) {
      metrics.footnote += " Run " + std::to_string(r.id) + ": no prompt has content ids or block hashes, so none "
                          "can share a prefix: its prefix cache hit rate is not a finding.";
    }
  }
  if (runs.size() > 1) {
    const std::string first = std::to_string(runs.front().id);
    metrics.footnote += " In parentheses: the difference from run " + first +
                        ", relative (`sim compare` gives it absolute too).";
    latency.footnote = "In parentheses: the difference from run " + first + ", relative.";
  }
  out.push_back(std::move(metrics));
  if (runs.size() == 1) latency = latency_matrix(runs[0], names);
  if (!latency.rows.empty()) out.push_back(std::move(latency));
  return out;
}

Table bootstrap_table(const ReportRun& run, const BootstrapResult& bootstrap) {
  Table t{.title = "Bootstrap over requests, " + run.label(), .header = {"", "estimate", "95 % interval"}, .rows = {}};
  for (const BootstrapEstimate& e : bootstrap.estimates) t.rows.push_back(estimate_cells(e));
  t.footnote = "2.5-97.5 % of " + std::to_string(bootstrap.resamples) + " resamples (seed " +
               std::to_string(bootstrap.seed) + ") of the run's " + std::to_string(bootstrap.requests) +
               " requests: the sampling noise of the request set, not the arrival process's randomness "
               "or the cost model's error.";
  return t;
}

std::vector<Banner> run_banners(const std::vector<ReportRun>& runs) {
  std::vector<Banner> out;
  for (const ReportRun& r : runs) {
    const std::string error = r.error.empty() ? "" : ": " + r.error;
    const std::string who = runs.size() == 1 ? "This run" : "Run " + std::to_string(r.id);
    if (r.status == "failed") {
      out.push_back({true, who + " failed" + error});
    } else if (r.status == "interrupted") {
      out.push_back({true, who + " was interrupted; the charts show what it logged until then" + error});
    } else if (r.status == "abandoned") {
      out.push_back({true, who + " was abandoned" + error});
    } else if (r.status == "running") {
      out.push_back({false, who + " is still running; the charts show what it has logged so far"});
    }
    if (r.metric("completed").value_or(0) <= 0 && r.status != "failed") {
      out.push_back({true, who + " completed no requests (status " + or_dash(r.status) +
                               "); there is no latency to chart" + error});
    }
  }
  std::set<std::string> workloads;
  std::string which;
  for (const ReportRun& r : runs) {
    workloads.insert(r.workload);
    which += (which.empty() ? "" : "; ") + ("run " + std::to_string(r.id) + ": " + or_dash(r.workload));
  }
  if (workloads.size() > 1) {
    out.push_back({false, "These runs serve different workloads (" + which +
                              "): their latencies and throughputs are not a like-for-like comparison."});
  }
  const auto units = std::count_if(runs.begin(), runs.end(), [](const ReportRun& r) { return r.unit(); });
  if (units > 0 && units < static_cast<std::ptrdiff_t>(runs.size())) {
    out.push_back({false,
                   "Some of these runs use the unit backend, whose times are iterations (steps), "
                   "not seconds: their latencies share no scale with the others'."});
  }
  return out;
}

}  // namespace servesim::html
