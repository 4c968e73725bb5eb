#include "workloads/vllm_bench_result.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "sim/config/json_text.h"
#include "sim/config/toml_fields.h"
#include "workloads/generate.h"

namespace servesim {
namespace {

using nlohmann::json;

// A detailed result carries every prompt and response text: allow far more than a configuration.
constexpr size_t kMaxResultBytes = size_t{1} << 30;

// Reads the keys of one result object, each error naming the file and the key.
class ResultFields {
 public:
  ResultFields(const json& j, const std::string& path) : j_(j), path_(path) {}

  Error error(const std::string& where, const std::string& what) const {
    return Error{path_ + ": " + where + ": " + what};
  }

  const json* find(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  // A per-request list that must be there (written by --save-detailed).
  Result<const json*> list(const char* key, bool required) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (!required) return static_cast<const json*>(nullptr);
      return error(key, "missing: the per-request lists come only with `vllm bench serve --save-result "
                        "--save-detailed`; rerun the benchmark with --save-detailed");
    }
    if (!v->is_array()) return error(key, "expected a list (one entry per request), got " + json_excerpt(*v));
    return v;
  }

  // A number >= 0 at `where`.
  Result<double> seconds(const json& v, const std::string& where) const {
    if (!v.is_number()) return error(where, "expected a number of seconds >= 0, got " + json_excerpt(v));
    const double x = v.get<double>();
    if (!(x >= 0) || std::isinf(x)) return error(where, "expected a number of seconds >= 0, got " + json_excerpt(v));
    return x;
  }

  // A whole number of tokens in [0, kMaxTokens] at `where`.
  Result<int32_t> tokens(const json& v, const std::string& where) const {
    const bool whole = v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>());
    if (!whole || !(v.get<double>() >= 0) || v.get<double>() > kMaxTokens) {
      return error(where, "expected a whole number of tokens from 0 to " + std::to_string(kMaxTokens) + ", got " +
                              json_excerpt(v));
    }
    return static_cast<int32_t>(v.get<double>());
  }

 private:
  const json& j_;
  const std::string& path_;
};

std::string at(const char* key, size_t i) { return std::string(key) + "[" + std::to_string(i) + "]"; }

Status read_header(const ResultFields& f, VllmBenchResult& r) {
  if (const json* v = f.find("model_id"); v != nullptr && !v->is_null()) {
    if (!v->is_string()) return f.error("model_id", "expected a string, got " + json_excerpt(*v));
    r.model_id = v->get<std::string>();
  }
  if (const json* v = f.find("request_rate"); v != nullptr && !v->is_null()) {
    if (v->is_string() && (v->get<std::string>() == "inf" || v->get<std::string>() == "Infinity")) {
      r.request_rate = std::numeric_limits<double>::infinity();
    } else if (v->is_number() && v->get<double>() > 0) {
      r.request_rate = v->get<double>();
    } else {
      return f.error("request_rate", "expected requests per second > 0 or \"inf\", got " + json_excerpt(*v));
    }
  }
  if (const json* v = f.find("burstiness"); v != nullptr && !v->is_null()) {
    if (!v->is_number() || !(v->get<double>() > 0)) {
      return f.error("burstiness", "expected a gamma shape > 0, got " + json_excerpt(*v));
    }
    r.burstiness = v->get<double>();
  }
  if (const json* v = f.find("max_concurrency"); v != nullptr && !v->is_null()) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1) {
      return f.error("max_concurrency", "expected null or a whole number >= 1, got " + json_excerpt(*v));
    }
    r.max_concurrency = v->get<int64_t>();
  }
  if (const json* v = f.find("ramp_up_strategy"); v != nullptr && !v->is_null()) r.ramp_up = true;
  for (auto [key, out] : {std::pair{"duration", &r.duration}, std::pair{"output_throughput", &r.output_throughput}}) {
    const json* v = f.find(key);
    if (v == nullptr || v->is_null()) continue;
    Result<double> x = f.seconds(*v, key);
    if (!x.ok()) return f.error(key, "expected a number >= 0, got " + json_excerpt(*v));
    *out = x.value();
  }
  return Ok{};
}

// A successful request's gaps against its tokens: one gap between consecutive chunks, a chunk
// holding one token or more, so at most output_len - 1 gaps; and the last chunk comes no later
// than the response ends (ttft + the gaps <= latency, within a microsecond per gap for rounding).
Status check_token_gaps(const ResultFields& f, const VllmBenchRequest& q, size_t i, bool has_latency) {
  if (q.failed()) return Ok{};
  if (q.itls.size() + 1 > static_cast<size_t>(q.output_len)) {
    return f.error(at(kVllmItls, i), std::to_string(q.itls.size()) + " gaps between chunks for " +
                                         std::to_string(q.output_len) + " output tokens (output_lens[" +
                                         std::to_string(i) + "]): at most " + std::to_string(q.output_len - 1) +
                                         " (one between each two tokens); the lists do not describe the same response");
  }
  if (has_latency) {
    const double last_chunk = q.ttft + std::accumulate(q.itls.begin(), q.itls.end(), 0.0);
    if (last_chunk > q.latency + 1e-6 * static_cast<double>(q.itls.size() + 1)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "ttft + the gaps = %.6g s, after the response ended (latencies[%zu] = %.6g s)",
                    last_chunk, i, q.latency);
      return f.error(at(kVllmItls, i), buf);
    }
  }
  return Ok{};
}

}  // namespace

int64_t VllmBenchResult::failed_count() const {
  return std::count_if(requests.begin(), requests.end(), [](const VllmBenchRequest& q) { return q.failed(); });
}

namespace {

// A result's per-request lists, each as long as input_lens; the optional ones nullptr when absent.
struct ResultLists {
  const json *inputs, *outputs, *ttfts, *itls, *errors;
  const json *latencies, *starts, *queues;
  size_t n;
};

// The lists, each checked against input_lens.
Result<ResultLists> read_lists(const ResultFields& f) {
  const char* required[] = {kVllmInputLens, kVllmOutputLens, kVllmTtfts, kVllmItls, kVllmErrors};
  const char* optional[] = {kVllmLatencies, kVllmStartTimes, kVllmQueueTimes};
  std::vector<std::pair<const char*, const json*>> lists;
  for (const char* key : required) {
    Result<const json*> l = f.list(key, true);
    if (!l.ok()) return l.error();
    lists.emplace_back(key, l.value());
  }
  for (const char* key : optional) {
    Result<const json*> l = f.list(key, false);
    if (!l.ok()) return l.error();
    lists.emplace_back(key, l.value());
  }
  const size_t n = lists.front().second->size();
  for (const auto& [key, l] : lists) {
    if (l != nullptr && l->size() != n) {
      return f.error(key, "has " + std::to_string(l->size()) + " entries, but input_lens has " + std::to_string(n) +
                              " (one per request in each)");
    }
  }
  if (n == 0) return f.error(kVllmInputLens, "no requests (an empty list)");
  return ResultLists{lists[0].second, lists[1].second, lists[2].second, lists[3].second, lists[4].second,
                     lists[5].second, lists[6].second, lists[7].second, n};
}

// Seconds at `key`[i] of an optional list, into `to`; nothing when the list is absent.
Status read_optional_seconds(const ResultFields& f, const json* list, const char* key, size_t i, double& to) {
  if (list == nullptr) return Ok{};
  Result<double> v = f.seconds((*list)[i], at(key, i));
  if (!v.ok()) return v.error();
  to = v.value();
  return Ok{};
}

// Request i: its entry in each list.
Status read_request(const ResultFields& f, const ResultLists& l, size_t i, VllmBenchRequest& q) {
  const json& e = (*l.errors)[i];
  if (!e.is_string() && !e.is_null()) return f.error(at(kVllmErrors, i), "expected a string, got " + json_excerpt(e));
  if (e.is_string()) q.error = e.get<std::string>();
  Result<int32_t> in = f.tokens((*l.inputs)[i], at(kVllmInputLens, i));
  if (!in.ok()) return in.error();
  Result<int32_t> out = f.tokens((*l.outputs)[i], at(kVllmOutputLens, i));
  if (!out.ok()) return out.error();
  q.input_len = in.value();
  q.output_len = out.value();
  Result<double> ttft = f.seconds((*l.ttfts)[i], at(kVllmTtfts, i));
  if (!ttft.ok()) return ttft.error();
  q.ttft = ttft.value();
  const json& gaps = (*l.itls)[i];
  if (!gaps.is_array()) return f.error(at(kVllmItls, i), "expected a list of seconds, got " + json_excerpt(gaps));
  q.itls.reserve(gaps.size());
  for (size_t k = 0; k < gaps.size(); ++k) {
    Result<double> gap = f.seconds(gaps[k], at(kVllmItls, i) + "[" + std::to_string(k) + "]");
    if (!gap.ok()) return gap.error();
    q.itls.push_back(gap.value());
  }
  if (l.latencies == nullptr) q.latency = q.ttft + std::accumulate(q.itls.begin(), q.itls.end(), 0.0);
  if (Status s = read_optional_seconds(f, l.latencies, kVllmLatencies, i, q.latency); !s.ok()) return s;
  if (Status s = read_optional_seconds(f, l.starts, kVllmStartTimes, i, q.start_time); !s.ok()) return s;
  if (Status s = read_optional_seconds(f, l.queues, kVllmQueueTimes, i, q.queue_time); !s.ok()) return s;
  if (!q.failed() && q.output_len < 1) {
    return f.error(at(kVllmOutputLens, i), "a successful request (no error) with 0 output tokens");
  }
  if (!q.failed() && q.input_len < 1) {
    return f.error(at(kVllmInputLens, i), "a successful request (no error) with an empty prompt");
  }
  return check_token_gaps(f, q, i, l.latencies != nullptr);
}

}  // namespace

Result<VllmBenchResult> read_vllm_bench_result(const std::string& path) {
  Result<std::string> text = read_text_file(path, kMaxResultBytes);
  if (!text.ok()) return text.error();
  json j;
  if (std::optional<JsonParseFailure> failure = parse_json(text.value(), j)) {
    const auto [line, col] = json_line_col(text.value(), failure->byte);
    return Error{path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": not JSON (" +
                 failure->message + "); expected the file of `vllm bench serve --save-result --save-detailed` "
                 "(one result: --append-result files hold several, one per line)"};
  }
  if (!j.is_object()) {
    return Error{path + ": expected a JSON object (a vllm bench serve result), got " + json_excerpt(j)};
  }
  const ResultFields f(j, path);
  VllmBenchResult r;
  r.path = path;
  if (Status s = read_header(f, r); !s.ok()) return s.error();
  Result<ResultLists> lists = read_lists(f);
  if (!lists.ok()) return lists.error();
  const ResultLists& l = lists.value();
  r.has_latencies = l.latencies != nullptr;
  r.has_start_times = l.starts != nullptr;
  r.has_queue_times = l.queues != nullptr;
  r.requests.resize(l.n);
  for (size_t i = 0; i < l.n; ++i) {
    if (Status s = read_request(f, l, i, r.requests[i]); !s.ok()) return s.error();
  }
  return r;
}

Result<Workload> vllm_bench_workload(const VllmBenchResult& result, uint64_t seed) {
  std::vector<size_t> kept;
  for (size_t i = 0; i < result.requests.size(); ++i) {
    if (!result.requests[i].failed()) kept.push_back(i);
  }
  if (kept.empty()) {
    return Error{result.path + ": errors: every one of the " + std::to_string(result.requests.size()) +
                 " requests failed; there is nothing to compare"};
  }
  std::vector<double> arrivals(kept.size(), 0.0);
  if (result.has_start_times) {
    for (size_t k = 0; k < kept.size(); ++k) {
      const VllmBenchRequest& q = result.requests[kept[k]];
      arrivals[k] = q.start_time - q.queue_time;  // when the client meant to send it
    }
    const double first = *std::min_element(arrivals.begin(), arrivals.end());
    for (double& a : arrivals) a -= first;
    if (!(*std::max_element(arrivals.begin(), arrivals.end()) <= kTimeHorizonSeconds)) {
      return Error{result.path + ": start_times: the requests span more than 1e9 s; expected the send times of "
                                 "one benchmark (seconds, any origin)"};
    }
  } else {
    if (result.ramp_up) {
      return Error{result.path + ": ramp_up_strategy: the benchmark ramped its rate up and the file has no "
                                 "start_times; its arrivals cannot be redrawn (rerun with --save-detailed)"};
    }
    if (result.request_rate <= 0) {
      return Error{result.path + ": request_rate: missing, and the file has no start_times: the arrivals "
                                 "are unknown"};
    }
    // vLLM bench's timing is what servesim's [generate] draws under request_rate and burstiness
    // (load_controls.h): n gamma gaps, the first request one gap after the start, the last at n / rate.
    toml::table g{{"requests", static_cast<int64_t>(kept.size())},
                  {"seed", static_cast<int64_t>(seed & 0x7fffffffffffffff)},
                  {"arrival", toml::table{{"process", "poisson"}, {"rate", 1.0}}},
                  {"output_tokens", toml::table{{"dist", "fixed"}, {"value", 1}}}};
    LoadControls load;
    load.request_rate = result.request_rate;
    if (!std::isinf(result.request_rate)) load.burstiness = result.burstiness;
    Result<Workload> drawn = generate_workload(g, result.path, std::nullopt, load);
    if (!drawn.ok()) return Error{result.path + ": request_rate, burstiness: " + drawn.error().message};
    for (size_t k = 0; k < kept.size(); ++k) arrivals[k] = to_seconds(drawn.value().requests[k].arrival);
  }
  Workload w;
  w.path = result.path;
  w.seed = result.has_start_times ? 0 : seed;
  w.requests.reserve(kept.size());
  for (size_t k = 0; k < kept.size(); ++k) {
    const VllmBenchRequest& q = result.requests[kept[k]];
    RequestSpec r;
    r.id = default_request_id(static_cast<int64_t>(kept[k]));
    r.arrival = from_seconds(arrivals[k]);
    r.prompt_tokens = q.input_len;
    r.output_tokens = q.output_len;
    r.max_tokens = q.output_len;  // vLLM bench asks for exactly the output it expects
    w.requests.push_back(std::move(r));
  }
  std::stable_sort(w.requests.begin(), w.requests.end(),
                   [](const RequestSpec& a, const RequestSpec& b) { return a.arrival < b.arrival; });
  return w;
}

}  // namespace servesim
