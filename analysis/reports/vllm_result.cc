#include "analysis/reports/vllm_result.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <toml++/toml.h>

#include "analysis/storage/database.h"
#include "analysis/storage/request_rows.h"
#include "sim/config/presets.h"
#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

std::optional<double> metric(const StoredRun& run, const std::string& name) {
  return find_metric(run.metrics, name);
}

int64_t run_id_of(const StoredRun& run) { return run.row.value("id", int64_t{0}); }

std::string text_column(const StoredRun& run, const char* column) {
  const auto it = run.row.find(column);
  return it != run.row.end() && it->is_string() ? it->get<std::string>() : "";
}

// "20261201-044331" from "2026-12-01T04:43:31.123Z", as vLLM dates its results.
std::string vllm_date(const std::string& iso) {
  std::string digits;
  for (char c : iso.substr(0, 19)) {
    if (c >= '0' && c <= '9') digits += c;
  }
  if (digits.size() != 14) return iso;
  return digits.substr(0, 8) + "-" + digits.substr(8);
}

// The largest number of requests in flight in one second, as vLLM's calculate_metrics counts
// it: each finished request is in flight in every whole second from its start to its end, counted
// from the first start (a difference array instead of vLLM's loop over seconds).
int64_t max_concurrent(const std::vector<RequestRow>& requests) {
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const RequestRow& r : requests) {
    if (!r.finished_ok) continue;
    first = std::min(first, r.arrival);
    last = std::max(last, r.finished);
  }
  if (!(last >= first)) return 0;
  const auto seconds = static_cast<size_t>(std::ceil(last - first)) + 2;
  std::vector<int64_t> delta(seconds + 1, 0);
  for (const RequestRow& r : requests) {
    if (!r.finished_ok) continue;
    ++delta[static_cast<size_t>(r.arrival - first)];
    --delta[static_cast<size_t>(r.finished - first) + 1];
  }
  int64_t now = 0, most = 0;
  for (int64_t d : delta) most = std::max(most, now += d);
  return most;
}

}  // namespace

Result<std::optional<double>> stored_percentile(Database& db, const StoredRun& run, std::string_view latency,
                                                double p) {
  const std::string name = std::string(latency) + percentile_suffix(p);
  if (std::optional<double> v = metric(run, name)) return v;
  sqlite3_stmt* s = nullptr;
  const char* sql =
      "SELECT value FROM distributions WHERE run_id = ? AND metric = ? AND abs(quantile - ?) < 1e-12";
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &s, nullptr) == SQLITE_OK) {  // absent before schema 5
    sqlite3_bind_int64(s, 1, run_id_of(run));
    sqlite3_bind_text(s, 2, std::string(latency).c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 3, p / 100);
    std::optional<double> found;
    if (sqlite3_step(s) == SQLITE_ROW) found = sqlite3_column_double(s, 0);
    sqlite3_finalize(s);
    if (found) return found;
  }
  if (latency == "itl") return std::optional<double>{};  // the gaps are not in the database
  Result<std::vector<RequestRow>> requests = read_request_rows(db, run_id_of(run));
  if (!requests.ok()) return requests.error();
  std::vector<double> values = latency_values(requests.value(), latency);
  if (values.empty()) return std::optional<double>{};
  std::sort(values.begin(), values.end());
  return std::optional<double>(percentile(values, p));
}

namespace {

// The rate the run was sent at: its configuration's request_rate, else by its arrivals' span.
nlohmann::ordered_json request_rate_json(const toml::table& config, const std::vector<RequestRow>& requests) {
  if (std::optional<double> rate = config["request_rate"].value<double>()) {
    if (std::isinf(*rate)) return "inf";
    return *rate;
  }
  if (requests.size() >= 2 && requests.back().arrival > requests.front().arrival) {
    return static_cast<double>(requests.size()) / (requests.back().arrival - requests.front().arrival);
  }
  return "inf";
}

// The busiest timeline bucket's tokens, per second.
double busiest_tokens_per_s(Database& db, int64_t run_id, double resolution) {
  double max_tokens_per_s = 0;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db.handle(),
                         "SELECT sum(emitted) FROM timeline WHERE run_id = ? GROUP BY bucket "
                         "ORDER BY 1 DESC LIMIT 1",
                         -1, &s, nullptr) == SQLITE_OK) {
    sqlite3_bind_int64(s, 1, run_id);
    if (sqlite3_step(s) == SQLITE_ROW) max_tokens_per_s = sqlite3_column_double(s, 0) / resolution;
    sqlite3_finalize(s);
  }
  return max_tokens_per_s;
}

// Each latency's mean, median, std and percentiles, in milliseconds; a percentile not computed
// during the run is noted.
Status add_latency_keys(Database& db, const StoredRun& run, const std::vector<double>& percentiles,
                        nlohmann::ordered_json& j, nlohmann::ordered_json& notes) {
  for (const char* latency : {"ttft", "tpot", "itl", "e2el"}) {
    const std::string l(latency);
    const auto ms = [&](const std::string& metric_name) { return metric(run, metric_name).value_or(0.0) * 1000; };
    j["mean_" + l + "_ms"] = ms(l + "_mean");
    j["median_" + l + "_ms"] = ms(l + "_p50");
    j["std_" + l + "_ms"] = ms(l + "_std");
    for (double p : percentiles) {
      const std::string key = "p" + percentile_suffix(p).substr(2) + "_" + l + "_ms";
      Result<std::optional<double>> v = stored_percentile(db, run, l, p);
      if (!v.ok()) return v.error();
      if (v.value()) {
        j[key] = *v.value() * 1000;
      } else if (!metric(run, l + "_mean")) {
        j[key] = 0.0;  // no values at all: vLLM's np.percentile([] or 0) is 0
      } else {
        j[key] = nullptr;
        notes.push_back(key + " was not computed during the run; rerun with --metric-percentiles " +
                        percentile_suffix(p).substr(2));
      }
    }
  }
  return Ok{};
}

}  // namespace

Result<nlohmann::ordered_json> vllm_result(Database& db, const StoredRun& run,
                                           const std::vector<double>& percentiles_given) {
  const std::vector<double> percentiles = percentiles_given.empty() ? std::vector<double>{99} : percentiles_given;
  const int64_t run_id = run_id_of(run);
  Result<std::vector<RequestRow>> read = read_request_rows(db, run_id);
  if (!read.ok()) return read.error();
  const std::vector<RequestRow>& requests = read.value();
  nlohmann::ordered_json notes = nlohmann::ordered_json::array();

  toml::table config;
  if (Result<toml::table> parsed = parse_toml(text_column(run, "config"), "config"); parsed.ok()) {
    config = std::move(parsed.value());
  }
  const auto count = [&](const char* name) {
    return static_cast<int64_t>(std::llround(metric(run, name).value_or(0)));
  };
  const auto value = [&](const char* name) { return metric(run, name).value_or(0.0); };
  const auto or_null = [](std::optional<double> v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr); };

  nlohmann::ordered_json j;
  j["date"] = vllm_date(text_column(run, "started_at"));
  j["endpoint_type"] = "servesim";
  j["backend"] = "servesim";
  const std::string name = text_column(run, "name");
  j["label"] = name.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(name);
  const std::string model = preset_display_name(text_column(run, "model"), PresetKind::kModel);
  j["model_id"] = model;
  j["tokenizer_id"] = model;
  const int64_t completed = count("completed");
  const int64_t sent = requests.empty() ? completed + count("rejected") : static_cast<int64_t>(requests.size());
  j["num_prompts"] = sent;
  j["request_rate"] = request_rate_json(config, requests);
  j["burstiness"] = config["burstiness"].value<double>().value_or(1.0);
  if (std::optional<int64_t> c = config["max_concurrency"].value<int64_t>()) {
    j["max_concurrency"] = *c;
  } else {
    j["max_concurrency"] = nullptr;
  }
  j["duration"] = value("duration");
  j["completed"] = completed;
  j["failed"] = sent - completed;
  j["total_input_tokens"] = count("total_input_tokens");
  j["total_output_tokens"] = count("total_output_tokens");
  j["request_throughput"] = value("request_throughput");
  j["request_goodput"] = or_null(metric(run, "request_goodput"));
  j["output_throughput"] = value("output_throughput");
  j["total_token_throughput"] = value("total_token_throughput");
  nlohmann::ordered_json latencies = nlohmann::ordered_json::array(), queue_times = nlohmann::ordered_json::array();
  for (const RequestRow& r : requests) {
    latencies.push_back(r.finished_ok ? r.finished - r.arrival : 0.0);
    queue_times.push_back(0.0);
  }
  if (requests.empty() && sent > 0) {
    notes.push_back("no requests rows (the run was logged with --log summary): latencies and queue_times are empty");
  }
  j["latencies"] = std::move(latencies);
  j["queue_times"] = std::move(queue_times);
  j["max_output_tokens_per_s"] = busiest_tokens_per_s(db, run_id, config["log_resolution"].value<double>().value_or(1.0));
  j["max_concurrent_requests"] = max_concurrent(requests);
  j["rtfx"] = 0.0;
  if (Status s = add_latency_keys(db, run, percentiles, j, notes); !s.ok()) return s.error();
  j["servesim"] = {{"run_id", run_id}, {"db", db.path()}, {"notes", notes}};
  return j;
}

}  // namespace servesim
