// Measured timings: Vidur's profiles summed as Vidur sums them, our CSV and its errors, the
// roofline's comparable price, and `sim validate --measured`.
#include "analysis/calibration/measured.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/calibration/calibrate.h"
#include "analysis/calibration/measured_report.h"
#include "backends/hardware.h"
#include "tests/cli_harness.h"

namespace servesim {
namespace {

using testing::Cli;
using testing::Outcome;
namespace fs = std::filesystem;

// An excerpt of Vidur's Llama-2-7B profile on A100 (tests/data/measured/README.md): mlp.csv rows of
// 32, 512 and 2,048 (twice) tokens at tp 1 and 32 tokens at tp 2; attention rows of decode batches
// 3 and 32 over 1,024 cached tokens and prefills of 512 and 2,048 over none.
const std::string kExcerpt =
    SERVESIM_PROJECT_DIR "/tests/data/measured/vidur/compute/a100/meta-llama/Llama-2-7b-hf";
const std::string kModels = SERVESIM_PROJECT_DIR "/data/models/";
const std::string kHardware = SERVESIM_PROJECT_DIR "/data/hardware/";

ModelSpec model(const std::string& name) { return load_model(kModels + name + ".json").value(); }

const MeasuredBatch* find(const std::vector<MeasuredBatch>& batches, const std::string& label) {
  for (const MeasuredBatch& b : batches) {
    if (b.label == label) return &b;
  }
  return nullptr;
}

// The excerpt's per-layer medians (ms), as written in mlp.csv, in Vidur's order: attn_pre_proj,
// attn_post_proj, attn_rope, mlp_up_proj, mlp_act, mlp_down_proj, input_layernorm,
// post_attention_layernorm, add.
constexpr double kLinear32 = 0.066 + 0.027 + 0.006 + 0.115 + 0.008 + 0.065 + 0.004 + 0.005 + 0.002;
constexpr double kLinear512 = 0.234 + 0.088 + 0.022 + 0.402 + 0.036500000000000005 + 0.229 + 0.012 + 0.012 + 0.007;
constexpr double kLinear2048a = 0.979 + 0.301 + 0.076 + 1.694 + 0.135 + 0.851 + 0.053 + 0.055 + 0.028;
constexpr double kLinear2048b = 0.9795 + 0.301 + 0.076 + 1.693 + 0.135 + 0.85 + 0.053 + 0.054 + 0.028;

TEST(VidurProfile, DecodeIsTheLayersSumTimesTheLayers) {
  Result<VidurProfile> p = read_vidur_profile(kExcerpt, model("llama-2-7b"), 1);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p.value().has_attention);
  const MeasuredBatch* b = find(p.value().batches, "decode batch 32 over 1024");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind, MeasuredKind::kDecode);
  EXPECT_EQ(b->covers, Coverage::kLayers);
  ASSERT_EQ(b->measurement.items.size(), 32u);
  for (const RooflineModel::Item& it : b->measurement.items) {
    EXPECT_EQ(it.new_tokens, 1);
    EXPECT_EQ(it.context_tokens, 1024);
  }
  // Linear layers at 32 tokens plus the decode attention row (0.326 ms), times 32 layers.
  EXPECT_NEAR(b->measurement.measured, 32 * (kLinear32 + 0.326) / 1e3, 1e-12);
}

TEST(VidurProfile, PrefillIsTheLayersSumTimesTheLayersWithDuplicatesAveraged) {
  Result<VidurProfile> p = read_vidur_profile(kExcerpt, model("llama-2-7b"), 1);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const MeasuredBatch* b = find(p.value().batches, "prefill 512 over 0");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind, MeasuredKind::kPrefill);
  ASSERT_EQ(b->measurement.items.size(), 1u);
  EXPECT_EQ(b->measurement.items[0].new_tokens, 512);
  EXPECT_EQ(b->measurement.items[0].context_tokens, 0);
  EXPECT_NEAR(b->measurement.measured, 32 * (kLinear512 + 0.103) / 1e3, 1e-12);
  // mlp.csv profiled 2,048 tokens twice: the mean of the two rows' sums.
  const MeasuredBatch* big = find(p.value().batches, "prefill 2048 over 0");
  ASSERT_NE(big, nullptr);
  EXPECT_NEAR(big->measurement.measured, 32 * ((kLinear2048a + kLinear2048b) / 2 + 0.781) / 1e3, 1e-12);
}

TEST(VidurProfile, LinearOnlyRowsAndWhatWasSkipped) {
  Result<VidurProfile> p = read_vidur_profile(kExcerpt, model("llama-2-7b"), 1);
  ASSERT_TRUE(p.ok()) << p.error().message;
  // Decode batch 3: mlp.csv has no timing of 3 tokens, so the shape is skipped, and said so.
  EXPECT_EQ(find(p.value().batches, "decode batch 3 over 1024"), nullptr);
  const std::vector<std::string>& notes = p.value().notes;
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("1 of its shapes skipped") != std::string::npos && n.find("(3)") != std::string::npos;
  })) << ::testing::PrintToString(notes);
  const MeasuredBatch* lin = find(p.value().batches, "linear 512 tokens");
  ASSERT_NE(lin, nullptr);
  EXPECT_EQ(lin->kind, MeasuredKind::kLinearOnly);
  EXPECT_EQ(lin->covers, Coverage::kLinearLayers);
  EXPECT_NEAR(lin->measurement.measured, 32 * kLinear512 / 1e3, 1e-12);
  EXPECT_EQ(p.value().batches.size(), 3u + 3u);  // decode 32, prefill 512 and 2,048; linear 32, 512, 2,048
}

TEST(VidurProfile, TensorParallelRowsLeaveTheAttentionOut) {
  Result<VidurProfile> p = read_vidur_profile(kExcerpt, model("llama-2-7b"), 2);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_FALSE(p.value().has_attention);
  ASSERT_EQ(p.value().batches.size(), 1u);
  const double sum = 0.039 + 0.016 + 0.004 + 0.061 + 0.005 + 0.0345 + 0.004 + 0.004 + 0.002;
  EXPECT_NEAR(p.value().batches[0].measurement.measured, 32 * sum / 1e3, 1e-12);
  Result<VidurProfile> none = read_vidur_profile(kExcerpt, model("llama-2-7b"), 4);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no row has num_tensor_parallel_workers = 4 (found: 1, 2)"),
            std::string::npos) << none.error().message;
}

TEST(VidurProfile, AnotherModelsShapesAreRefusedWithTheCell) {
  Result<VidurProfile> p = read_vidur_profile(kExcerpt, model("llama-3-8b"), 1);
  ASSERT_FALSE(p.ok());
  // n_kv_head is the 52nd column: 10 operators x 5 statistics, then n_head, n_kv_head.
  EXPECT_NE(p.error().message.find("mlp.csv:2:52: n_kv_head: the profile's is 32, but model llama-3-8b has "
                                   "num_key_value_heads = 8"),
            std::string::npos) << p.error().message;
  EXPECT_FALSE(read_vidur_profile(SERVESIM_PROJECT_DIR "/tests/data", model("llama-2-7b"), 1).ok());
}

TEST(VidurProfile, PresetsFromThePath) {
  const VidurPresets p = vidur_presets("data/measured/vidur/compute/h100/meta-llama/Llama-2-7b-hf/");
  EXPECT_EQ(p.hardware, "h100-sxm");
  EXPECT_EQ(p.model, "llama-2-7b");
  EXPECT_EQ(vidur_presets("x/a100/meta-llama/Meta-Llama-3-70B").model, "llama-3-70b");
  EXPECT_EQ(vidur_presets("x/a100/meta-llama/Llama-2-70b-hf").model, "");  // not shipped
}

// Our CSV, written to a temporary folder.
class MeasuredCsv : public Cli {
 protected:
  Result<std::vector<MeasuredBatch>> read(const std::string& text) {
    return read_measured_csv(write("m.csv", text));
  }
  std::string error(const std::string& text) {
    Result<std::vector<MeasuredBatch>> r = read(text);
    return r.ok() ? "(read without error)" : r.error().message;
  }
  std::string path() const { return (dir_ / "m.csv").string(); }
};

// A row whose operators all took 0 ms is refused: no relative error can be taken of it.
TEST_F(MeasuredCsv, AVidurRowOfNothingIsRefused) {
  std::ifstream in(kExcerpt + "/mlp.csv");
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  // Zero the 50 time_stats columns (the first 50), keep the shapes, tokens and tp.
  std::string zeroed;
  size_t at = 0;
  for (int k = 0; k < 50; ++k) {
    at = row.find(',', at) + 1;
    zeroed += "0,";
  }
  zeroed += row.substr(at);
  fs::create_directories(dir_ / "profile");
  std::ofstream(dir_ / "profile" / "mlp.csv") << header << "\n" << zeroed << "\n";
  Result<VidurProfile> p = read_vidur_profile((dir_ / "profile").string(), model("llama-2-7b"), 1);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("mlp.csv:2: the operators' medians of this row sum to 0 ms"), std::string::npos)
      << p.error().message;
}

TEST_F(MeasuredCsv, ReadsIterationsWithCommentsAndEitherWayOfGivingTheTime) {
  Result<std::vector<MeasuredBatch>> r = read(
      "# vLLM, Llama-2-7B, one A100\n"
      "iteration,new_tokens,context_tokens,measured_ms,request\n"
      "4,512,0,41.5,a\n"
      "\n"
      "5,1,512,12.25,a\n"
      "5,1,300,,b\n"
      "  # a comment between rows\n"
      "6,1,513,13,a\n"
      "6,128,0,13,c\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<MeasuredBatch>& b = r.value();
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].kind, MeasuredKind::kPrefill);
  EXPECT_EQ(b[1].kind, MeasuredKind::kDecode);
  EXPECT_EQ(b[2].kind, MeasuredKind::kMixed);
  EXPECT_EQ(b[0].covers, Coverage::kIteration);
  EXPECT_DOUBLE_EQ(b[0].measurement.measured, 0.0415);
  EXPECT_DOUBLE_EQ(b[1].measurement.measured, 0.01225);
  ASSERT_EQ(b[1].measurement.items.size(), 2u);
  EXPECT_EQ(b[1].measurement.items[1].context_tokens, 300);
  EXPECT_TRUE(b[1].measurement.items[1].emits);
  EXPECT_EQ(b[2].new_tokens(), 129);
  EXPECT_EQ(b[1].label, "iteration 5 (line 5)");
}

TEST_F(MeasuredCsv, ErrorsNameFileLineAndColumn) {
  const std::string p = path();
  const std::string header = "iteration,new_tokens,context_tokens,measured_ms\n";
  EXPECT_EQ(error(header + "0,1,5,3\n0,abc,5,\n"),
            p + ":3:2: new_tokens: expected an integer from 1 to 100000000, got 'abc'");
  EXPECT_EQ(error(header + "0,1,x5,3\n"), p + ":2:3: context_tokens: expected an integer from 0 to 100000000, got 'x5'");
  EXPECT_EQ(error(header + "0,1,5,-3\n"),
            p + ":2:4: measured_ms: expected a number of milliseconds > 0 (and <= 1e9), got '-3'");
  EXPECT_EQ(error(header + "0,1,5,0\n"),
            p + ":2:4: measured_ms: expected a number of milliseconds > 0 (and <= 1e9), got '0'");
  EXPECT_EQ(error(header + "0,1,5,3\n1,1,6,3\n3,1,7,3\n"),
            p + ":4:1: iteration: iteration 2 has no rows (this row jumps from 1 to 3): number the iterations "
                "one after another; was a row lost?");
  EXPECT_EQ(error(header + "0,1,5,3\n1,1,6,3\n0,1,7,\n"),
            p + ":4:1: iteration: iteration 0 after iteration 1: keep an iteration's rows together, and the "
                "iterations in order");
  EXPECT_EQ(error(header + "0,1,5,\n"),
            p + ":2:4: measured_ms: the first row of iteration 0 has no time: give its time in ms here");
  EXPECT_NE(error(header + "0,1,5,3\n0,1,6,4\n").find(p + ":3:4: measured_ms: iteration 0 took 4 ms here"),
            std::string::npos);
  EXPECT_EQ(error(header + "0,1,5\n"),
            p + ":2: expected 4 fields, as in the header, got 3 (an empty cell still needs its comma)");
  EXPECT_EQ(error("# times\niteration,new_tokens,context_tokens,ms\n0,1,5,3\n"),
            p + ":2: missing column 'measured_ms' (found: iteration, new_tokens, context_tokens, ms); the "
                "columns are iteration,new_tokens,context_tokens,measured_ms");
  EXPECT_EQ(error(header), p + ": no measured iterations (no rows after the header)");
  EXPECT_EQ(error("# only a comment\n"),
            p + ": no header row (iteration,new_tokens,context_tokens,measured_ms)");
}

RooflineModel roofline(const std::string& hw, const std::string& m, int32_t tp = 1) {
  RooflineOptions o;
  o.tp = tp;
  return RooflineModel(load_hardware(kHardware + hw + ".toml").value(), model(m), o);
}

TEST(ComparablePrice, LeavesOutTheLmHeadEmbeddingOverheadAndCommunication) {
  const std::vector<RooflineModel::Item> items(8, RooflineModel::Item{1, 700, true});
  for (int32_t tp : {1, 2}) {
    const RooflineModel r = roofline("a100-80gb", "llama-2-7b", tp);
    const RooflineBreakdown t = r.price(items.data(), items.size());
    ASSERT_GT(t.lm_head, 0);
    EXPECT_DOUBLE_EQ(comparable_price(r, items, Coverage::kIteration), t.total());
    const double layers = comparable_price(r, items, Coverage::kLayers);
    EXPECT_NEAR(layers, t.total() - t.lm_head - t.overhead - t.communication - embedding_time(r, 8), 1e-15);
    EXPECT_LT(layers, t.total() - t.lm_head);
    EXPECT_NEAR(comparable_price(r, items, Coverage::kLinearLayers), layers - t.attention, 1e-15);
  }
}

TEST(ComparablePrice, TheEmbeddingIsTheRooflinesOwn) {
  // With no layers, the roofline's `other` is the embedding read alone.
  ModelSpec none = model("llama-3-8b");
  none.num_layers = 0;
  const RooflineModel r(load_hardware(kHardware + "h100-sxm.toml").value(), none, RooflineOptions{});
  const RooflineModel::Item item{300, 0, true};
  EXPECT_DOUBLE_EQ(r.price(&item, 1).other, embedding_time(r, 300));
}

TEST(MeasuredValidation, ErrorsBiasAndBands) {
  Result<VidurProfile> p = read_vidur_profile(kExcerpt, model("llama-2-7b"), 1);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const RooflineModel r = roofline("a100-80gb", "llama-2-7b");
  const MeasuredValidation v = validate_measured(r, p.value().batches);
  ASSERT_EQ(v.priced.size(), p.value().batches.size());
  double mape = 0;
  for (const PricedBatch& pb : v.priced) {
    const double m = pb.batch->measurement.measured;
    EXPECT_DOUBLE_EQ(pb.error, (comparable_price(r, *pb.batch) - m) / m);
    mape += std::fabs(pb.error);
  }
  EXPECT_NEAR(v.all.mape, mape / static_cast<double>(v.priced.size()), 1e-12);
  ASSERT_EQ(v.by_kind.size(), 3u);
  EXPECT_EQ(v.by_kind[0].group, "prefill");
  EXPECT_EQ(v.by_kind[1].group, "decode");
  EXPECT_EQ(v.by_kind[2].group, "linear-only");
  EXPECT_EQ(v.by_band[0].group, "prefill 1-512 tokens");
  EXPECT_EQ(v.by_band[2].group, "decode batch 17+");
  EXPECT_EQ(v.worst.size(), v.priced.size());  // fewer than 10
  EXPECT_GE(std::fabs(v.priced[v.worst[0]].error), std::fabs(v.priced[v.worst[1]].error));
}

// A fit to measurements that cover only the layers (as Vidur's) prices them comparably, recovers
// the efficiencies they were made with, and leaves the overhead, which they do not cover, alone.
TEST(CalibrateMeasured, RecoversEfficienciesFromLayerTimings) {
  HardwareSpec truth = load_hardware(kHardware + "a100-80gb.toml").value();
  truth.gemm_efficiency = 0.55;
  truth.attention_efficiency = 0.85;
  RooflineOptions o;
  const ModelSpec m = model("llama-2-7b");
  const RooflineModel made(truth, m, o);
  std::vector<Measurement> data;
  for (int64_t batch : {1, 4, 16, 64, 128}) {
    for (int64_t context : {128, 512, 2048}) {
      Measurement d;
      d.items.assign(static_cast<size_t>(batch), {1, context, true});
      d.covers = Coverage::kLayers;
      d.measured = comparable_price(made, d.items, d.covers);
      data.push_back(d);
    }
  }
  for (int64_t tokens : {256, 1024, 4096}) {
    Measurement d;
    d.items = {{tokens, 0, true}};
    d.covers = Coverage::kLayers;
    d.measured = comparable_price(made, d.items, d.covers);
    data.push_back(d);
  }
  HardwareSpec start = load_hardware(kHardware + "a100-80gb.toml").value();
  CalibrationOptions options;
  options.keys = {FitKey::kGemmEfficiency, FitKey::kAttentionEfficiency, FitKey::kOverhead};
  options.bootstrap = 0;
  options.price = [](const RooflineModel& r, const Measurement& x) { return comparable_price(r, x.items, x.covers); };
  const CalibrationFit fit = fit_hardware(start, m, o, data, options);
  EXPECT_NEAR(fit.hardware.gemm_efficiency, 0.55, 0.01);
  EXPECT_NEAR(fit.hardware.attention_efficiency, 0.85, 0.01);
  EXPECT_LT(fit.mape_after, 0.002);
  EXPECT_EQ(fit.hardware.overhead, start.overhead);  // not covered: not fitted
}

// One fit over the timings of two models (a 7B at tp 1, a 70B at tp 2) pins the keys with both, and
// says how each fares on the held-out half.
TEST(CalibrateMeasured, OneFitSpansSeveralModels) {
  HardwareSpec truth = load_hardware(kHardware + "a100-80gb.toml").value();
  truth.gemm_efficiency = 0.55;
  truth.memory_efficiency = 0.6;
  std::vector<FitModel> models;
  for (const auto& [name, tp] : {std::pair<const char*, int32_t>{"llama-2-7b", 1}, {"llama-3-70b", 2}}) {
    RooflineOptions o;
    o.tp = tp;
    models.push_back({model(name), o});
  }
  std::vector<Measurement> data;
  for (int32_t k = 0; k < 2; ++k) {
    const RooflineModel made(truth, models[static_cast<size_t>(k)].model, models[static_cast<size_t>(k)].options);
    for (int64_t tokens : {1, 8, 64, 256, 1024, 4096}) {
      Measurement d;
      d.items = {{tokens, 0, true}};
      d.covers = Coverage::kLinearLayers;
      d.model = k;
      d.measured = comparable_price(made, d.items, d.covers);
      data.push_back(d);
    }
  }
  CalibrationOptions options;
  options.keys = {FitKey::kGemmEfficiency, FitKey::kMemoryEfficiency};
  options.bootstrap = 0;
  options.price = [](const RooflineModel& r, const Measurement& x) { return comparable_price(r, x.items, x.covers); };
  const CalibrationFit fit = fit_hardware(load_hardware(kHardware + "a100-80gb.toml").value(), models, data, options);
  EXPECT_NEAR(fit.hardware.gemm_efficiency, 0.55, 1e-4);
  EXPECT_NEAR(fit.hardware.memory_efficiency, 0.6, 1e-4);
  EXPECT_LT(fit.mape_after, 1e-4);
  ASSERT_EQ(fit.held_out_by_model.size(), 2u);
  EXPECT_EQ(fit.held_out_by_model[0].count + fit.held_out_by_model[1].count, fit.held_out_count);
  for (const auto& m : fit.held_out_by_model) EXPECT_LT(m.after, 1e-4);
  ASSERT_EQ(fit.held_out_by_kind.size(), 1u);
  EXPECT_EQ(fit.held_out_by_kind[0].kind, "linear-only");
}

using ValidateMeasuredCli = Cli;

// Several --measured make one fit, with each source's error; --model and --tp go once for all or
// once per --measured.
TEST_F(ValidateMeasuredCli, CalibrateFitsSeveralProfilesAtOnce) {
  const Outcome o = sim({"calibrate", "--measured", kExcerpt, "--measured", kExcerpt, "--tp", "1", "--out", "fit.toml",
                         "--bootstrap", "0"});
  ASSERT_EQ(o.status, 0) << o.output;
  for (const char* line : {"12 measured batches", "MAPE by source:", "Held-out by kind:", "Wrote fit.toml"}) {
    EXPECT_NE(o.output.find(line), std::string::npos) << line << "\n" << o.output;
  }
  const Outcome counts = sim({"calibrate", "--measured", kExcerpt, "--measured", kExcerpt, "--tp", "1", "--tp", "1",
                              "--tp", "1", "--out", "x.toml"});
  EXPECT_EQ(counts.status, 2);
  EXPECT_NE(counts.output.find("--tp is given 3 times for 2 --measured"), std::string::npos) << counts.output;
  write("ours.csv", "iteration,new_tokens,context_tokens,measured_ms\n0,16,0,12.5\n");
  const Outcome no_gpu = sim({"calibrate", "--measured", kExcerpt, "--measured", (dir_ / "ours.csv").string(),
                              "--model", "llama-2-7b", "--out", "x.toml"});
  EXPECT_EQ(no_gpu.status, 2);
  EXPECT_NE(no_gpu.output.find("--hardware is required"), std::string::npos) << no_gpu.output;
}

// `sim calibrate --measured` fits to a profile, writes a hardware file that `sim validate
// --measured` reads, and names what it could not fit; a run's options are refused with it.
TEST_F(ValidateMeasuredCli, CalibrateFitsToMeasuredTimings) {
  // The excerpt's 6 batches pin at most 6 keys (sim calibrate refuses more); overhead_us is not
  // covered by Vidur's layers.
  const Outcome o = sim({"calibrate", "--measured", kExcerpt, "--out", "fit.toml", "--bootstrap", "10", "--fit",
                         "gemm_efficiency,memory_efficiency,attention_efficiency,overhead_us"});
  ASSERT_EQ(o.status, 0) << o.output;
  for (const char* line : {"6 measured batches", "Convergence:", "Held-out:", "not fitted", "Wrote fit.toml"}) {
    EXPECT_NE(o.output.find(line), std::string::npos) << line << "\n" << o.output;
  }
  const Outcome v = sim({"validate", "--measured", kExcerpt, "--hardware", (dir_ / "fit.toml").string()});
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_EQ(sim({"calibrate", "--measured", kExcerpt, "--out", "x.toml", "--run", "1"}).status, 2);
  const Outcome no_measured = sim({"calibrate", "--out", "x.toml", "--model", "llama-2-7b"});
  EXPECT_EQ(no_measured.status, 2);
  EXPECT_NE(no_measured.output.find("apply with --measured only"), std::string::npos) << no_measured.output;
}

TEST_F(ValidateMeasuredCli, PrintsTheMapeByKindOfTheExcerpt) {
  const Outcome o = sim({"validate", "--measured", kExcerpt});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Roofline (a100-80gb, llama-2-7b, tp 1) against 6 measured batches"), std::string::npos)
      << o.output;
  for (const char* row : {"all ", "prefill ", "decode ", "linear-only ", "decode batch 17+", "Worst shapes:",
                          "decode batch 32 over 1024", "Note: attention_rows.csv: 1 of its shapes skipped"}) {
    EXPECT_NE(o.output.find(row), std::string::npos) << row << "\n" << o.output;
  }
  const Outcome j = sim({"validate", "--measured", kExcerpt, "--format", "json", "--hardware", "h100-sxm"});
  ASSERT_EQ(j.status, 0) << j.output;
  const nlohmann::json doc = nlohmann::json::parse(j.output);
  EXPECT_EQ(doc["hardware"], "h100-sxm");
  EXPECT_EQ(doc["by_kind"]["decode"]["count"], 1);
  EXPECT_GT(doc["by_kind"]["prefill"]["mape"].get<double>(), 0);
  EXPECT_EQ(doc["shapes"].size(), 6u);
}

TEST_F(ValidateMeasuredCli, ACsvNeedsItsGpuAndModelAndBadInputIsStatus2) {
  const std::string csv = write("m.csv", "iteration,new_tokens,context_tokens,measured_ms\n0,1,100,9.5\n");
  Outcome o = sim({"validate", "--measured", csv});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("--hardware is required"), std::string::npos) << o.output;
  o = sim({"validate", "--measured", csv, "--hardware", "a100-80gb", "--model", "llama-2-7b"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("decode "), std::string::npos) << o.output;
  const std::string bad = write("bad.csv", "iteration,new_tokens,context_tokens,measured_ms\n0,1,100,-1\n");
  o = sim({"validate", "--measured", bad, "--hardware", "a100-80gb", "--model", "llama-2-7b"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find(bad + ":2:4: measured_ms"), std::string::npos) << o.output;
  o = sim({"validate", "--measured", kExcerpt, "--tp", "3"});
  EXPECT_EQ(o.status, 2) << o.output;
  o = sim({"validate", "--tp", "2"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("apply with --measured only"), std::string::npos) << o.output;
}

}  // namespace
}  // namespace servesim
