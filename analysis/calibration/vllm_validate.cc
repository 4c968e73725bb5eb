#include "analysis/calibration/vllm_validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "analysis/reports/text_table.h"
#include "sim/config/presets.h"

namespace servesim {
namespace {

// Sorted values as runs, one per distinct value.
std::vector<WeightedValue> runs_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::vector<WeightedValue> out;
  for (double v : values) {
    if (!out.empty() && out.back().value == v) {
      ++out.back().count;
    } else {
      out.push_back({v, 1});
    }
  }
  return out;
}

int64_t count_of(const std::vector<WeightedValue>& s) {
  int64_t n = 0;
  for (const WeightedValue& v : s) n += v.count;
  return n;
}

double mean_of(const std::vector<WeightedValue>& s) {
  double sum = 0;
  for (const WeightedValue& v : s) sum += v.value * static_cast<double>(v.count);
  return s.empty() ? 0.0 : sum / static_cast<double>(count_of(s));
}

// The file position of a request id "r<i>".
size_t position(const std::string& id) { return static_cast<size_t>(std::stoull(id.substr(1))); }

const char* title(const std::string& name) {
  if (name == "ttft") return "TTFT (time to first token)";
  if (name == "tpot") return "TPOT (time per output token, excl. 1st)";
  if (name == "itl") return "ITL (every inter-token gap)";
  return "E2E latency";
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string percent(const std::optional<double>& e) {
  if (!e) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%%", *e * 100);
  return buf;
}

nlohmann::ordered_json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

VllmRequestRecorder::VllmRequestRecorder(size_t size) : records_(size) {
  for (VllmBenchRequest& r : records_) r.error = "not simulated";
}

void VllmRequestRecorder::on_iteration(const IterationRecord& /*it*/, std::span<const BatchItem> items) {
  for (const BatchItem& item : items) {
    if (item.token_gap >= 0) gaps_[item.seq->index].push_back(to_seconds(item.token_gap));
  }
}

void VllmRequestRecorder::on_request(const Request& r) {
  const size_t i = position(r.id());
  if (i >= records_.size()) return;
  VllmBenchRequest& q = records_[i];
  q.input_len = r.prompt_tokens;
  q.start_time = to_seconds(r.arrival);
  q.queue_time = r.due >= 0 ? to_seconds(r.arrival - r.due) : 0.0;
  if (r.status == RequestStatus::kRejected) {
    q.error = "rejected: " + r.reason;
    return;
  }
  if (r.status != RequestStatus::kDone || r.finished < 0 || r.first_token < 0) {
    q.error = "unfinished";
    return;
  }
  q.error.clear();
  q.output_len = r.num_output;
  q.ttft = to_seconds(r.first_token - r.arrival);
  q.latency = to_seconds(r.finished - r.arrival);
  position_[r.index] = i;
}

void VllmRequestRecorder::on_run_end(RunOutcome /*outcome*/, const std::string& /*error*/) {
  // A request is settled before the iteration that emitted its last token is reported, so its
  // gaps are attached only now.
  for (auto& [index, gaps] : gaps_) {
    if (auto it = position_.find(index); it != position_.end()) records_[it->second].itls = std::move(gaps);
  }
  gaps_.clear();
}

LatencySamples latency_samples(const std::vector<VllmBenchRequest>& records) {
  std::vector<double> ttft, tpot, itl, e2el;
  for (const VllmBenchRequest& q : records) {
    if (q.failed()) continue;
    ttft.push_back(q.ttft);
    if (q.output_len > 1) tpot.push_back((q.latency - q.ttft) / (q.output_len - 1));
    itl.insert(itl.end(), q.itls.begin(), q.itls.end());
    e2el.push_back(q.latency);
  }
  return {runs_of(std::move(ttft)), runs_of(std::move(tpot)), runs_of(std::move(itl)), runs_of(std::move(e2el))};
}

LatencyComparison compare_latency(const std::string& name, const std::vector<WeightedValue>& measured,
                                  const std::vector<WeightedValue>& simulated) {
  LatencyComparison c;
  c.name = name;
  c.measured_n = count_of(measured);
  c.simulated_n = count_of(simulated);
  c.measured_mean = mean_of(measured);
  c.simulated_mean = mean_of(simulated);
  if (measured.empty() || simulated.empty()) return c;
  double sum = 0;
  int counted = 0;
  for (double p : kStandardPercentiles) {
    PercentileComparison pc;
    pc.p = p;
    pc.measured = weighted_percentile(measured, p);
    pc.simulated = weighted_percentile(simulated, p);
    if (pc.measured != 0) {
      pc.error = (pc.simulated - pc.measured) / pc.measured;
      sum += std::abs(*pc.error);
      ++counted;
    }
    c.percentiles.push_back(pc);
  }
  if (counted > 0) c.mape = sum / counted;
  c.ks = ks_two_sample(measured, simulated);
  return c;
}

std::vector<LatencyComparison> compare_latencies(const std::vector<VllmBenchRequest>& measured,
                                                 const std::vector<VllmBenchRequest>& simulated) {
  const LatencySamples m = latency_samples(measured), s = latency_samples(simulated);
  return {compare_latency("ttft", m.ttft, s.ttft), compare_latency("tpot", m.tpot, s.tpot),
          compare_latency("itl", m.itl, s.itl), compare_latency("e2el", m.e2el, s.e2el)};
}

namespace {

nlohmann::ordered_json latency_json(const LatencyComparison& l) {
  nlohmann::ordered_json e;
  e["n"] = {{"measured", l.measured_n}, {"simulated", l.simulated_n}};
  e["mean_s"] = {{"measured", l.measured_mean}, {"simulated", l.simulated_mean}};
  nlohmann::ordered_json ps = nlohmann::ordered_json::array();
  for (const PercentileComparison& p : l.percentiles) {
    ps.push_back({{"p", p.p}, {"measured_s", p.measured}, {"simulated_s", p.simulated},
                  {"error", optional_json(p.error)}});
  }
  e["percentiles"] = std::move(ps);
  e["mape"] = optional_json(l.mape);
  if (l.ks) {
    e["ks"] = {{"d", l.ks->d}, {"p_value", l.ks->p_value}, {"n_effective", l.ks->n_effective}};
  } else {
    e["ks"] = nullptr;
  }
  return e;
}

void print_comparison_json(const VllmComparison& c, const std::string& model, const std::string& hardware,
                           std::ostream& out) {
  nlohmann::ordered_json j;
  j["file"] = c.file;
  j["requests"] = {{"in_file", c.requests}, {"failed", c.failed}, {"replayed", c.simulated},
                   {"simulated_completed", c.sim_completed}, {"simulated_rejected", c.sim_rejected},
                   {"simulated_unfinished", c.sim_unfinished}};
  j["arrivals"] = c.arrivals;
  j["simulated"] = {{"policy", c.header.policy}, {"hardware", hardware}, {"model", model},
                    {"tp", c.header.tp}, {"replicas", c.header.replicas}};
  // The run is kept only with --db.
  j["simulated"]["run_id"] = c.header.db_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.header.run_id);
  j["simulated"]["db"] = c.header.db_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.header.db_path);
  j["output_throughput"] = {{"measured", optional_json(c.measured_output_throughput)},
                            {"simulated", optional_json(c.simulated_output_throughput)}};
  nlohmann::ordered_json lat = nlohmann::ordered_json::object();
  for (const LatencyComparison& l : c.latencies) lat[l.name] = latency_json(l);
  j["latencies"] = std::move(lat);
  out << j.dump(2) << "\n";
}

// One latency's table: n, mean and percentiles, measured and simulated, and the error; then its
// MAPE and KS distance.
void print_latency_text(const LatencyComparison& l, std::ostream& out) {
  out << "\n" << title(l.name) << ", ms\n";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"", "n", "mean"};
  for (double p : kStandardPercentiles) head.push_back("p" + percentile_suffix(p).substr(2));
  rows.push_back(head);
  std::vector<std::string> m = {"measured", std::to_string(l.measured_n), fixed(l.measured_mean * 1000, 2)};
  std::vector<std::string> s = {"simulated", std::to_string(l.simulated_n), fixed(l.simulated_mean * 1000, 2)};
  std::vector<std::string> e = {"error", "",
                                percent(l.measured_mean > 0 ? std::optional<double>((l.simulated_mean - l.measured_mean) /
                                                                                    l.measured_mean)
                                                            : std::nullopt)};
  for (const PercentileComparison& p : l.percentiles) {
    m.push_back(fixed(p.measured * 1000, 2));
    s.push_back(fixed(p.simulated * 1000, 2));
    e.push_back(percent(p.error));
  }
  rows.push_back(m);
  rows.push_back(s);
  rows.push_back(e);
  print_aligned(out, rows, [](size_t i) { return i == 0; });
  if (l.ks) {
    char line[200];
    std::snprintf(line, sizeof line, "MAPE over the percentiles %s; KS distance D = %.4f, p = %.3g (n_eff %.1f)\n",
                  l.mape ? (fixed(*l.mape * 100, 1) + "%").c_str() : "-", l.ks->d, l.ks->p_value,
                  l.ks->n_effective);
    out << line;
  } else {
    out << "no values on " << (l.measured_n == 0 ? "the measured" : "the simulated") << " side\n";
  }
}

}  // namespace

void print_vllm_comparison(const VllmComparison& c, ReportFormat format, std::ostream& out) {
  const std::string model = preset_display_name(c.header.model, PresetKind::kModel);
  const std::string hardware = preset_display_name(c.header.hardware, PresetKind::kHardware);
  if (format == ReportFormat::kJson) {
    print_comparison_json(c, model, hardware, out);
    return;
  }
  out << "Measured: " << c.file << " (vllm bench serve)\n"
      << "  " << c.requests << " requests, " << c.failed << " failed (left out of both sides)\n"
      << "Simulated: the " << c.simulated << " successful requests, arrivals " << c.arrivals << "\n"
      << "  " << model << " on " << hardware << ", tp " << c.header.tp;
  if (c.header.replicas > 1) out << " x " << c.header.replicas << " replicas";
  out << ", policy " << c.header.policy;
  if (!c.header.db_path.empty()) out << "; run " << c.header.run_id << " in " << c.header.db_path;
  out << "\n\n";
  const auto tput = [](const std::optional<double>& v) { return v ? fixed(*v, 1) : std::string("-"); };
  std::optional<double> tput_error;
  if (c.measured_output_throughput && c.simulated_output_throughput && *c.measured_output_throughput > 0) {
    tput_error = (*c.simulated_output_throughput - *c.measured_output_throughput) / *c.measured_output_throughput;
  }
  print_aligned(out,
                {{"", "measured", "simulated", "error"},
                 {"successful requests", std::to_string(c.requests - c.failed), std::to_string(c.sim_completed)},
                 {"failed / rejected", std::to_string(c.failed), std::to_string(c.sim_rejected + c.sim_unfinished)},
                 {"output throughput (tok/s)", tput(c.measured_output_throughput), tput(c.simulated_output_throughput),
                  percent(tput_error)}},
                [](size_t i) { return i == 0; });
  for (const LatencyComparison& l : c.latencies) print_latency_text(l, out);
}

nlohmann::ordered_json vllm_detailed_result(const VllmBenchResult& measured,
                                            const std::vector<VllmBenchRequest>& simulated) {
  nlohmann::ordered_json j;
  j["backend"] = "servesim";
  j["model_id"] = measured.model_id;
  j["num_prompts"] = simulated.size();
  if (std::isinf(measured.request_rate) || measured.request_rate <= 0) {
    j["request_rate"] = "inf";
  } else {
    j["request_rate"] = measured.request_rate;
  }
  j["burstiness"] = measured.burstiness;
  j["max_concurrency"] = measured.max_concurrency > 0 ? nlohmann::ordered_json(measured.max_concurrency)
                                                      : nlohmann::ordered_json(nullptr);
  // Duration and throughput as vLLM computes them: from the first send to the last token.
  double first = INFINITY, last = -INFINITY;
  int64_t completed = 0, input_tokens = 0, output_tokens = 0;
  for (const VllmBenchRequest& q : simulated) {
    if (q.failed()) continue;
    ++completed;
    input_tokens += q.input_len;
    output_tokens += q.output_len;
    first = std::min(first, q.start_time);
    last = std::max(last, q.start_time + q.latency);
  }
  const double duration = completed > 0 ? last - first : 0.0;
  j["duration"] = duration;
  j["completed"] = completed;
  j["failed"] = static_cast<int64_t>(simulated.size()) - completed;
  j["total_input_tokens"] = input_tokens;
  j["total_output_tokens"] = output_tokens;
  j["output_throughput"] = duration > 0 ? static_cast<double>(output_tokens) / duration : 0.0;
  nlohmann::ordered_json in = nlohmann::ordered_json::array(), out = in, ttfts = in, itls = in, latencies = in,
                         starts = in, queues = in, texts = in, errors = in;
  for (const VllmBenchRequest& q : simulated) {
    in.push_back(q.input_len);
    out.push_back(q.output_len);
    ttfts.push_back(q.ttft);
    itls.push_back(q.itls);
    latencies.push_back(q.latency);
    starts.push_back(q.start_time);
    queues.push_back(q.queue_time);
    texts.push_back("");
    errors.push_back(q.error);
  }
  j[kVllmInputLens] = std::move(in);
  j[kVllmOutputLens] = std::move(out);
  j[kVllmTtfts] = std::move(ttfts);
  j[kVllmItls] = std::move(itls);
  j[kVllmLatencies] = std::move(latencies);
  j[kVllmStartTimes] = std::move(starts);
  j[kVllmQueueTimes] = std::move(queues);
  j[kVllmGeneratedTexts] = std::move(texts);
  j[kVllmErrors] = std::move(errors);
  return j;
}

}  // namespace servesim
