#include "analysis/reports/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "analysis/storage/database.h"
#include "analysis/storage/run_status.h"
#include "analysis/reports/vllm_result.h"
#include "sim/config/config.h"
#include "sim/config/presets.h"
#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

constexpr int kLabelWidth = 40;  // vLLM's "{:<40} {:<10}"
constexpr size_t kTableWidth = 50;

// Python's "{s:{c}^{n}}".format(...), as vLLM centers titles: an odd fill character goes right.
std::string center(std::string_view s, char fill) {
  if (s.size() >= kTableWidth) return std::string(s);
  const size_t pad = kTableWidth - s.size();
  return std::string(pad / 2, fill) + std::string(s) + std::string(pad - pad / 2, fill);
}

void line(std::ostream& out, std::string_view label, std::string_view value) {
  std::string padded(label);
  if (padded.size() < kLabelWidth) padded.resize(kLabelWidth, ' ');
  out << padded << ' ' << value << '\n';
}

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string integer(double v) { return std::to_string(std::llround(v)); }

// The shortest text that reads back as exactly v.
std::string shortest(double v) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, result.ptr);
}

const double* find(const std::vector<Metric>& metrics, std::string_view name) {
  for (const Metric& m : metrics) {
    if (m.name == name) return &m.value;
  }
  return nullptr;
}

// " (2 nodes)": the whole nodes the GPUs take, when the hardware says how many a node holds.
std::string nodes_text(const std::vector<Metric>& metrics) {
  const double* nodes = find(metrics, "nodes");
  if (nodes == nullptr) return "";
  return " (" + integer(*nodes) + (*nodes == 1 ? " node)" : " nodes)");
}

struct Section {
  const char* title;
  const char* prefix;
  const char* label;
};

constexpr Section kSections[] = {
    {"Time to First Token", "ttft", "TTFT"},
    {"Time per Output Token (excl. 1st token)", "tpot", "TPOT"},
    {"Inter-token Latency", "itl", "ITL"},
    {"End-to-end Latency", "e2el", "E2EL"},
    {"Queueing Delay", "queue", "Queue"},
};

// "1-3, 5, 7-8": the ids that exist, for the unknown-run message.
std::string id_ranges(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

Result<StoredRun> read_stored_run(Database& db, std::optional<int64_t> run_id) {
  sqlite3* h = db.handle();
  std::vector<int64_t> ids;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(h, "SELECT id FROM runs ORDER BY id", -1, &s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  while (sqlite3_step(s) == SQLITE_ROW) ids.push_back(sqlite3_column_int64(s, 0));
  sqlite3_finalize(s);
  if (ids.empty()) return Error{"no runs in " + db.path() + "; run `sim --trace ...` first"};
  const int64_t id = run_id.value_or(ids.back());
  if (!std::binary_search(ids.begin(), ids.end(), id)) {
    return Error{"no run " + std::to_string(id) + " in " + db.path() + "; its runs are " +
                 id_ranges(ids)};
  }

  StoredRun run;
  if (sqlite3_prepare_v2(h, "SELECT * FROM runs WHERE id = ?", -1, &s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  sqlite3_bind_int64(s, 1, id);
  if (sqlite3_step(s) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(s); ++c) {
      nlohmann::ordered_json& v = run.row[sqlite3_column_name(s, c)];
      switch (sqlite3_column_type(s, c)) {
        case SQLITE_INTEGER: v = sqlite3_column_int64(s, c); break;
        case SQLITE_FLOAT: v = sqlite3_column_double(s, c); break;
        case SQLITE_NULL: v = nullptr; break;
        default: v = reinterpret_cast<const char*>(sqlite3_column_text(s, c)); break;
      }
    }
  }
  sqlite3_finalize(s);

  if (sqlite3_prepare_v2(h, "SELECT name, value FROM metrics WHERE run_id = ? ORDER BY name", -1,
                         &s, nullptr) != SQLITE_OK) {
    return Error{db.error_message()};
  }
  sqlite3_bind_int64(s, 1, id);
  while (sqlite3_step(s) == SQLITE_ROW) {
    if (sqlite3_column_type(s, 1) == SQLITE_NULL) continue;  // SQLite stores NaN as NULL
    run.metrics.push_back(
        {reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), sqlite3_column_double(s, 1)});
  }
  sqlite3_finalize(s);
  // Known metrics in compute()'s order, extra percentiles after their latency's last standard one
  // (by value), then any others by name (the query sorted them).
  auto rank = [](const Metric& m) -> double {
    const auto names = metric_names();
    const auto known = std::find(names.begin(), names.end(), m.name);
    if (known != names.end()) return static_cast<double>(known - names.begin());
    for (std::string_view latency : latency_metrics()) {
      const std::string prefix = std::string(latency) + "_p";
      double p = 0;
      if (m.name.starts_with(prefix) &&
          std::from_chars(m.name.data() + prefix.size(), m.name.data() + m.name.size(), p).ec == std::errc{}) {
        const std::string last = std::string(latency) + "_p99";
        return static_cast<double>(std::find(names.begin(), names.end(), last) - names.begin()) + 0.5 + p / 1000;
      }
    }
    return static_cast<double>(names.size());
  };
  std::stable_sort(run.metrics.begin(), run.metrics.end(),
                   [&](const Metric& a, const Metric& b) { return rank(a) < rank(b); });
  return run;
}

namespace {

std::string text_of(const nlohmann::ordered_json& row, const char* column) {
  const auto it = row.find(column);
  if (it == row.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

namespace {

std::string percent(double v) { return fixed2(100 * v) + "%"; }

std::string or_dash(const std::string& s) { return s.empty() ? std::string("-") : s; }

// A line of the summary: a metric's label and how its value reads; left out when the run has no
// such metric.
struct MetricLine {
  std::string label;
  const char* name;
  std::function<std::string(double)> format;
};

void print_lines(std::ostream& out, const std::vector<Metric>& metrics, const std::vector<MetricLine>& lines) {
  for (const MetricLine& l : lines) {
    if (const double* v = find(metrics, l.name)) line(out, l.label, l.format(*v));
  }
}

// What ran: the run, its policy and backend, hardware and model, workload and deployment.
void print_run_lines(std::ostream& out, const SummaryHeader& header, const std::vector<Metric>& metrics, bool unit) {
  line(out, "Run:",
       std::to_string(header.run_id) + (header.db_path.empty() ? "" : " (" + header.db_path + ")"));
  if (!header.name.empty()) line(out, "Name:", header.name);
  if (!header.status.empty() && header.status != "done") line(out, "Status:", header.status);
  line(out, "Policy / backend:",
       or_dash(header.policy) + (header.mirrors.empty() ? "" : " (" + header.mirrors + ")") + " / " +
           or_dash(header.backend));
  if (!header.hardware.empty() || !header.model.empty()) {
    line(out, "Hardware / model:",
         or_dash(preset_display_name(header.hardware, PresetKind::kHardware)) + " / " +
             or_dash(preset_display_name(header.model, PresetKind::kModel)));
  }
  if (!header.workload.empty()) line(out, "Workload:", header.workload);
  if (!unit || header.replicas > 1) {
    const double* gpus = find(metrics, "gpus");
    const double* groups = find(metrics, "replica_groups");
    // Pipeline stages: the GPUs beyond replicas x tp (runs store gpus = replicas x tp x pp).
    const double per_tp = static_cast<double>(header.replicas) * header.tp;
    const double pp = gpus && per_tp > 0 ? *gpus / per_tp : 1;
    const std::string stages = pp > 1 && pp == std::floor(pp) ? " x pp " + integer(pp) : "";
    const std::string shape = groups ? " in " + integer(*groups) + " groups (see hardware)"
                                     : " x tp " + std::to_string(header.tp) + stages;
    line(out, "Deployment:",
         std::to_string(header.replicas) + (header.replicas == 1 ? " replica" : " replicas") +
             (unit ? "" : shape + " = " + (gpus ? integer(*gpus) : std::to_string(header.replicas * header.tp)) +
                              " GPUs" + nodes_text(metrics)));
  }
}

// The KV cache's size, and an overload's warning.
void print_kv_and_overload(std::ostream& out, const std::vector<Metric>& metrics) {
  if (const double* total = find(metrics, "kv_blocks_total"); total && !find(metrics, "kv_blocks_per_replica")) {
    line(out, "KV cache, all replicas:", integer(*total) + " blocks");
  }
  if (const double* blocks = find(metrics, "kv_blocks_per_replica")) {
    std::string kv = integer(*blocks) + " blocks";
    if (const double* tokens = find(metrics, "kv_tokens_per_replica")) kv += ", " + integer(*tokens) + " tokens";
    if (const double* gib = find(metrics, "kv_gib_per_replica")) kv += ", " + fixed2(*gib) + " GiB";
    line(out, "KV cache per replica:", kv);
  }
  if (const double* overloaded = find(metrics, "overloaded"); overloaded && *overloaded > 0) {
    const double* growth = find(metrics, "backlog_growth");
    const double* share = find(metrics, "backlog_growth_share");
    line(out, "OVERLOADED:", "completions fell " + (share ? fixed2(100 * *share) : "?") +
                                 "% behind arrivals (the backlog grew by " +
                                 (growth ? integer(*growth) : "?") + " requests in a quarter of the run)");
  }
}

// The rejected requests by cause, largest first; the share of all requests, since percentiles
// cover only the served.
void print_rejections(std::ostream& out, const std::vector<Metric>& metrics) {
  const double* rejected = find(metrics, "rejected");
  if (!rejected || *rejected <= 0) return;
  std::vector<std::pair<double, std::string>> causes;
  for (int c = 1; c < kNumRejectCauses; ++c) {
    const std::string cause = reject_cause_name(static_cast<RejectCause>(c));
    if (const double* n = find(metrics, "rejected_" + cause)) causes.emplace_back(*n, cause);
  }
  std::stable_sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const double* completed = find(metrics, "completed");
  const double total = *rejected + (completed ? *completed : 0);
  for (const auto& [n, cause] : causes) {
    line(out, "  rejected: " + cause + ":", integer(n) + " (" + fixed2(100 * n / total) + "% of requests)");
  }
  out << "  (latencies and throughputs below cover the served requests only)\n";
}

// The run's totals, throughputs, costs and utilizations.
std::vector<MetricLine> totals_lines(const std::vector<Metric>& metrics, bool unit) {
  const std::string time_unit = unit ? "steps" : "s";
  const std::string per = unit ? "step" : "s";
  return {
      {"Benchmark duration (" + time_unit + "):", "duration", fixed2},
      {"Total input tokens:", "total_input_tokens", integer},
      {"Total generated tokens:", "total_output_tokens", integer},
      {"Request throughput (req/" + per + "):", "request_throughput", fixed2},
      {"Output token throughput (tok/" + per + "):", "output_throughput", fixed2},
      {"Total Token throughput (tok/" + per + "):", "total_token_throughput", fixed2},
      {"Request goodput (req/" + per + "):", "request_goodput", fixed2},
      {"SLO attainment:", "slo_attainment", percent},
      {find(metrics, "priced_by_node") ? "Cost (USD/hour, by node):" : "Cost (USD/hour):", "cost_per_hour", fixed2},
      {"Cost (USD/M output tokens):", "cost_per_million_output_tokens", fixed2},
      {"Preemptions:", "preemptions", integer},
      {"Iterations:", "iterations", integer},
      {"Slot utilization:", "slot_utilization", percent},
      {"KV cache utilization (mean):", "kv_utilization_mean", percent},
  };
}

// The prefix cache's hits, and disaggregated serving's pools and KV transfers.
void print_cache_and_pools(std::ostream& out, const SummaryHeader& header, const std::vector<Metric>& metrics,
                           bool unit) {
  const double* hit = find(metrics, "prefix_hit_rate");
  if (hit != nullptr && (*hit > 0 || header.policy == "prefix-cached")) {
    print_lines(out, metrics, {{"Prefix cache hit rate (tokens):", "prefix_hit_rate", percent},
                               {"Prefix cache hit rate (requests):", "prefix_request_hit_rate", percent}});
  }
  if (const double* cacheable = find(metrics, "prefix_cacheable_requests"); cacheable && *cacheable == 0) {
    // A trace of token counts (Azure's): every prompt is its own, so caching cannot show here.
    out << kNoPromptContent << '\n';
  }
  if (find(metrics, "kv_transfers") == nullptr) return;
  // Disaggregated serving: the pools' busy shares, and the KV moving between them.
  const std::string latency_unit = unit ? "steps" : "ms";
  const double latency_scale = unit ? 1.0 : 1000.0;
  const auto latency = [latency_scale](double v) { return fixed2(v * latency_scale); };
  print_lines(out, metrics,
              {{"Prefill pool utilization:", "prefill_utilization", percent},
               {"Decode pool utilization:", "decode_utilization", percent},
               {"KV transfers:", "kv_transfers", integer},
               {"KV moved (GiB):", "kv_transfer_gib", fixed2},
               {"Mean wait for decode KV (" + latency_unit + "):", "kv_transfer_wait_mean", latency},
               {"P99 wait for decode KV (" + latency_unit + "):", "kv_transfer_wait_p99", latency},
               {"Mean KV transfer (" + latency_unit + "):", "kv_transfer_time_mean", latency},
               {"P99 KV transfer (" + latency_unit + "):", "kv_transfer_time_p99", latency}});
}

// A section per latency (kSections): its mean, median and percentiles.
void print_latency_sections(std::ostream& out, const SummaryHeader& header, const std::vector<Metric>& metrics,
                            bool unit) {
  const char* latency_unit = unit ? "steps" : "ms";
  const double latency_scale = unit ? 1.0 : 1000.0;
  for (const Section& section : kSections) {
    const std::string prefix = section.prefix;
    if (!find(metrics, prefix + "_mean")) continue;
    out << center(section.title, '-') << '\n';
    const auto row = [&](const std::string& word, const std::string& suffix) {
      if (const double* v = find(metrics, prefix + suffix)) {
        line(out, word + " " + section.label + " (" + latency_unit + "):", fixed2(*v * latency_scale));
      }
    };
    row("Mean", "_mean");
    row("Median", "_p50");
    const std::vector<double> shown = header.percentiles.empty() ? std::vector<double>{90, 99} : header.percentiles;
    for (double p : shown) {
      const std::string suffix = percentile_suffix(p);  // "_p99.9"
      row("P" + suffix.substr(2), suffix);
    }
  }
}

}  // namespace

void print_summary(std::ostream& out, const SummaryHeader& header,
                   const std::vector<Metric>& metrics) {
  const bool unit = header.backend == "unit";
  out << center(" Serving Benchmark Result ", '=') << '\n';
  print_run_lines(out, header, metrics, unit);
  print_kv_and_overload(out, metrics);
  print_lines(out, metrics, {{"Successful requests:", "completed", integer}, {"Rejected requests:", "rejected", integer}});
  print_rejections(out, metrics);
  if (const double* capped = find(metrics, "capped"); capped && *capped > 0) {
    line(out, "Capped at max_tokens:", integer(*capped));
  }
  print_lines(out, metrics, totals_lines(metrics, unit));
  print_cache_and_pools(out, header, metrics, unit);
  print_latency_sections(out, header, metrics, unit);
  out << std::string(kTableWidth, '=') << '\n';
}

std::vector<double> run_percentiles(std::string_view config_toml) {
  Result<toml::table> parsed = parse_toml(config_toml, "config");
  if (!parsed.ok()) return {};
  const std::optional<std::string> list = parsed.value()["metric_percentiles"].value<std::string>();
  if (!list) return {};
  Result<std::vector<double>> p = parse_percentile_list(*list);
  return p.ok() ? p.value() : std::vector<double>{};
}

std::string policy_release(std::string_view config_toml) {
  Result<toml::table> parsed = parse_toml(config_toml, "config");
  if (!parsed.ok()) return "";
  const std::optional<std::string> version =
      parsed.value()["policy"]["vllm_version"].value<std::string>();
  return version ? "vLLM " + *version : "";
}

namespace {

// The percentiles the run did not store, found in its distributions or requests rows and added to
// its metrics; those that cannot be found, in `unavailable`.
Status add_stored_percentiles(Database& db, StoredRun& r, const std::vector<double>& percentiles,
                              std::vector<std::string>& unavailable) {
  for (double p : percentiles) {
    for (std::string_view latency : latency_metrics()) {
      const std::string name = std::string(latency) + percentile_suffix(p);
      if (find(r.metrics, name) != nullptr || find(r.metrics, std::string(latency) + "_mean") == nullptr) continue;
      Result<std::optional<double>> v = stored_percentile(db, r, latency, p);
      if (!v.ok()) return v.error();
      if (v.value()) {
        r.metrics.push_back({name, *v.value()});
      } else {
        unavailable.push_back(name);
      }
    }
  }
  return Ok{};
}

// A run recorded as running whose process is gone was cut off (SIGKILL, a crash): why, and its
// status made "abandoned"; "" for any other run.
std::string mark_abandoned(StoredRun& r) {
  if (text_of(r.row, "status") != "running") return "";
  const auto pid = r.row.contains("pid") && r.row["pid"].is_number_integer()
                       ? r.row["pid"].get<int64_t>() : int64_t{0};
  std::string abandoned = abandoned_reason(text_of(r.row, "host"), pid, text_of(r.row, "started_at"));
  if (!abandoned.empty()) r.row["status"] = "abandoned";
  return abandoned;
}

// A stored run's row, as print_summary's header.
SummaryHeader stored_header(const StoredRun& r, const std::string& db_path, const std::vector<double>& percentiles) {
  SummaryHeader header;
  header.run_id = r.row.value("id", int64_t{0});
  header.db_path = db_path;
  header.name = text_of(r.row, "name");
  header.status = text_of(r.row, "status");
  header.policy = text_of(r.row, "policy");
  header.backend = text_of(r.row, "backend");
  header.hardware = text_of(r.row, "hardware");
  header.model = text_of(r.row, "model");
  header.workload = text_of(r.row, "workload");
  header.mirrors = policy_release(text_of(r.row, "config"));
  for (auto [key, field] : {std::pair<const char*, int32_t*>{"replicas", &header.replicas},
                            {"tp", &header.tp}}) {
    if (r.row.contains(key) && r.row[key].is_number_integer()) *field = r.row[key].get<int32_t>();
  }
  header.percentiles = percentiles;
  return header;
}

// What a stored run's report says beyond print_summary's: the percentiles not stored, its error,
// why it was abandoned, the bootstrap.
void print_report_notes(std::ostream& out, const StoredRun& r, const std::vector<std::string>& unavailable,
                        const std::string& abandoned, const std::optional<BootstrapResult>& bootstrap) {
  if (!unavailable.empty()) {
    out << "Not stored: ";
    for (size_t i = 0; i < unavailable.size(); ++i) out << (i ? ", " : "") << unavailable[i];
    out << " (ITL percentiles are computed during a run: rerun with --metric-percentiles)\n";
  }
  if (const std::string error = text_of(r.row, "error"); !error.empty()) {
    out << "Error: " << error << '\n';
  }
  if (!abandoned.empty()) {
    out << "Abandoned: " << abandoned << " before the run ended (killed, or the machine "
        << "stopped); what it logged is kept\n";
  }
  if (bootstrap) print_bootstrap_summary(out, *bootstrap);
}

void print_report_json(std::ostream& out, const StoredRun& r, const std::string& abandoned,
                       const std::optional<BootstrapResult>& bootstrap) {
  nlohmann::ordered_json doc;
  doc["run"] = r.row;
  // The configuration as JSON, not as the TOML text it is stored as.
  if (Result<toml::table> config = parse_toml(text_of(r.row, "config"), "config"); config.ok()) {
    std::ostringstream json;
    json << toml::json_formatter(config.value());
    doc["run"]["config"] = nlohmann::ordered_json::parse(json.str(), nullptr, false);
  }
  if (!abandoned.empty()) doc["run"]["abandoned"] = abandoned;
  doc["metrics"] = nlohmann::ordered_json::object();
  for (const Metric& m : r.metrics) doc["metrics"][m.name] = m.value;
  if (bootstrap) doc["bootstrap"] = bootstrap_json(*bootstrap);
  out << doc.dump(2) << '\n';
}

}  // namespace

Status print_report(const std::string& db_path, std::optional<int64_t> run_id, ReportFormat format,
                    std::ostream& out, const std::vector<double>& percentiles_given,
                    const std::optional<BootstrapOptions>& bootstrap_options) {
  if (bootstrap_options && format != ReportFormat::kText && format != ReportFormat::kJson) {
    return Error{"--bootstrap prints with --format text or json"};
  }
  Result<std::unique_ptr<Database>> db = Database::open_read_only(db_path);
  if (!db.ok()) return db.error();
  Result<StoredRun> run = read_stored_run(*db.value(), run_id);
  if (!run.ok()) return run.error();
  StoredRun r = run.value();
  std::optional<BootstrapResult> bootstrap;
  if (bootstrap_options) {
    Result<BootstrapResult> b =
        read_bootstrap(*db.value(), r.row.value("id", int64_t{0}), text_of(r.row, "backend") == "unit", *bootstrap_options);
    if (!b.ok()) return b.error();
    bootstrap = std::move(b).value();
  }
  // The percentiles asked for, else the run's own --metric-percentiles.
  std::vector<double> percentiles = percentiles_given;
  if (percentiles.empty()) percentiles = run_percentiles(text_of(r.row, "config"));
  std::vector<std::string> unavailable;
  if (Status s = add_stored_percentiles(*db.value(), r, percentiles, unavailable); !s.ok()) return s;
  const std::string abandoned = mark_abandoned(r);
  switch (format) {
    case ReportFormat::kText:
      print_summary(out, stored_header(r, db_path, percentiles), r.metrics);
      print_report_notes(out, r, unavailable, abandoned, bootstrap);
      break;
    case ReportFormat::kJson:
      print_report_json(out, r, abandoned, bootstrap);
      break;
    case ReportFormat::kCsv:
      out << "name,value\n";
      for (const Metric& m : r.metrics) out << m.name << ',' << shortest(m.value) << '\n';
      break;
    case ReportFormat::kVllmJson: {
      Result<nlohmann::ordered_json> doc = vllm_result(*db.value(), r, percentiles);
      if (!doc.ok()) return doc.error();
      out << doc.value().dump() << '\n';  // one line, as vLLM's json.dump
      break;
    }
  }
  return Ok{};
}

Result<ReportFormat> parse_report_format(std::string_view s) {
  if (s == "text") return ReportFormat::kText;
  if (s == "json") return ReportFormat::kJson;
  if (s == "csv") return ReportFormat::kCsv;
  if (s == "vllm-json") return ReportFormat::kVllmJson;
  return Error{"unknown report format '" + std::string(s) + "'; expected text, json, csv or vllm-json"};
}

}  // namespace servesim
