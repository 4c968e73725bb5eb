#include "analysis/metrics/metrics.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <iterator>
#include <system_error>
#include <thread>

#include "analysis/metrics/distributions.h"

namespace servesim {
namespace {

// Goodput as vLLM's: TPOT is 0 for a one-token response; each objective given must be met.
bool meets_slos(const MetricsOptions& o, const Request& r) {
  const double ttft = r.first_token >= 0 ? to_seconds(r.first_token - r.arrival) : 0;
  const double tpot = r.num_output > 1 && r.first_token >= 0
                          ? to_seconds(r.finished - r.first_token) / (r.num_output - 1)
                          : 0;
  const double e2el = to_seconds(r.finished - r.arrival);
  return (o.slo_ttft <= 0 || ttft <= o.slo_ttft) && (o.slo_tpot <= 0 || tpot <= o.slo_tpot) &&
         (o.slo_e2el <= 0 || e2el <= o.slo_e2el);
}

// The backlog test, with TTFT's and TPOT's distributions, runs on a second thread beside the
// other distributions from this many requests (below, not worth a thread).
constexpr size_t kBacklogBesideMin = size_t{1} << 14;

// Merges the sorted parts of v, part p ending at parts[p][kind] (the last at v's end), into one
// sorted whole, in place: pairs of neighbours at a time, so each value moves about log2(parts) times.
template <typename T, size_t N, typename Before>
void merge_parts(std::vector<T>& v, const std::vector<std::array<size_t, N>>& parts, size_t kind, Before before) {
  std::vector<size_t> ends;
  for (const auto& part : parts) ends.push_back(part[kind]);
  assert(!ends.empty() && ends.back() == v.size());
  while (ends.size() > 1) {
    std::vector<size_t> merged;
    size_t begin = 0;
    for (size_t i = 0; i < ends.size(); i += 2) {
      const size_t end = ends[std::min(i + 1, ends.size() - 1)];
      const auto at = [&v](size_t k) { return v.begin() + static_cast<std::ptrdiff_t>(k); };
      if (i + 1 < ends.size()) std::inplace_merge(at(begin), at(ends[i]), at(end), before);
      merged.push_back(end);
      begin = end;
    }
    ends.swap(merged);
  }
}

// clang-format off
constexpr auto kLatencies = std::to_array<std::string_view>({"ttft", "tpot", "itl", "e2el", "queue"});

// Every standard name: the counts and rates, each latency's mean, std and standard percentiles,
// then the rest.
const std::vector<std::string_view>& names() {
  static const std::vector<std::string> storage = [] {
    std::vector<std::string> v = {
        "completed", "rejected", "rejected_context_length", "rejected_kv_capacity",
        "rejected_batch_tokens", "rejected_parent", "capped", "total_input_tokens",
        "total_output_tokens", "duration",
        "request_throughput", "output_throughput", "total_token_throughput",
        "request_goodput", "slo_attainment"};
    for (std::string_view m : kLatencies) {
      v.push_back(std::string(m) + "_mean");
      v.push_back(std::string(m) + "_std");
      for (double p : kStandardPercentiles) v.push_back(std::string(m) + percentile_suffix(p));
    }
    for (const char* n : {"slot_utilization", "kv_utilization_mean", "preemptions", "iterations",
                          "prefix_hit_rate", "prefix_request_hit_rate", "prefix_cacheable_requests", "overloaded",
                          "backlog_growth", "backlog_growth_share", "gpus", "replica_groups",
                          "kv_blocks_per_replica", "kv_blocks_total", "kv_tokens_per_replica", "kv_gib_per_replica", "cost_per_hour",
                          "cost_per_million_output_tokens", "kv_transfers", "kv_transfer_gib",
                          "kv_transfer_wait_mean", "kv_transfer_wait_p99", "kv_transfer_time_mean",
                          "kv_transfer_time_p99", "prefill_utilization", "decode_utilization"}) {
      v.emplace_back(n);
    }
    return v;
  }();
  static const std::vector<std::string_view> views(storage.begin(), storage.end());
  return views;
}
// clang-format on

}  // namespace

std::span<const std::string_view> metric_names() { return names(); }

std::span<const std::string_view> latency_metrics() { return kLatencies; }

std::string percentile_suffix(double p) {
  // vLLM's p_word: str(int(p)) when p is whole, else str(p) (the shortest repr).
  char buf[64];
  const double whole = std::floor(p);
  const auto end = whole == p && std::abs(p) < 1e15
                       ? std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(whole)).ptr
                       : std::to_chars(buf, buf + sizeof buf, p).ptr;
  return "_p" + std::string(buf, end);
}

std::span<const double> quantile_grid() {
  static const std::vector<double> grid = [] {
    std::vector<double> g;
    for (int i = 0; i <= 100; ++i) g.push_back(i / 100.0);
    g.pop_back();  // 1 goes after the tail
    for (int i = 1; i <= 9; ++i) g.push_back(0.99 + i / 1000.0);
    g.push_back(0.9995);
    g.push_back(0.9999);
    g.push_back(1.0);
    return g;
  }();
  return grid;
}

std::optional<double> find_metric(std::span<const Metric> metrics, std::string_view name) {
  for (const Metric& m : metrics) {
    if (m.name == name) return m.value;
  }
  return std::nullopt;
}

MetricsAccumulator::MetricsAccumulator(MetricsOptions options) : options_(options) {
  // One sample per request of each kind: exact percentiles need them all (8 bytes each).
  if (options_.expected_requests > 0) {
    const auto n = static_cast<size_t>(options_.expected_requests);
    for (std::vector<double>* v : {&ttft_, &tpot_, &e2el_, &queue_}) v->reserve(n);
    outstanding_.reserve(n);
  }
}

void MetricsAccumulator::count_iteration(int32_t replica, Time duration, int32_t emitted,
                                         int64_t kv_used, int64_t kv_total) {
  ++iterations_;
  emitting_ns_ += static_cast<Wide>(emitted) * duration;
  if (!options_.pools.empty()) {
    if (busy_.size() <= static_cast<size_t>(replica)) busy_.resize(static_cast<size_t>(replica) + 1);
    busy_[static_cast<size_t>(replica)] += duration;
  }
  if (kv_total > 0) {
    kv_limited_ = true;
    const auto r = static_cast<size_t>(replica);
    if (kv_.size() <= r) kv_.resize(r + 1);
    kv_[r].used_ns += static_cast<Wide>(kv_used) * duration;
    kv_[r].ns += duration;
    kv_[r].total = kv_total;
  }
}

void MetricsAccumulator::on_iteration(const IterationRecord& it, std::span<const BatchItem> items) {
  count_iteration(it.replica, it.duration, it.emitted, it.kv_blocks_used, it.kv_blocks_total);
  if (it.grouped > 0) gaps_.add(it.group_gap, it.grouped);
  for (const BatchItem& item : items) {
    if (item.token_gap >= 0) gaps_.add(item.token_gap, 1);
  }
}

void MetricsAccumulator::on_decode_steps(const DecodeSteps& steps) {
  // As count_iteration for each step, summed by range first: durations in 64 bits (a leap is
  // shorter than the 10^9 s horizon), blocks x durations in 128.
  const auto n = static_cast<size_t>(steps.count);
  Time ns = 0;
  Wide used_ns = 0;
  for (const DecodeSteps::Range& range : steps.ranges) {
    ns += range.busy;
    used_ns += static_cast<Wide>(range.kv_blocks_used) * range.busy;
  }
  gaps_.add_decode_run(steps.durations, steps.count, steps.num_seqs);
  iterations_ += static_cast<int64_t>(n);
  if (!options_.pools.empty()) {
    if (busy_.size() <= static_cast<size_t>(steps.replica)) busy_.resize(static_cast<size_t>(steps.replica) + 1);
    busy_[static_cast<size_t>(steps.replica)] += ns;
  }
  emitting_ns_ += static_cast<Wide>(steps.num_seqs) * ns;
  if (steps.kv_blocks_total > 0 && n > 0) {
    kv_limited_ = true;
    const auto r = static_cast<size_t>(steps.replica);
    if (kv_.size() <= r) kv_.resize(r + 1);
    kv_[r].used_ns += used_ns;
    kv_[r].ns += ns;
    kv_[r].total = steps.kv_blocks_total;
  }
}

void MetricsAccumulator::on_request(const Request& r) {
  preemptions_ += r.preemptions;
  // A prompt without content (a trace of token counts) is its own: it shares nothing.
  if (options_.prefix_caching && r.spec != nullptr && !r.spec->prompt.empty()) ++cacheable_;
  if (r.status == RequestStatus::kRejected) {
    ++rejected_;
    ++rejected_by_cause_[static_cast<int>(r.cause)];
    return;
  }
  const bool finished = r.status == RequestStatus::kDone && r.finished >= 0;
  if (r.replica >= 0) {
    const Time due = r.due >= 0 ? r.due : r.arrival;
    constexpr double kNotYet = std::numeric_limits<double>::infinity();
    outstanding_.push_back({to_seconds(due), finished ? to_seconds(r.finished) : kNotYet,
                            r.scheduled >= 0 ? to_seconds(r.scheduled) : kNotYet});
  }
  if (!finished) return;  // unfinished (interrupted run)
  ++completed_;
  if (r.capped) ++capped_;
  input_tokens_ += r.prompt_tokens;
  output_tokens_ += r.num_output;
  cached_tokens_ += r.cached_tokens;
  if (r.cached_tokens > 0) ++cache_hits_;
  first_arrival_ = std::min(first_arrival_, r.arrival);
  last_finished_ = std::max(last_finished_, r.finished);
  e2el_.push_back(to_seconds(r.finished - r.arrival));
  if (r.first_token >= 0) {
    ttft_.push_back(to_seconds(r.first_token - r.arrival));
    if (r.num_output > 1) {
      tpot_.push_back(to_seconds(r.finished - r.first_token) / (r.num_output - 1));
    }
  }
  if (r.scheduled >= 0) queue_.push_back(to_seconds(r.scheduled - r.arrival));
  if (has_slos() && meets_slos(options_, r)) ++good_;
}

void MetricsAccumulator::on_transfer(const TransferRecord& t) {
  transfer_wait_.push_back(to_seconds(t.reserved - t.ready));
  transfer_time_.push_back(to_seconds(t.end - t.reserved));
  transfer_bytes_ += t.bytes;
}

// The counts, the run's duration and its rates; the duration.
double MetricsAccumulator::add_counts(std::vector<Metric>& out) const {
  auto count = [&](const char* name, int64_t n) { out.push_back({name, static_cast<double>(n)}); };
  count("completed", completed_);
  count("rejected", rejected_);
  for (int c = 1; c < kNumRejectCauses; ++c) {
    if (rejected_by_cause_[c] > 0) {
      count((std::string("rejected_") + reject_cause_name(static_cast<RejectCause>(c))).c_str(),
            rejected_by_cause_[c]);
    }
  }
  count("capped", capped_);
  count("total_input_tokens", input_tokens_);
  count("total_output_tokens", output_tokens_);
  const double duration = completed_ > 0 ? to_seconds(last_finished_ - first_arrival_) : 0;
  if (completed_ > 0) out.push_back({"duration", duration});
  if (duration > 0) {
    out.push_back({"request_throughput", static_cast<double>(completed_) / duration});
    out.push_back({"output_throughput", static_cast<double>(output_tokens_) / duration});
    out.push_back(
        {"total_token_throughput", static_cast<double>(input_tokens_ + output_tokens_) / duration});
    if (has_slos()) out.push_back({"request_goodput", static_cast<double>(good_) / duration});
  }
  if (has_slos() && completed_ + rejected_ > 0) {
    // Rejected requests count as misses: they were sent and never served.
    out.push_back({"slo_attainment", static_cast<double>(good_) / static_cast<double>(completed_ + rejected_)});
  }
  return duration;
}

// The latencies' distributions; the backlog's trend, found beside them.
BacklogTrend MetricsAccumulator::add_distributions(std::vector<Metric>& out,
                                                   std::vector<QuantilePoint>* quantiles) const {
  // The run's percentiles: the standard ones and any asked for, ascending, each once.
  std::vector<double> percentiles(std::begin(kStandardPercentiles), std::end(kStandardPercentiles));
  percentiles.insert(percentiles.end(), options_.percentiles.begin(), options_.percentiles.end());
  std::sort(percentiles.begin(), percentiles.end());
  percentiles.erase(std::unique(percentiles.begin(), percentiles.end()), percentiles.end());
  // The samples are sorted in place (no copy: a run of 10 M requests holds 80 MB of each). A
  // second thread sorts every request's due and finish times for the backlog test, then takes
  // TTFT and TPOT, beside ITL, E2EL and queue here; each side's lines are kept apart and appended
  // in the order one thread gives (none touches another's sample).
  // Samples made of sorted parts (a sharded run's) are merged, which costs less than sorting.
  const bool parts = in_sorted_parts();
  const auto merge_in_parts = [&](std::vector<double>& sample, size_t kind) {
    if (parts) merge_parts(sample, sorted_parts_, kind, sample_before);
  };
  BacklogTrend trend;
  const auto backlog = [&] {
    // In a fixed order: the trend's sums must not depend on the order requests settled in.
    if (parts) {
      merge_parts(outstanding_, sorted_parts_, 0, interval_before);
    } else {
      sort_intervals(outstanding_);
    }
    trend = backlog_trend(outstanding_);
  };
  DistributionLines first(quantiles != nullptr), rest(quantiles != nullptr);
  const auto add_first = [&] {
    merge_in_parts(ttft_, 1);
    add_distribution(first.metrics(), first.quantiles(), "ttft", ttft_, percentiles, parts);
    merge_in_parts(tpot_, 2);
    add_distribution(first.metrics(), first.quantiles(), "tpot", tpot_, percentiles, parts);
  };
  std::jthread beside;
  if (outstanding_.size() >= kBacklogBesideMin) {
    try {
      beside = std::jthread([&] {
        backlog();
        add_first();
      });
    } catch (const std::system_error&) {  // no thread to be had: all here, in order
    }
  }
  const bool alone = !beside.joinable();
  if (alone) add_first();
  // The ITL runs, merged in place (one run per distinct gap, in order): no copy of what may be
  // millions of runs.
  add_gap_distribution(rest.metrics(), rest.quantiles(), gaps_.runs(), percentiles);
  merge_in_parts(e2el_, 3);
  add_distribution(rest.metrics(), rest.quantiles(), "e2el", e2el_, percentiles, parts);
  merge_in_parts(queue_, 4);
  add_distribution(rest.metrics(), rest.quantiles(), "queue", queue_, percentiles, parts);
  if (!alone) beside.join();
  first.append_to(out, quantiles);
  rest.append_to(out, quantiles);
  if (alone) backlog();
  return trend;
}

// How busy the slots and the KV cache were, the preemptions and iterations, the prefix cache's hits.
void MetricsAccumulator::add_utilization(std::vector<Metric>& out, double duration) const {
  auto count = [&](const char* name, int64_t n) { out.push_back({name, static_cast<double>(n)}); };
  const double slots = static_cast<double>(options_.max_num_seqs) * options_.replicas * duration;
  if (slots > 0) out.push_back({"slot_utilization", static_cast<double>(emitting_ns_) / 1e9 / slots});
  if (kv_limited_) {
    // The time-weighted mean of used / total over every replica's iterations.
    double weighted = 0;
    Wide ns = 0;
    for (const KvUse& k : kv_) {
      if (k.total <= 0) continue;
      weighted += static_cast<double>(k.used_ns) / static_cast<double>(k.total);
      ns += k.ns;
    }
    if (ns > 0) out.push_back({"kv_utilization_mean", weighted / static_cast<double>(ns)});
  }
  count("preemptions", preemptions_);
  count("iterations", iterations_);
  if (input_tokens_ > 0) {
    // Prompt tokens served from the prefix cache, over all prompt tokens; requests that reused at
    // least one block, over all requests (completed ones).
    out.push_back({"prefix_hit_rate", static_cast<double>(cached_tokens_) / static_cast<double>(input_tokens_)});
    out.push_back({"prefix_request_hit_rate", static_cast<double>(cache_hits_) / static_cast<double>(completed_)});
  }
  // Requests whose prompt names its content (a trace's block hashes, shared prefixes, a
  // conversation's history): with none, no two prompts can share a cached prefix.
  if (options_.prefix_caching) count("prefix_cacheable_requests", cacheable_);
}

// Disaggregated serving: the KV transfers, and how busy each pool was.
void MetricsAccumulator::add_transfers(std::vector<Metric>& out, double duration) const {
  out.push_back({"kv_transfers", static_cast<double>(transfer_wait_.size())});
  out.push_back({"kv_transfer_gib", transfer_bytes_ / (1 << 30)});
  for (const auto& [name, values] : {std::pair{"kv_transfer_wait", &transfer_wait_}, std::pair{"kv_transfer_time", &transfer_time_}}) {
    if (values->empty()) continue;
    std::vector<double> sorted = *values;
    std::sort(sorted.begin(), sorted.end());
    out.push_back({std::string(name) + "_mean", exact_mean(sorted)});
    out.push_back({std::string(name) + "_p99", percentile(sorted, 99)});
  }
  // Busy time over the pool's replicas' time: how much of the pool the run kept working.
  for (const auto& [name, pool] : {std::pair{"prefill_utilization", 1}, std::pair{"decode_utilization", 2}}) {
    Time busy = 0;
    int64_t replicas = 0;
    for (size_t r = 0; r < options_.pools.size(); ++r) {
      if (options_.pools[r] != pool) continue;
      ++replicas;
      if (r < busy_.size()) busy += busy_[r];
    }
    if (replicas > 0 && duration > 0) out.push_back({name, to_seconds(busy) / (static_cast<double>(replicas) * duration)});
  }
}

std::vector<Metric> MetricsAccumulator::compute(std::vector<QuantilePoint>* quantiles) const {
  std::vector<Metric> out;
  out.reserve(metric_names().size());
  const double duration = add_counts(out);
  const BacklogTrend trend = add_distributions(out, quantiles);
  add_utilization(out, duration);
  sorted_parts_.assign(1, sample_sizes());  // each sample is sorted now
  if (trend.known) {
    out.push_back({"overloaded", trend.overloaded ? 1.0 : 0.0});
    out.push_back({"backlog_growth", trend.growth});
    out.push_back({"backlog_growth_share", trend.share()});
  }
  add_deployment_metrics(out, options_, duration, output_tokens_);
  if (!options_.pools.empty()) add_transfers(out, duration);
  return out;
}

}  // namespace servesim
