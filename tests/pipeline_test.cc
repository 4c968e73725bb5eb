// Pipeline parallelism (backends/pipeline.h, the replica's pipeline in sim/replica.h): vLLM's layer
// partition, a hand-worked two-stage timeline (two batches in flight, the bubble at the start, a
// prompt's chunks pipelined, a request skipped while its token is in flight), memory per GPU with
// the KV blocks of the smallest stage, the roofline's stages, and bad pp values on the command line.
#include <gtest/gtest.h>

#include "backends/collectives.h"

#include "backends/kv_memory.h"
#include "backends/pipeline.h"
#include "backends/roofline_backend.h"
#include "backends/specs.h"
#include "tests/cli_harness.h"
#include "tests/sim_harness.h"

namespace servesim {
namespace {

using namespace servesim::testing;

TEST(PipelinePartition, AsVllmGetPpIndices) {
  // Values from vllm.distributed.utils.get_pp_indices (vLLM 0.33).
  EXPECT_EQ(pp_partition(80, 3), (std::vector<int64_t>{27, 27, 26}));
  EXPECT_EQ(pp_partition(61, 2), (std::vector<int64_t>{31, 30}));
  EXPECT_EQ(pp_partition(10, 4), (std::vector<int64_t>{2, 3, 3, 2}));
  EXPECT_EQ(pp_partition(126, 4), (std::vector<int64_t>{31, 32, 32, 31}));
  EXPECT_EQ(pp_partition(32, 4), (std::vector<int64_t>{8, 8, 8, 8}));
  EXPECT_EQ(pp_partition(5, 5), (std::vector<int64_t>{1, 1, 1, 1, 1}));
}

TEST(PipelinePartition, StageModelKeepsItsLayersKinds) {
  ModelSpec m;
  m.num_layers = 4;
  m.layer_attention = {AttentionKind::kFull, AttentionKind::kSlidingWindow, AttentionKind::kFull,
                       AttentionKind::kSlidingWindow};
  m.layer_moe = {0, 0, 1, 1};
  const ModelSpec s = stage_model(m, 1, 2);
  EXPECT_EQ(s.num_layers, 2);
  EXPECT_EQ(s.attention_of(0), AttentionKind::kSlidingWindow);
  EXPECT_EQ(s.attention_of(1), AttentionKind::kFull);
  EXPECT_FALSE(s.moe_at(0));
  EXPECT_TRUE(s.moe_at(1));
  EXPECT_TRUE(check_pipeline_parallel("m", 4, 4).ok());
  EXPECT_FALSE(check_pipeline_parallel("m", 4, 5).ok());
  EXPECT_FALSE(check_pipeline_parallel("m", 4, 0).ok());
}

// Every batch spends `stage` on each of two stages and `send` between them.
class TwoStageBackend final : public Backend {
 public:
  TwoStageBackend(Time stage, Time send) : stage_(stage), send_(send) {}
  IterationResult run(const Batch&) override { return {2 * stage_ + send_, -1}; }
  int32_t pipeline_stages() const override { return 2; }
  void run_stages(const Batch&, std::span<Time> stage, std::span<Time> send) override {
    stage[0] = stage[1] = stage_;
    send[0] = send_;
  }
  int64_t kv_blocks(int32_t) const override { return -1; }
  std::string_view name() const override { return "two-stage"; }

 private:
  Time stage_, send_;
};

std::unique_ptr<Run> simulate_two_stages(const std::vector<RequestSpec>& specs, int32_t budget) {
  auto run = std::make_unique<Run>();
  run->specs = specs;
  std::vector<std::unique_ptr<Policy>> policies;
  policies.push_back(std::move(find_policy("chunked-prefill").value()->make(toml::table{}).value()));
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<TwoStageBackend>(from_seconds(0.010), from_seconds(0.001)));
  SimOptions options;
  options.limits.max_num_batched_tokens = budget;
  run->sim = std::make_unique<Simulator>(run->specs, options, std::move(policies), std::move(backends),
                                         std::vector<Recorder*>{&run->capture});
  run->result = run->sim->run();
  return run;
}

TEST(PipelineTimeline, TwoBatchesInFlightWithTheBubbleAtTheStart) {
  // Stages of 10 ms, 1 ms between them. At 0 the first batch (A's prompt) starts; with room for a
  // second, B's prompt follows at once (A has nothing left to compute). Stage 1 idles until 11 ms
  // (the bubble). Batch 1: stage 0 [0, 10], stage 1 [11, 21]. Batch 2: stage 0 [10, 20], stage 1
  // [21, 31]. At 21 A emits its first token and decodes in batch 3 (B is in flight, skipped):
  // stage 0 [21, 31], stage 1 [32, 42]. At 31 B's first token; batch 4 decodes B: stage 0 [31, 41],
  // stage 1 [42, 52]. A finishes at 42, B at 52.
  auto run = simulate_two_stages({spec("A", 0, 8, 2), spec("B", 0, 8, 2)}, 8);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  const Request& a = run->capture.by_id("A");
  const Request& b = run->capture.by_id("B");
  EXPECT_DOUBLE_EQ(secs(a.first_token), 0.021);
  EXPECT_DOUBLE_EQ(secs(a.finished), 0.042);
  EXPECT_DOUBLE_EQ(secs(b.first_token), 0.031);
  EXPECT_DOUBLE_EQ(secs(b.finished), 0.052);
  const auto& it = run->capture.iterations;
  ASSERT_EQ(it.size(), 4u);
  const double starts[] = {0, 0, 0.021, 0.031}, durations[] = {0.021, 0.031, 0.021, 0.021};
  for (size_t i = 0; i < it.size(); ++i) {
    EXPECT_EQ(it[i].record.step, static_cast<int64_t>(i));
    EXPECT_DOUBLE_EQ(secs(it[i].record.start), starts[i]) << i;
    EXPECT_DOUBLE_EQ(secs(it[i].record.duration), durations[i]) << i;
    ASSERT_EQ(it[i].items.size(), 1u) << i;  // never both: one of them is always in flight
  }
  EXPECT_EQ(it[2].items[0].index, 0);  // A's decode
  EXPECT_EQ(it[3].items[0].index, 1);  // B's decode
}

TEST(PipelineTimeline, APromptsChunksArePipelined) {
  // A budget of 8 cuts A's 16-token prompt in two; vLLM advances num_computed_tokens at schedule
  // time, so the second chunk starts at once, behind the first: it leaves stage 1 at 31 ms, when A's
  // first token is out; its decode then takes stage 0 [31, 41] and stage 1 [42, 52].
  auto run = simulate_two_stages({spec("A", 0, 16, 2)}, 8);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  const Request& a = run->capture.by_id("A");
  EXPECT_DOUBLE_EQ(secs(a.first_token), 0.031);
  EXPECT_DOUBLE_EQ(secs(a.finished), 0.052);
  const auto& it = run->capture.iterations;
  ASSERT_EQ(it.size(), 3u);
  EXPECT_EQ(it[0].items[0].context_tokens, 0);
  EXPECT_EQ(it[1].items[0].context_tokens, 8);
  EXPECT_FALSE(it[0].items[0].emitted);
  EXPECT_TRUE(it[1].items[0].emitted);
}

TEST(PipelineTimeline, AnArrivalWaitsForTheOldestBatchAfterAnEmptyOne) {
  // A alone: its prompt in flight, the second slot's batch is empty, so the replica waits for A's
  // batch (vLLM's engine blocks on it). B arrives at 5 ms but is scheduled at 21 ms, with A's decode.
  auto run = simulate_two_stages({spec("A", 0, 8, 2), spec("B", 0.005, 8, 1)}, 64);
  ASSERT_EQ(run->result.outcome, RunOutcome::kDone) << run->result.error;
  EXPECT_DOUBLE_EQ(secs(run->capture.by_id("B").scheduled), 0.021);
  EXPECT_DOUBLE_EQ(secs(run->capture.by_id("B").first_token), 0.042);
}

BackendSetup preset_setup(const std::string& hardware, const std::string& model, int32_t tp, int32_t pp) {
  const std::string data = std::string(SERVESIM_PROJECT_DIR) + "/data/";
  BackendSetup setup;
  setup.hardware = data + "hardware/" + hardware + ".toml";
  setup.model = data + "models/" + model + ".json";
  setup.tp = tp;
  setup.pp = pp;
  setup.engine = "none";
  return setup;
}

TEST(PipelineMemory, EachGpuHoldsItsStagesLayersAndTheSmallestStageBoundsTheBlocks) {
  // Llama-3-8B (32 layers, untied 128256 x 4096 embedding and LM head) on one A100 per stage.
  auto one = make_roofline_backend(preset_setup("a100-80gb", "llama-3-8b", 1, 1));
  auto two = make_roofline_backend(preset_setup("a100-80gb", "llama-3-8b", 1, 2));
  ASSERT_TRUE(one.ok() && two.ok());
  const auto& m1 = dynamic_cast<const RooflineBackend&>(*one.value()).memory();
  const auto& m2 = dynamic_cast<const RooflineBackend&>(*two.value()).memory();
  const double embedding = 128256.0 * 4096 * 2;
  // A stage: half the layers and one of the two embedding matrices (the final norm's 8 KiB aside).
  EXPECT_NEAR(m2.weights, (m1.weights - 2 * embedding) / 2 + embedding, 16384);
  EXPECT_DOUBLE_EQ(m2.block_bytes, m1.block_bytes / 2);  // each GPU keeps its 16 layers' KV
  EXPECT_DOUBLE_EQ(m2.pipeline_block_bytes, m1.block_bytes);
  EXPECT_DOUBLE_EQ(two.value()->kv_bytes_per_block(), one.value()->kv_bytes_per_block());
  // Both stages hold the same bytes here (16 layers and one embedding each); the last also computes
  // fp32 logits, which this plan counts on every stage: the blocks are the first stage's.
  const double free2 = m2.budget - m2.weights - m2.activations - m2.non_torch;
  EXPECT_EQ(m2.num_blocks, static_cast<int64_t>(std::floor(free2 / m2.block_bytes)) - 1);
  EXPECT_GT(m2.num_blocks, 2 * m1.num_blocks);
  EXPECT_EQ(two.value()->pipeline_stages(), 2);
}

TEST(PipelineMemory, AnUnevenSplitIsBoundByItsLargestStage) {
  // Llama-3.1-70B's 80 layers over 3 stages: 27, 27, 26. The first stage's 27 layers and the
  // embedding leave the fewest blocks (the second has no embedding, the last one layer fewer), each
  // block of its 27 layers.
  auto b = make_roofline_backend(preset_setup("h100-sxm", "llama-3.1-70b", 4, 3));
  ASSERT_TRUE(b.ok()) << b.error().message;
  const auto& m = dynamic_cast<const RooflineBackend&>(*b.value()).memory();
  EXPECT_EQ(m.bounding_stage, 0);
  EXPECT_NEAR(m.pipeline_block_bytes / m.block_bytes, 80.0 / 27.0, 1e-9);
  // DeepSeek-V3's 61 over 2: 31 (3 of them dense) and 30. The first stage holds 2.7 GB less per GPU
  // but 31 layers' KV per block: it still has the fewer blocks, by a hair.
  auto d = make_roofline_backend(preset_setup("h200", "deepseek-v3", 8, 2));
  ASSERT_TRUE(d.ok()) << d.error().message;
  const auto& md = dynamic_cast<const RooflineBackend&>(*d.value()).memory();
  EXPECT_EQ(md.bounding_stage, 0);
  EXPECT_NEAR(md.pipeline_block_bytes / md.block_bytes, 61.0 / 31.0, 1e-9);
}

TEST(PipelineRoofline, StagesAddUpToTheWholeModelWithTheSendsBetween) {
  // The stages' kernels add up to the whole model's (the embedding on the first, the LM head on the
  // last); the send is the activations over NVLink within the node.
  auto one = make_roofline_backend(preset_setup("h100-sxm", "llama-3-8b", 1, 1));
  auto two = make_roofline_backend(preset_setup("h100-sxm", "llama-3-8b", 1, 2));
  ASSERT_TRUE(one.ok() && two.ok());
  Request r;
  r.prompt_tokens = 512;
  r.output_tokens = 4;
  Batch batch;
  batch.items.push_back({&r, 512, 0});
  Time stage[2], send[1];
  two.value()->run_stages(batch, stage, send);
  const Time whole = one.value()->run(batch).duration;
  const auto& hw = dynamic_cast<const RooflineBackend&>(*one.value()).roofline().hardware();
  // One stage's fixed overhead more (each stage's GPU pays its own).
  EXPECT_NEAR(static_cast<double>(stage[0] + stage[1]), static_cast<double>(whole) + hw.overhead * 1e9, 3);
  // Hidden states and residual, 512 tokens x 4096 x 2 bytes each, point to point within the node.
  EXPECT_NEAR(secs(send[0]), send_recv_time(hw, 2 * 512 * 4096 * 2, false), 1e-9);
  EXPECT_EQ(two.value()->run(batch).duration, stage[0] + stage[1] + send[0]);
}

TEST(PipelineRoofline, ASendBetweenNodesTakesTheNetwork) {
  HardwareSpec hw;
  hw.gpus_per_node = 8;
  hw.interconnect_bandwidth = 450e9;
  hw.interconnect_latency = 5e-6;
  hw.network_bandwidth = 50e9;
  hw.network_latency = 10e-6;
  const double bytes = 2 * 100 * 8192 * 2.0;
  // tp 8, stage 0 on node 0, stage 1 on node 1: each rank sends 1/8 over the network, then the
  // stage all-gathers.
  EXPECT_DOUBLE_EQ(pipeline_send_seconds(hw, 8, 0, 100, 8192, 2),
                   10e-6 + bytes / 8 / 50e9 + 5e-6 + 7.0 / 8 * bytes / 450e9);
  // tp 4: stages 0 and 1 share node 0.
  EXPECT_DOUBLE_EQ(pipeline_send_seconds(hw, 4, 0, 100, 8192, 2),
                   5e-6 + bytes / 4 / 450e9 + 5e-6 + 3.0 / 4 * bytes / 450e9);
  EXPECT_DOUBLE_EQ(pipeline_send_seconds(hw, 4, 1, 100, 8192, 2),
                   10e-6 + bytes / 4 / 50e9 + 5e-6 + 3.0 / 4 * bytes / 450e9);
}

class PipelineCli : public Cli {};

TEST_F(PipelineCli, BadPpExitsTwoNamingTheKey) {
  const std::string w = write("w.toml", "[[request]]\narrival = 0.0\nprompt_tokens = 16\noutput_tokens = 2\n");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--trace", w, "--pipeline-parallel-size", "0"},
        std::vector<std::string>{"--trace", w, "--set", "pp=-1"},
        std::vector<std::string>{"--trace", w, "--set", "pp=33"},  // Llama-3-8B has 32 layers
        std::vector<std::string>{"--trace", w, "--set", "pp=2", "--backend", "unit"},
        std::vector<std::string>{"--trace", w, "--set", "pp=2", "--policy", "static"}}) {
    const Outcome o = sim(args);
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_NE(o.output.find("pp"), std::string::npos) << o.output;
  }
  const Outcome o = sim({"--trace", w, "--set", "pp=33"});
  EXPECT_NE(o.output.find("32 layers"), std::string::npos) << o.output;
}

TEST_F(PipelineCli, ARunCountsEveryStagesGpus) {
  const std::string w = write("w.toml", "[generate]\nrequests = 40\nseed = 3\n[generate.arrival]\nprocess = \"poisson\"\n"
                                        "rate = 20.0\n[generate.prompt_tokens]\ndist = \"fixed\"\nvalue = 600\n"
                                        "[generate.output_tokens]\ndist = \"fixed\"\nvalue = 50\n");
  const Outcome o = sim({"--trace", w, "--policy", "chunked-prefill", "--hardware", "h100-sxm", "--model",
                         "llama-3.1-70b", "--tp", "8", "--pipeline-parallel-size", "2"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(metric("completed"), 40);
  EXPECT_EQ(metric("gpus"), 16);
  EXPECT_NE(o.output.find("1 replica x tp 8 x pp 2 = 16 GPUs (2 nodes)"), std::string::npos) << o.output;
  EXPECT_EQ(query("SELECT gpus FROM runs"), "16");
}

}  // namespace
}  // namespace servesim
