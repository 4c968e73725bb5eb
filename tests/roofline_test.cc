// The roofline against published measurements (REFERENCE.md): gpt-fast's batch-1 decode, TensorRT-LLM's
// prefill latencies, the A100's ridge point, and the saving of mixing prefill with decode.
#include "backends/roofline.h"

#include <deque>

#include <gtest/gtest.h>

#include "backends/roofline_backend.h"

namespace servesim {
namespace {

const std::string kData = std::string(SERVESIM_PROJECT_DIR) + "/data/";

RooflineModel model(const char* hw, const char* m, DType d, int32_t tp = 1) {
  RooflineOptions o;
  o.tp = tp;
  o.weights = o.kv = o.activations = d;
  return RooflineModel(load_hardware(kData + "hardware/" + hw + ".toml").value(),
                       load_model(kData + "models/" + m + ".json").value(), o);
}

double ms(const RooflineModel& rm, std::vector<RooflineModel::Item> items) {
  return rm.price(items.data(), items.size()).total() * 1e3;
}

TEST(Roofline, Llama2DecodeAtBatchOneIsNearGptFastOnA100) {
  const RooflineModel rm = model("a100-80gb", "llama-2-7b", DType::kFp16);
  // The bandwidth floor: 13.5 GB of weights over 2,039 GB/s.
  const double floor_ms = rm.model().weight_bytes(DType::kFp16) / rm.hardware().memory_bandwidth * 1e3;
  EXPECT_NEAR(floor_ms, 6.6, 0.1);
  // gpt-fast measured 9.5 ms per token (104.9 tokens/s); the default efficiencies must be within 20 %.
  const double t = ms(rm, {{1, 128, true}});
  EXPECT_NEAR(t, 9.5, 0.2 * 9.5);
  EXPECT_GT(t, floor_ms);
}

TEST(Roofline, LlamaPrefillIsNearTensorRtLlmOnA100) {
  const RooflineModel rm = model("a100-80gb", "llama-2-7b", DType::kFp16);
  EXPECT_NEAR(ms(rm, {{128, 0, true}}), 16.0, 0.25 * 16.0);
  EXPECT_NEAR(ms(rm, {{2048, 0, true}}), 133.0, 0.25 * 133.0);
}

TEST(Roofline, RidgePointOfTheA100) {
  const HardwareSpec a100 = load_hardware(kData + "hardware/a100-80gb.toml").value();
  EXPECT_NEAR(a100.ridge_point(), 153, 4);  // 312 TFLOP/s over 2.04 TB/s; 156 at 2 TB/s
}

TEST(Roofline, MixingPrefillAndDecodeCostsLessThanRunningThemApart) {
  const RooflineModel rm = model("a100-80gb", "llama-3-8b", DType::kBf16);
  const double prefill = ms(rm, {{512, 0, true}});
  const double decode = ms(rm, {{1, 1024, true}, {1, 300, true}});
  const double mixed = ms(rm, {{512, 0, true}, {1, 1024, true}, {1, 300, true}});
  EXPECT_LT(mixed, prefill + decode);
  EXPECT_GT(mixed, prefill);  // the decodes are not free either
}

TEST(Roofline, ComputeGrowsWithTokensAndKvReadsWithContext) {
  const RooflineModel rm = model("a100-80gb", "llama-3-8b", DType::kBf16);
  EXPECT_LT(ms(rm, {{1, 100, true}}), ms(rm, {{1, 8000, true}}));
  EXPECT_LT(ms(rm, {{256, 0, true}}), ms(rm, {{4096, 0, true}}));
  // A chunk that does not finish its prompt samples nothing: no LM head.
  const RooflineBreakdown chunk = [&] {
    RooflineModel::Item i{256, 0, false};
    return rm.price(&i, 1);
  }();
  EXPECT_EQ(chunk.lm_head, 0);
  // Batching decodes shares the weight reads: 64 sequences cost far less than 64 times one.
  std::vector<RooflineModel::Item> many(64, {1, 512, true});
  EXPECT_LT(ms(rm, many), 4 * ms(rm, {{1, 512, true}}));
}

TEST(Roofline, TensorParallelismSplitsWorkAndAddsAllReduces) {
  const RooflineModel one = model("h100-sxm", "llama-3-70b", DType::kBf16, 1);
  const RooflineModel four = model("h100-sxm", "llama-3-70b", DType::kBf16, 4);
  const RooflineModel::Item d{1, 1000, true};
  const RooflineBreakdown a = one.price(&d, 1), b = four.price(&d, 1);
  EXPECT_EQ(a.communication, 0);
  EXPECT_GT(b.communication, 0);
  EXPECT_LT(b.total(), a.total() / 2);
}

TEST(Roofline, AMixtureReadsOnlyTheExpertsItsTokensChose) {
  const RooflineModel moe = model("h100-sxm", "mixtral-8x7b", DType::kBf16);
  // Batch-1 decode touches 2 of 8 experts: about the active weights, far below all of them.
  const double t = ms(moe, {{1, 100, true}});
  const double all = moe.model().weight_bytes(DType::kBf16) / moe.hardware().memory_bandwidth * 1e3;
  const double active = moe.model().active_params() * 2 / moe.hardware().memory_bandwidth * 1e3;
  EXPECT_GT(t, active);
  EXPECT_LT(t, all / 2);
}

TEST(Roofline, PrefillAttentionEfficiencyPricesOnlyTheAttentionOfPromptChunks) {
  const RooflineModel base = model("a100-80gb", "llama-3-8b", DType::kBf16);
  // 0, the default of every shipped file: prompt chunks take attention_efficiency, as before.
  EXPECT_EQ(base.hardware().prefill_attention_efficiency, 0);
  HardwareSpec hw = base.hardware();
  hw.prefill_attention_efficiency = hw.attention_efficiency;
  const RooflineModel same(hw, base.model(), base.options());
  hw.prefill_attention_efficiency = hw.attention_efficiency / 4;
  const RooflineModel slow(hw, base.model(), base.options());
  const std::vector<RooflineModel::Item> mixed = {{2048, 512, true}, {1, 4000, true}, {1, 100, true}};
  const RooflineBreakdown b = base.price(mixed.data(), mixed.size());
  const RooflineBreakdown s = same.price(mixed.data(), mixed.size());
  const RooflineBreakdown q = slow.price(mixed.data(), mixed.size());
  EXPECT_EQ(b.total(), s.total());
  // A quarter of the efficiency: the chunk's attention takes four times as long, the decodes' and
  // everything else the same.
  const RooflineModel::Item chunk = mixed[0];
  const double chunk_attention = base.price(&chunk, 1).attention;
  EXPECT_NEAR(q.attention - b.attention, 3 * chunk_attention, 1e-9 * b.total());
  EXPECT_EQ(q.gemm, b.gemm);
  EXPECT_EQ(q.lm_head, b.lm_head);
  // Decodes alone do not see it.
  const std::vector<RooflineModel::Item> decodes(mixed.begin() + 1, mixed.end());
  EXPECT_EQ(slow.price(decodes.data(), decodes.size()).total(),
            base.price(decodes.data(), decodes.size()).total());
}

// The terms calibration against Vidur's A100 timings added (all 0, off, in the shipped defaults).
TEST(Roofline, AttentionSequenceCostAddsPerSequenceAndLayer) {
  const RooflineModel base = model("a100-80gb", "llama-2-7b", DType::kFp16);
  EXPECT_EQ(base.hardware().attention_sequence_overhead, 0);
  HardwareSpec hw = base.hardware();
  hw.attention_sequence_overhead = 2e-6;
  const RooflineModel with(hw, base.model(), base.options());
  const std::vector<RooflineModel::Item> mixed = {{512, 64, true}, {1, 4000, true}, {1, 100, true}, {1, 7, false}};
  const RooflineBreakdown b = base.price(mixed.data(), mixed.size());
  const RooflineBreakdown w = with.price(mixed.data(), mixed.size());
  EXPECT_NEAR(w.attention - b.attention, 4 * 32 * 2e-6, 1e-12);  // 4 sequences x 32 layers
  EXPECT_EQ(w.gemm, b.gemm);
}

TEST(Roofline, SelfAttentionEfficiencyPricesTheChunksCausalTriangle) {
  const RooflineModel base = model("a100-80gb", "llama-2-7b", DType::kFp16);
  HardwareSpec hw = base.hardware();
  hw.prefill_attention_efficiency = 0.3;
  const RooflineModel one(hw, base.model(), base.options());
  hw.prefill_self_attention_efficiency = 0.3;  // the same: the same price, up to rounding
  const RooflineModel same(hw, base.model(), base.options());
  hw.prefill_self_attention_efficiency = 0.1;
  const RooflineModel slow(hw, base.model(), base.options());
  const RooflineModel::Item chunk{2048, 1024, true}, fresh{2048, 0, true};
  EXPECT_NEAR(same.price(&chunk, 1).attention, one.price(&chunk, 1).attention, 1e-12);
  // Compute-bound: the triangle's 2048 x 2049 / 2 pairs take three times as long, the cache's
  // 2048 x 1024 pairs the same.
  const double q_dim = 4096, layers = 32, peak = hw.fp16_flops;
  const double triangle = 4 * (2048.0 * 2049 / 2) * q_dim / peak * layers;
  EXPECT_NEAR(slow.price(&chunk, 1).attention - one.price(&chunk, 1).attention, triangle * (1 / 0.1 - 1 / 0.3),
              1e-9);
  EXPECT_NEAR(slow.price(&fresh, 1).attention / one.price(&fresh, 1).attention, 3.0, 1e-9);
  // Decodes have no triangle.
  const RooflineModel::Item decode{1, 4000, true};
  EXPECT_EQ(slow.price(&decode, 1).total(), one.price(&decode, 1).total());
}

TEST(Roofline, GemmTileRowsRoundsTheRowsOfComputeBoundProducts) {
  const RooflineModel base = model("a100-80gb", "llama-2-7b", DType::kFp16);
  HardwareSpec hw = base.hardware();
  hw.gemm_half_rows = 0;
  const RooflineModel flat(hw, base.model(), base.options());
  hw.gemm_tile_rows = 128;
  const RooflineModel tiled(hw, base.model(), base.options());
  const auto gemm = [](const RooflineModel& r, int64_t tokens) {
    const RooflineModel::Item item{tokens, 0, false};
    return r.price(&item, 1).gemm;
  };
  // 1,025 rows cost what 1,152 (9 tiles) do without rounding; whole tiles cost the same.
  EXPECT_NEAR(gemm(tiled, 1025), gemm(flat, 1152), 1e-12);
  EXPECT_NEAR(gemm(tiled, 1024), gemm(flat, 1024), 1e-12);
  EXPECT_NEAR(gemm(tiled, 1100), gemm(tiled, 1152), 1e-12);
  // Memory-bound products (a few rows read all the weights) do not see it.
  EXPECT_EQ(gemm(tiled, 3), gemm(flat, 3));
}

// The backend keeps the price of everything but the attention by the batch's tokens and sampling
// sequences; its durations are still exactly the model's, whatever the batches' order, and when
// two counts share a slot of what it keeps.
TEST(Roofline, TheBackendKeepsPricesWithoutChangingAny) {
  for (const int32_t tp : {1, 2}) {
    const RooflineModel rm = model("a100-80gb", "llama-3-8b", DType::kBf16, tp);
    RooflineBackend backend(rm, MemoryPlan{});
    std::deque<Request> requests;  // stable addresses
    std::vector<Batch> batches;
    for (int32_t chunk = 2; chunk <= 700; chunk += 3) {  // not a decode (priced in integers)
      for (const int32_t decodes : {0, 1, 5, 40}) {
        Batch b;
        Request& p = requests.emplace_back();
        p.prompt_tokens = chunk + (chunk % 2 == 0 ? 0 : 100);  // odd chunks do not finish the prompt
        b.items.push_back({&p, chunk, 0});
        for (int32_t d = 0; d < decodes; ++d) {
          Request& r = requests.emplace_back();
          r.prompt_tokens = 50 + d;
          r.num_output = 1 + d % 3;
          r.num_computed = r.num_tokens() - 1;
          b.items.push_back({&r, 1, r.num_computed});
        }
        batches.push_back(std::move(b));
      }
    }
    for (int round = 0; round < 3; ++round) {  // kept prices hit in the later rounds
      for (size_t i = 0; i < batches.size(); ++i) {
        const Batch& b = batches[(i * 7 + static_cast<size_t>(round)) % batches.size()];
        const Time expected = priced_duration(rm.price(b).total());
        ASSERT_EQ(backend.run(b).duration, expected) << "tp " << tp << " round " << round << " batch " << i;
      }
    }
  }
}

}  // namespace
}  // namespace servesim
