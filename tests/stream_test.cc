// A streamed run (Simulator over a RequestStream, as `sim` runs a [generate] workload) gives exactly
// the requests, iterations and metrics of the run over the whole workload in memory, while holding
// only the requests in flight.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "test_util.h"

#include "analysis/metrics/metrics.h"
#include "backends/roofline_backend.h"
#include "backends/unit.h"
#include "policies/registry.h"
#include "sim/simulator.h"
#include "tests/generated_workloads.h"
#include "tests/sim_harness.h"
#include "workloads/workload.h"

namespace servesim::testing {
namespace {


class Rows : public Recorder {
 public:
  bool accepts_grouped_decodes() const override { return true; }
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override {
    std::ostringstream out;
    out << it.replica << ' ' << it.step << ' ' << it.start << ' ' << it.duration << ' ' << it.num_seqs
        << ' ' << it.emitted << ' ' << it.prefill_tokens << ' ' << it.decode_tokens << ' '
        << it.kv_blocks_used << ' ' << it.waiting << ' ' << it.preempted << ':';
    for (const BatchItem& b : items) out << ' ' << b.seq->index << '/' << b.new_tokens << '/' << b.token_gap;
    iterations.push_back(out.str());
  }
  void on_request(const Request& r) override {
    std::ostringstream out;
    out << r.id() << ' ' << r.index << ' ' << r.replica << ' ' << static_cast<int>(r.status) << ' '
        << r.arrival << ' ' << r.due << ' ' << r.scheduled << ' ' << r.first_token << ' '
        << r.finished << ' ' << r.num_output << ' ' << r.preemptions << ' ' << r.cached_tokens << ' '
        << r.priority << ' ' << r.prompt_tokens;
    requests.push_back(out.str());
  }
  std::vector<std::string> iterations, requests;
};

struct Outcome {
  RunResult result;
  Rows rows;
  std::vector<Metric> metrics;
  size_t slots = 0;  // requests the simulator held at the end
};

std::unique_ptr<Outcome> simulate(const std::vector<RequestSpec>* specs, RequestStream* stream,
                                  const PolicyInfo& policy, const std::string& opts, SimOptions o,
                                  bool roofline) {
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<std::unique_ptr<Backend>> backends;
  for (int32_t i = 0; i < o.replicas; ++i) {
    policies.push_back(std::move(policy.make(toml::parse(opts)).value()));
    if (roofline) {
      backends.push_back(default_roofline());
    } else {
      backends.push_back(std::make_unique<UnitBackend>());
    }
  }
  o.max_model_len = backends.front()->max_model_len();
  o.prefix_caching = policy.prefix_caching;
  auto out = std::make_unique<Outcome>();
  MetricsAccumulator metrics(metrics_options(o));
  std::vector<Recorder*> recorders = {&metrics, &out->rows};
  std::unique_ptr<Simulator> sim =
      stream != nullptr
          ? std::make_unique<Simulator>(*stream, o, std::move(policies), std::move(backends), recorders)
          : std::make_unique<Simulator>(*specs, o, std::move(policies), std::move(backends), recorders);
  out->result = sim->run();
  out->metrics = metrics.compute();
  out->slots = sim->requests().size();
  std::sort(out->rows.requests.begin(), out->rows.requests.end());
  return out;
}

class Stream : public ::testing::TestWithParam<std::string> {};

TEST_P(Stream, GivesTheResultsOfTheWholeWorkloadHoldingOnlyRequestsInFlight) {
  const PolicyInfo& policy = *find_policy(GetParam()).value();
  const auto dir = std::filesystem::path(servesim::testing::temp_path("stream_" + GetParam()));
  std::filesystem::create_directories(dir);
  size_t streamed = 0, held = 0;
  for (size_t w = 0; w < std::size(kWorkloads); ++w) {
    const std::string path = (dir / ("w" + std::to_string(w) + ".toml")).string();
    std::ofstream(path) << kWorkloads[w];
    uint64_t seed = 0;
    auto probe = open_request_stream(path, std::nullopt, {}, &seed);
    ASSERT_TRUE(probe.ok()) << probe.error().message;
    if (probe.value() == nullptr) continue;  // conversations are not streamed
    const Result<Workload> whole = load_workload(path, std::nullopt);
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    EXPECT_EQ(seed, whole.value().seed);
    for (const std::string& opts : variants(GetParam())) {
      for (const auto& [kv_blocks, replicas, concurrency, roofline] :
           {std::tuple<int64_t, int32_t, int64_t, bool>{-1, 1, 0, true}, {300, 3, 0, true},
            {300, 1, 10, true}, {256, 2, 0, false}, {-1, 3, 7, false}}) {
        SCOPED_TRACE("workload " + std::to_string(w) + " [" + opts + "] kv_blocks=" +
                     std::to_string(kv_blocks) + " replicas=" + std::to_string(replicas) +
                     " max_concurrency=" + std::to_string(concurrency) +
                     (roofline ? " roofline" : " unit"));
        const SimOptions o = generated_options(kv_blocks, replicas, concurrency);
        auto stream = open_request_stream(path, std::nullopt, {}, &seed);
        ASSERT_TRUE(stream.ok() && stream.value() != nullptr);
        EXPECT_EQ(stream.value()->size(), static_cast<int64_t>(whole.value().requests.size()));
        const auto a = simulate(&whole.value().requests, nullptr, policy, opts, o, roofline);
        // Streamed as drawn, and streamed from the list in memory.
        RequestListStream list(whole.value().requests);
        const auto c = simulate(nullptr, &list, policy, opts, o, roofline);
        ASSERT_EQ(c->result.outcome, RunOutcome::kDone) << c->result.error;
        ASSERT_EQ(c->rows.requests, a->rows.requests);
        ASSERT_EQ(c->rows.iterations, a->rows.iterations);
        const auto b = simulate(nullptr, stream.value().get(), policy, opts, o, roofline);
        ASSERT_EQ(a->result.outcome, RunOutcome::kDone) << a->result.error;
        ASSERT_EQ(b->result.outcome, RunOutcome::kDone) << b->result.error;
        ASSERT_EQ(b->rows.requests, a->rows.requests);
        ASSERT_EQ(b->rows.iterations, a->rows.iterations);
        ASSERT_EQ(b->metrics.size(), a->metrics.size());
        for (size_t i = 0; i < a->metrics.size(); ++i) {
          EXPECT_EQ(b->metrics[i].name, a->metrics[i].name);
          EXPECT_EQ(b->metrics[i].value, a->metrics[i].value) << a->metrics[i].name;
        }
        EXPECT_EQ(a->slots, whole.value().requests.size());
        streamed += whole.value().requests.size();
        held += b->slots;
      }
    }
  }
  ASSERT_GT(streamed, 0u);
  if (GetParam() == "static") {
    EXPECT_EQ(held, streamed);  // static batching keeps finished requests: no slot is reused
  } else {
    // Bursts and tight KV memory keep many waiting (all-at-once arrivals: every one), but slots of
    // settled requests are reused.
    EXPECT_LT(held, streamed) << "the streamed runs held " << held << " requests of " << streamed;
  }
}

// A light load holds a handful of requests, however many the workload has.
TEST(StreamMemory, HoldsOnlyTheRequestsInFlight) {
  const auto path = std::filesystem::path(servesim::testing::temp_path("stream_light.toml"));
  std::ofstream(path) << "[generate]\nrequests = 20000\n[generate.arrival]\nprocess = 'poisson'\n"
                         "rate = 20.0\n[generate.prompt_tokens]\ndist = 'fixed'\nvalue = 100\n"
                         "[generate.output_tokens]\ndist = 'fixed'\nvalue = 10\n";
  uint64_t seed = 0;
  auto stream = open_request_stream(path.string(), std::nullopt, {}, &seed);
  ASSERT_TRUE(stream.ok() && stream.value() != nullptr);
  const auto out = simulate(nullptr, stream.value().get(), *find_policy("chunked-prefill").value(), "",
                            SimOptions{}, true);
  ASSERT_EQ(out->result.outcome, RunOutcome::kDone) << out->result.error;
  EXPECT_EQ(out->rows.requests.size(), 20000u);
  EXPECT_LT(out->slots, 100u);  // about 20 req/s x 0.15 s in flight, with Poisson bursts
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, Stream, ::testing::ValuesIn(registered_policies()),
                         policy_test_name);

// A stream that breaks its promises fails the run with a message rather than misbehave.
class ListStream : public RequestStream {
 public:
  explicit ListStream(std::vector<RequestSpec> specs) : specs_(std::move(specs)) {}
  bool next(RequestSpec& spec) override {
    if (i_ == specs_.size()) return false;
    spec = specs_[i_++];
    return true;
  }
  const std::string& error() const override { return error_; }

 private:
  std::vector<RequestSpec> specs_;
  size_t i_ = 0;
  std::string error_;
};

// One continuous-batching replica on the unit backend, over `stream`.
std::unique_ptr<Simulator> unit_simulator(RequestStream& stream) {
  std::vector<std::unique_ptr<Policy>> policies;
  policies.push_back(std::move(find_policy("continuous").value()->make({}).value()));
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<UnitBackend>());
  return std::make_unique<Simulator>(stream, SimOptions{}, std::move(policies), std::move(backends),
                                     std::vector<Recorder*>{});
}

// Both kinds of stream: one that makes its specs (copied in), and a list that gives them in place.
TEST(StreamErrors, OutOfOrderArrivalsFailTheRun) {
  std::vector<RequestSpec> specs(3);
  for (size_t i = 0; i < specs.size(); ++i) specs[i].id = std::string(1, static_cast<char>('a' + i));
  specs[0].arrival = from_seconds(1);
  specs[1].arrival = from_seconds(2);
  specs[2].arrival = from_seconds(1);
  ListStream made(specs);
  RequestListStream in_place(specs);
  for (RequestStream* stream : {static_cast<RequestStream*>(&made), static_cast<RequestStream*>(&in_place)}) {
    const RunResult r = unit_simulator(*stream)->run();
    EXPECT_EQ(r.outcome, RunOutcome::kFailed);
    EXPECT_NE(r.error.find("request 'c'"), std::string::npos) << r.error;
  }
}

// A workload in memory is streamed without copying its specs: every request the simulator holds
// points at its spec in the workload.
TEST(StreamMemory, AListIsStreamedInPlace) {
  std::vector<RequestSpec> specs(50);
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].id = "r" + std::to_string(i);
    specs[i].arrival = from_seconds(0.5 * static_cast<double>(i));
    specs[i].prompt_tokens = 8;
    specs[i].output_tokens = 3;
  }
  RequestListStream list(specs);
  ASSERT_TRUE(list.gives_in_place());
  auto sim = unit_simulator(list);
  ASSERT_EQ(sim->run().outcome, RunOutcome::kDone);
  ASSERT_FALSE(sim->requests().empty());
  for (const Request& r : sim->requests()) {
    EXPECT_TRUE(r.spec >= specs.data() && r.spec < specs.data() + specs.size()) << r.index;
    EXPECT_EQ(r.spec, &specs[static_cast<size_t>(r.index)]);
  }
}

}  // namespace
}  // namespace servesim::testing
