// Disaggregated prefill and decode (SimOptions::roles): hand-worked timings of a transfer and of
// back-pressure, the invariants over every router, leaps that change nothing, and the command
// line's pools, link and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "routers/registry.h"
#include "tests/cli_harness.h"
#include "tests/generated_workloads.h"
#include "tests/sim_harness.h"
#include "workloads/workload.h"

namespace servesim {
namespace {

using namespace servesim::testing;

// The unit backend (one step an iteration) with a KV cache of its own size and KV bytes, so that a
// transfer has bytes to move.
class KvUnitBackend final : public Backend {
 public:
  KvUnitBackend(int64_t blocks, double bytes_per_block) : blocks_(blocks), bytes_(bytes_per_block) {}
  IterationResult run(const Batch& batch) override { return unit_.run(batch); }
  bool prices_decode_groups() const override { return true; }
  int64_t kv_blocks(int32_t) const override { return blocks_; }
  std::string_view name() const override { return "unit"; }
  bool counts_steps() const override { return true; }
  double kv_bytes_per_block() const override { return bytes_; }

 private:
  UnitBackend unit_;
  int64_t blocks_;
  double bytes_;
};

class TransferCapture : public Recorder {
 public:
  bool accepts_grouped_decodes() const override { return true; }
  void on_transfer(const TransferRecord& t) override {
    ids.push_back(t.request->id());
    records.push_back(t);
  }
  void on_request(const Request& r) override { requests.push_back(r); }
  const Request& request(const std::string& id) const {
    for (const Request& r : requests) {
      if (r.id() == id) return r;
    }
    ADD_FAILURE() << "no request " << id;
    return requests.front();
  }
  std::vector<Request> requests;
  const TransferRecord& of(const std::string& id) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == id) return records[i];
    }
    ADD_FAILURE() << "no transfer of " << id;
    return records.front();
  }
  std::vector<std::string> ids;
  std::vector<TransferRecord> records;
};

struct DisaggRun {
  std::vector<RequestSpec> specs;
  CaptureRecorder capture;
  TransferCapture transfers;
  std::unique_ptr<Simulator> sim;
  RunResult result;
};

// prefill + decode replicas of the unit backend, each pool's KV `prefill_blocks` and
// `decode_blocks` (-1: unlimited) of block_size tokens; links of `bytes_per_second` and `latency`.
std::unique_ptr<DisaggRun> disaggregated(const std::vector<RequestSpec>& specs, int32_t prefill, int32_t decode,
                                         int64_t prefill_blocks, int64_t decode_blocks, double bytes_per_block,
                                         double bytes_per_second, Time latency, SimOptions o = {},
                                         const std::string& policy = "continuous", bool capture_items = true,
                                         bool roofline = false) {
  auto run = std::make_unique<DisaggRun>();
  run->specs = specs;
  o.replicas = prefill + decode;
  o.roles.clear();
  o.links.clear();
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<std::unique_ptr<Backend>> backends;
  for (int32_t i = 0; i < o.replicas; ++i) {
    policies.push_back(find_policy(policy).value()->make(toml::table{}).value());
    if (roofline) {
      backends.push_back(default_roofline());  // leaps, where the unit backend only groups
    } else {
      backends.push_back(std::make_unique<KvUnitBackend>(i < prefill ? prefill_blocks : decode_blocks, bytes_per_block));
    }
    o.roles.push_back(i < prefill ? ReplicaRole::kPrefill : ReplicaRole::kDecode);
    o.links.push_back({bytes_per_second, latency});
  }
  o.prefix_caching = find_policy(policy).value()->prefix_caching;
  std::vector<Recorder*> recorders = {&run->transfers};
  if (capture_items) recorders.push_back(&run->capture);
  run->sim = std::make_unique<Simulator>(run->specs, o, std::move(policies), std::move(backends), recorders);
  run->result = run->sim->run();
  return run;
}

// Hand-worked: A (prompt 4, 3 tokens) and B (prompt 8, 2 tokens) prefill together in step [0, 1)
// and emit their first tokens at 1. The decode replica takes blocks for both at once; their KV
// (1,000 bytes a token) moves over a 4,000 B/s link with 0.25 s of latency, one transfer at a time:
// A's 4,000 bytes in [1, 2), arriving at 2.25; B's 8,000 in [2, 4), arriving at 4.25. A decodes
// from 2.25 (tokens at 3.25 and 4.25), B from 4.25 (its second token at 5.25). Prefill end +
// transfer = decode start.
TEST(Disaggregation, PrefillEndPlusTransferIsDecodeStart) {
  const std::vector<RequestSpec> specs = {spec("A", 0, 4, 3), spec("B", 0, 8, 2)};
  SimOptions o;
  o.block_size = 16;
  auto run = disaggregated(specs, 1, 1, -1, -1, 16'000, 4'000, from_seconds(0.25), o);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  const Request& a = run->capture.by_id("A");
  const Request& b = run->capture.by_id("B");
  EXPECT_EQ(a.replica, 0);
  EXPECT_EQ(a.decode_replica, 1);
  EXPECT_DOUBLE_EQ(secs(a.first_token), 1.0);  // TTFT from the prefill replica
  EXPECT_DOUBLE_EQ(secs(b.first_token), 1.0);
  EXPECT_DOUBLE_EQ(secs(a.finished), 4.25);
  EXPECT_DOUBLE_EQ(secs(b.finished), 5.25);
  const TransferRecord& ta = run->transfers.of("A");
  const TransferRecord& tb = run->transfers.of("B");
  EXPECT_EQ(ta.tokens, 4);
  EXPECT_DOUBLE_EQ(ta.bytes, 4'000);
  EXPECT_DOUBLE_EQ(secs(ta.ready), 1.0);
  EXPECT_DOUBLE_EQ(secs(ta.reserved), 1.0);
  EXPECT_DOUBLE_EQ(secs(ta.start), 1.0);
  EXPECT_DOUBLE_EQ(secs(ta.end), 2.25);
  EXPECT_DOUBLE_EQ(secs(tb.reserved), 1.0);
  EXPECT_DOUBLE_EQ(secs(tb.start), 2.0);  // behind A on the link
  EXPECT_DOUBLE_EQ(secs(tb.end), 4.25);
  // The decode replica's iterations start when the KV is in.
  std::vector<double> decode_starts;
  for (const CapturedIteration& it : run->capture.iterations) {
    if (it.record.replica == 1) decode_starts.push_back(secs(it.record.start));
  }
  EXPECT_EQ(decode_starts, (std::vector<double>{2.25, 3.25, 4.25}));
  EXPECT_EQ(run->sim->replica(0).kv_blocks_used(), 0);
  EXPECT_EQ(run->sim->replica(1).kv_blocks_used(), 0);
}

// Back-pressure, hand-worked (blocks of 4 tokens, transfers instant): the prefill replica has 4
// blocks, the decode replica 3. A (output 5), B, C, D (output 2), all prompts of 8 tokens (2
// blocks), arrive at 0. Prefill: A and B in [0, 1). The decode replica takes A's blocks at 1; B
// waits (1 block free), still holding its 2 on the prefill replica. A's move frees 2 prefill
// blocks: C prefills in [1, 2), then holds them too, and D cannot be admitted: the full decode
// replica stops the prefill replica. A decodes on the decode replica until 5 (it grows to 3
// blocks); then B moves (waited 4 s) and D prefills in [5, 6), 4 s later than with room to decode.
TEST(Disaggregation, AFullDecodePoolStopsPrefillAdmissions) {
  const std::vector<RequestSpec> specs = {spec("A", 0, 8, 5), spec("B", 0, 8, 2), spec("C", 0, 8, 2),
                                          spec("D", 0, 8, 2)};
  SimOptions o;
  o.block_size = 4;
  auto run = disaggregated(specs, 1, 1, 4, 3, 0, 1e9, 0, o);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  const auto& c = run->capture;
  EXPECT_DOUBLE_EQ(secs(c.by_id("A").finished), 5.0);
  EXPECT_DOUBLE_EQ(secs(c.by_id("C").scheduled), 1.0);
  EXPECT_DOUBLE_EQ(secs(c.by_id("D").scheduled), 5.0);
  EXPECT_DOUBLE_EQ(secs(c.by_id("D").first_token), 6.0);
  EXPECT_DOUBLE_EQ(secs(c.by_id("B").finished), 6.0);
  EXPECT_DOUBLE_EQ(secs(c.by_id("C").finished), 7.0);
  EXPECT_DOUBLE_EQ(secs(c.by_id("D").finished), 8.0);
  const TransferRecord& b = run->transfers.of("B");
  EXPECT_DOUBLE_EQ(secs(b.ready), 1.0);
  EXPECT_DOUBLE_EQ(secs(b.reserved), 5.0);  // waited for the decode replica's blocks
  EXPECT_DOUBLE_EQ(secs(run->transfers.of("C").reserved), 6.0);
  EXPECT_DOUBLE_EQ(secs(run->transfers.of("D").reserved), 7.0);
  // Without the pressure (a decode replica with room), A and B move at 1, and C and D prefill then.
  auto roomy = disaggregated(specs, 1, 1, 4, 100, 0, 1e9, 0, o);
  EXPECT_DOUBLE_EQ(secs(roomy->capture.by_id("D").scheduled), 1.0);
}

// A request of one output token finishes on its prefill replica: nothing moves.
TEST(Disaggregation, AOneTokenRequestNeverMoves) {
  auto run = disaggregated({spec("A", 0, 4, 1), spec("B", 0, 4, 2)}, 1, 1, -1, -1, 0, 1e9, 0);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone);
  EXPECT_EQ(run->transfers.ids, (std::vector<std::string>{"B"}));
  EXPECT_EQ(run->capture.by_id("A").decode_replica, -1);
  EXPECT_DOUBLE_EQ(secs(run->capture.by_id("A").finished), 1.0);
}

// A prompt that no decode replica could hold is rejected when it arrives, as a prompt too large for
// the cache is, rather than left waiting for blocks forever.
TEST(Disaggregation, APromptNoDecodeReplicaHoldsIsRejected) {
  SimOptions o;
  o.block_size = 4;
  auto run = disaggregated({spec("big", 0, 13, 2), spec("small", 0, 8, 2)}, 1, 1, 100, 3, 0, 1e9, 0, o);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  const Request& big = run->capture.by_id("big");
  EXPECT_EQ(big.status, RequestStatus::kRejected);
  EXPECT_EQ(big.cause, RejectCause::kKvCapacity);
  EXPECT_NE(big.reason.find("12 tokens of KV of the smallest decode replica"), std::string::npos) << big.reason;
  EXPECT_EQ(run->capture.by_id("small").status, RequestStatus::kDone);
}

// Every router, two prefill and two decode replicas (the roofline, 256 KV blocks each, links of
// 25 GB/s and 10 us), over the invariants' workloads, with and without
// session affinity: every request settled once, prefilled in the prefill pool and decoded in the
// decode pool, its transfer in order, KV all free at the end; the same again from the same inputs
// (random and power-of-two are seeded), and the same with leaps as with every iteration run one by
// one.
TEST(Disaggregation, EveryRouterKeepsTheInvariants) {
  int64_t leapt = 0;
  const std::unique_ptr<Backend> client = default_roofline();
  for (const RouterInfo& router : router_registry()) {
    const std::string policy = router.needs_prefix_caching ? "prefix-cached" : "chunked-prefill";
    for (const char* text : kWorkloads) {
      Result<Workload> w = parse_workload(text, "invariants.toml", std::nullopt);
      ASSERT_TRUE(w.ok()) << w.error().message;
      for (bool affinity : {true, false}) {
        SCOPED_TRACE(std::string(router.name) + " affinity=" + std::to_string(affinity));
        SimOptions o = generated_options(256, 4);
        o.session_affinity = affinity;
        o.router = [&router] { return router.make(toml::table{}, 3).value(); };
        const auto run_with = [&](const SimOptions& options) {
          return disaggregated(w.value().requests, 2, 2, 0, 0, 0, 25e9, from_seconds(10e-6), options, policy,
                               false, /*roofline=*/true);
        };
        auto run = run_with(o);
        ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
        leapt += run->sim->leapt_iterations();
        const auto& got = run->transfers.requests;
        ASSERT_EQ(got.size(), w.value().requests.size());
        std::set<std::string> ids;
        for (const Request& r : got) {
          EXPECT_TRUE(ids.insert(r.id()).second) << r.id();
          if (r.status != RequestStatus::kDone) continue;
          EXPECT_TRUE(r.replica == 0 || r.replica == 1) << r.id();
          if (r.output_tokens > 1) {
            EXPECT_TRUE(r.decode_replica == 2 || r.decode_replica == 3) << r.id();
            const TransferRecord& t = run->transfers.of(r.id());
            // The client sees the first token the API server's time after the engine made it.
            EXPECT_EQ(t.ready + client->request_overhead(r.prompt_tokens), r.first_token);
            EXPECT_LE(t.ready, t.reserved);
            EXPECT_LE(t.reserved, t.start);
            EXPECT_LT(t.start, t.end);
            EXPECT_LE(t.end, r.finished);
          }
        }
        for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(run->sim->replica(i).kv_blocks_used(), 0) << i;
        SimOptions stepped = o;
        stepped.leap = false;
        for (const auto& other : {run_with(o), run_with(stepped)}) {
          ASSERT_EQ(other->transfers.records.size(), run->transfers.records.size());
          for (size_t k = 0; k < run->transfers.records.size(); ++k) {
            EXPECT_EQ(other->transfers.ids[k], run->transfers.ids[k]);
            EXPECT_EQ(other->transfers.records[k].decode_replica, run->transfers.records[k].decode_replica);
            EXPECT_EQ(other->transfers.records[k].end, run->transfers.records[k].end);
          }
          ASSERT_EQ(other->transfers.requests.size(), got.size());
          for (const Request& r : got) {
            const Request& s = other->transfers.request(r.id());
            EXPECT_EQ(s.first_token, r.first_token) << r.id();
            EXPECT_EQ(s.finished, r.finished) << r.id();
            EXPECT_EQ(s.replica, r.replica) << r.id();
          }
        }
      }
    }
  }
  EXPECT_GT(leapt, 0) << "no decode replica ever leapt: the comparison with stepping proves nothing";
}

using DisaggregationCli = Cli;

// The command line: two pools of the roofline on an A100, the transfers table, the metrics, and
// each transfer's time = bytes / (25 GB/s network_gbs) + 10 us network_latency_us.
TEST_F(DisaggregationCli, PoolsTransfersAndTheirMetrics) {
  const auto run = sim({"--trace", "pareto.toml", "--num-prompts", "200", "--prefill-replicas", "2",
                        "--decode-replicas", "2", "-q"});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("2 x a100-80gb (prefill) + 2 x a100-80gb (decode)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("KV transfers:"), std::string::npos) << run.output;
  const std::string last = " AND run_id = (SELECT max(id) FROM runs)";
  const double moved = std::stod(query("SELECT count(*) FROM transfers WHERE 1" + last));
  EXPECT_EQ(moved, metric("kv_transfers"));
  EXPECT_EQ(moved, std::stod(query("SELECT count(*) FROM requests WHERE status = 'finished' AND output_tokens > 1" + last)));
  EXPECT_EQ(query("SELECT count(*) FROM transfers t JOIN requests r ON r.id = t.request_id AND r.run_id = t.run_id "
                  "WHERE (r.first_token < t.ready OR t.prefill_replica > 1 OR t.decode_replica < 2) AND "
                  "t.run_id = (SELECT max(id) FROM runs)"),
            "0");
  EXPECT_EQ(query("SELECT count(*) FROM transfers WHERE abs((arrived - started) - (bytes / 25e9 + 10e-6)) > 2e-9" + last),
            "0");
  // Llama-3-8B's KV: 128 KiB a token.
  EXPECT_EQ(query("SELECT count(*) FROM transfers WHERE bytes != tokens * 131072" + last), "0");
  EXPECT_GT(metric("prefill_utilization"), 0);
  EXPECT_GT(metric("decode_utilization"), 0);
  EXPECT_GE(metric("kv_transfer_time_p99"), metric("kv_transfer_time_mean") * 0.999);
}

// Pools in [[replicas]] groups, each with its own hardware and limits; the record keeps them.
TEST_F(DisaggregationCli, GroupsWithRolesAndTheirOwnLimits) {
  write("pd.toml",
        "trace = 'pareto.toml'\nnum_prompts = 100\n"
        "[[replicas]]\ncount = 1\nhardware = 'h100-sxm'\nrole = 'prefill'\nmax_num_batched_tokens = 16384\n"
        "[[replicas]]\ncount = 2\nhardware = 'a100-80gb'\nrole = 'decode'\nmax_num_seqs = 128\n"
        "[disaggregation]\nlink_latency_us = 50\n");
  const auto run = sim({"--config", "pd.toml", "-q"});
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("1 x h100-sxm (prefill) + 2 x a100-80gb (decode)"), std::string::npos) << run.output;
  // The link: the slower end (the A100's 25 GB/s), the given latency.
  EXPECT_EQ(query("SELECT count(*) FROM transfers WHERE abs((arrived - started) - (bytes / 25e9 + 50e-6)) > 2e-9"), "0");
  const std::string config = query("SELECT config FROM runs ORDER BY id DESC LIMIT 1");
  EXPECT_NE(config.find("role = 'decode'"), std::string::npos) << config;
  EXPECT_NE(config.find("max_num_seqs = 128"), std::string::npos) << config;
}

TEST_F(DisaggregationCli, BadInputIsExitTwoNamingTheKeyAndWritesNothing) {
  write("long.toml", "[[request]]\nid = 'long'\nprompt_tokens = 100\noutput_tokens = 4\n");
  write("prefill-only.toml", "trace = 'pareto.toml'\n[[replicas]]\ncount = 2\nrole = 'prefill'\n");
  write("half.toml", "trace = 'pareto.toml'\n[[replicas]]\ncount = 2\nrole = 'prefill'\n[[replicas]]\ncount = 2\n");
  write("plain.toml", "trace = 'pareto.toml'\n[disaggregation]\nlink_gbs = 10\n");
  write("bad-policy.toml",
        "trace = 'pareto.toml'\n[[replicas]]\ncount = 1\nrole = 'prefill'\n[[replicas]]\ncount = 1\n"
        "role = 'decode'\n[replicas.policy]\nkv_reserve = 'maybe'\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--trace", "pareto.toml", "--prefill-replicas", "0", "--decode-replicas", "2"}, "prefill_replicas"},
      {{"--trace", "pareto.toml", "--prefill-replicas", "2"}, "decode_replicas"},
      {{"--trace", "pareto.toml", "--prefill-replicas", "1", "--decode-replicas", "1", "--replicas", "2"},
       "prefill_replicas"},
      {{"--config", "prefill-only.toml"}, "needs a decode pool"},
      {{"--config", "half.toml"}, "role"},
      {{"--config", "plain.toml"}, "disaggregation"},
      {{"--config", "bad-policy.toml"}, "bad-policy.toml:9:14: policy.kv_reserve: expected one of"},
      {{"--trace", "pareto.toml", "--prefill-replicas", "1", "--decode-replicas", "1", "--hardware", "l4"},
       "disaggregation.link_gbs: hardware l4 (replicas[0]) gives no network_gbs"},
      {{"--trace", "pareto.toml", "--prefill-replicas", "1", "--decode-replicas", "1", "--policy", "static"},
       "static"},
      {{"--trace", "long.toml", "--backend", "unit", "--prefill-replicas", "1", "--decode-replicas", "1", "--set",
        "kv.blocks=2", "--set", "disaggregation.link_gbs=1", "--set", "disaggregation.link_latency_us=0"},
       "replicas[1]: a decode replica's KV cache holds 32 tokens, and request 'long' has a prompt of 100"},
  };
  for (const auto& [args, needle] : cases) {
    const auto out = sim(args);
    EXPECT_EQ(out.status, 2) << needle << ": " << out.output;
    EXPECT_NE(out.output.find(needle), std::string::npos) << needle << " in: " << out.output;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "sim.db")) << needle;
  }
}

}  // namespace
}  // namespace servesim
