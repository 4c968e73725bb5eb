// sim calibrate: fitting a hardware file to a run measured on a known, different machine.
#include "analysis/calibration/calibrate.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "analysis/calibration/logged_batches.h"
#include "analysis/storage/batch_log.h"
#include "analysis/storage/database.h"
#include "analysis/calibration/validate.h"
#include "tests/cli_harness.h"
#include "tests/test_util.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;
const std::string kHardware = SERVESIM_PROJECT_DIR "/data/hardware/cpu-host.toml";
const std::string kModel = SERVESIM_PROJECT_DIR "/data/models/tiny.json";

// The machine the "measurements" came from: cpu-host.toml with other efficiencies and overhead.
HardwareSpec true_hardware() {
  HardwareSpec hw = load_hardware(kHardware).value();
  hw.gemm_efficiency = 0.3;
  hw.memory_efficiency = 0.4;
  hw.attention_efficiency = 0.2;
  hw.overhead = 200e-6;
  return hw;
}

// A batch of prefill chunks, decodes or both, drawn from rng.
std::vector<RooflineModel::Item> random_batch(std::mt19937& rng, int kind) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<RooflineModel::Item> items;
  if (kind != 1) {  // prefill chunks
    for (int i = uniform(1, 3); i > 0; --i) {
      const int ctx = uniform(0, 1) ? 0 : uniform(1, 200);
      items.push_back({uniform(8, 256), ctx, uniform(0, 3) != 0});
    }
  }
  if (kind != 0) {  // decodes
    for (int i = uniform(1, 32); i > 0; --i) items.push_back({1, uniform(1, 480), true});
  }
  return items;
}

class CalibrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("servesim_calibrate_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = (dir_ / "sim.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A cpu run of `iterations` iterations priced by true_hardware(), with the items logged unless
  // log_items is false; returns its id.
  int64_t make_run(int iterations, bool log_items = true) {
    auto db = Database::open(db_path_);
    EXPECT_TRUE(db.ok());
    RunInfo info{.name = "t", .policy = "vllm", .backend = "cpu", .hardware = kHardware,
                 .model = kModel};
    const int64_t run = db.value()->begin_run(info).value();
    const ModelSpec model = load_model(kModel).value();
    const RooflineOptions options = replay_options("cpu", model);
    const RooflineModel truth(true_hardware(), model, options);
    const RooflineModel shipped(load_hardware(kHardware).value(), model, options);
    EXPECT_TRUE(create_batch_items_table(*db.value()).ok());
    sqlite3* h = db.value()->handle();
    sqlite3_exec(h, "BEGIN", nullptr, nullptr, nullptr);
    sqlite3_stmt *it = nullptr, *item = nullptr;
    sqlite3_prepare_v2(h,
                       "INSERT INTO iterations(run_id, replica, step, start, duration, num_seqs, "
                       "prefill_tokens, decode_tokens, kv_blocks_used, kv_blocks_total, predicted) "
                       "VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6, ?7, 0, NULL, ?8)",
                       -1, &it, nullptr);
    sqlite3_prepare_v2(h, "INSERT INTO batch_items VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6)", -1, &item,
                       nullptr);
    std::mt19937 rng(7);
    double start = 0;
    for (int step = 0; step < iterations; ++step) {
      const std::vector<RooflineModel::Item> items = random_batch(rng, step % 3);
      const double duration = truth.price(items.data(), items.size()).total();
      int64_t prefill = 0, decode = 0;
      for (const auto& x : items) (x.new_tokens > 1 ? prefill : decode) += x.new_tokens;
      sqlite3_bind_int64(it, 1, run);
      sqlite3_bind_int(it, 2, step);
      sqlite3_bind_double(it, 3, start);
      sqlite3_bind_double(it, 4, duration);
      sqlite3_bind_int64(it, 5, static_cast<int64_t>(items.size()));
      sqlite3_bind_int64(it, 6, prefill);
      sqlite3_bind_int64(it, 7, decode);
      sqlite3_bind_double(it, 8, shipped.price(items.data(), items.size()).total());
      EXPECT_EQ(sqlite3_step(it), SQLITE_DONE);
      sqlite3_reset(it);
      start += duration;
      for (size_t i = 0; log_items && i < items.size(); ++i) {
        sqlite3_bind_int64(item, 1, run);
        sqlite3_bind_int(item, 2, step);
        sqlite3_bind_int64(item, 3, static_cast<int64_t>(i));
        sqlite3_bind_int64(item, 4, items[i].new_tokens);
        sqlite3_bind_int64(item, 5, items[i].context_tokens);
        sqlite3_bind_int(item, 6, items[i].emits ? 1 : 0);
        EXPECT_EQ(sqlite3_step(item), SQLITE_DONE);
        sqlite3_reset(item);
      }
    }
    sqlite3_finalize(it);
    sqlite3_finalize(item);
    sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr);
    return run;
  }

  // The "all" MAPE (a fraction) that `sim validate` prints for the run.
  double validate_mape(int64_t run, std::optional<std::string> hardware) {
    std::ostringstream out;
    Status s = validate_run(db_path_, run, out, hardware);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    std::istringstream lines(out.str());
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("all ", 0) == 0) {
        std::istringstream fields(line);
        std::string all;
        long count = 0;
        double mape = 0;
        fields >> all >> count >> mape;
        return mape / 100;
      }
    }
    ADD_FAILURE() << "no 'all' row in:\n" << out.str();
    return -1;
  }

  fs::path dir_;
  std::string db_path_;
};

// calibrate_run writing to out_path (as --out), which may not be the database.
Status calibrate(const std::string& db_path, std::optional<int64_t> run, const std::string& out_path,
                 std::ostream& out, const CalibrationOptions& options = {}) {
  OutputFile file("--out", out_path, {{"--db", db_path}});
  return calibrate_run(db_path, run, file, out, options);
}

// Few resamples: the tests' runs are small, and the ranges are tested on their own below.
CalibrationOptions quick() {
  CalibrationOptions o;
  o.bootstrap = 20;
  return o;
}

TEST_F(CalibrateTest, RecoversTheMachineThatMeasuredTheRun) {
  const int64_t run = make_run(240);
  const std::string out_path = (dir_ / "fitted.toml").string();
  std::ostringstream out;
  Status s = calibrate(db_path_, run, out_path, out, quick());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_NE(out.str().find("MAPE"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("overhead_us"), std::string::npos) << out.str();

  Result<HardwareSpec> fitted = load_hardware(out_path);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const HardwareSpec truth = true_hardware();
  EXPECT_NEAR(fitted.value().gemm_efficiency, truth.gemm_efficiency, 0.03);
  EXPECT_NEAR(fitted.value().memory_efficiency, truth.memory_efficiency, 0.04);
  EXPECT_NEAR(fitted.value().attention_efficiency, truth.attention_efficiency, 0.02);
  EXPECT_NEAR(fitted.value().prefill_attention_efficiency, truth.attention_efficiency, 0.02);
  EXPECT_NEAR(fitted.value().overhead, truth.overhead, 20e-6);
  // Every other key is copied.
  const HardwareSpec shipped = load_hardware(kHardware).value();
  EXPECT_EQ(fitted.value().name, shipped.name);
  EXPECT_DOUBLE_EQ(fitted.value().memory_bytes, shipped.memory_bytes);
  EXPECT_DOUBLE_EQ(fitted.value().memory_bandwidth, shipped.memory_bandwidth);
  EXPECT_DOUBLE_EQ(fitted.value().fp16_flops, shipped.fp16_flops);
  EXPECT_DOUBLE_EQ(fitted.value().fp32_flops, shipped.fp32_flops);
  EXPECT_EQ(fitted.value().bf16, shipped.bf16);
  EXPECT_NEAR(fitted.value().gemm_half_rows, 0, 1);  // the truth's, cpu-host's: flat

  // The header names the run and the errors.
  std::ifstream file(out_path);
  std::string first;
  std::getline(file, first);
  EXPECT_NE(first.find("run " + std::to_string(run)), std::string::npos) << first;

  const double before = validate_mape(run, kHardware);
  const double after = validate_mape(run, out_path);
  EXPECT_GT(before, 0.30);
  EXPECT_LT(after, 0.05);
}

TEST_F(CalibrateTest, FitIsDeterministic) {
  const int64_t run = make_run(60);
  const std::string a = (dir_ / "a.toml").string(), b = (dir_ / "b.toml").string();
  std::ostringstream out;
  ASSERT_TRUE(calibrate(db_path_, run, a, out, quick()).ok());
  ASSERT_TRUE(calibrate(db_path_, std::nullopt, b, out, quick()).ok());  // the latest run
  std::ifstream fa(a), fb(b);
  std::stringstream sa, sb;
  sa << fa.rdbuf();
  sb << fb.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
}

TEST_F(CalibrateTest, Errors) {
  const std::string out_path = (dir_ / "fitted.toml").string();
  std::ostringstream out;
  Status s = calibrate(db_path_, std::nullopt, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no database"), std::string::npos) << s.error().message;

  const int64_t run = make_run(10);
  s = calibrate(db_path_, run + 5, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no run " + std::to_string(run + 5)), std::string::npos)
      << s.error().message;

  const int64_t bare = make_run(10, /*log_items=*/false);
  s = calibrate(db_path_, bare, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("logged no batches"), std::string::npos) << s.error().message;

  const int64_t empty = make_run(0);
  s = calibrate(db_path_, empty, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no measured iterations"), std::string::npos)
      << s.error().message;

  s = calibrate(db_path_, run, (dir_ / "no" / "such" / "dir.toml").string(), out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cannot write"), std::string::npos) << s.error().message;
  EXPECT_FALSE(fs::exists(out_path));
}


// fit_hardware on measurements made by pricing random batches with a known machine: an A100 serving
// Llama-3-8B, where decodes are memory-bound and long prompts compute-bound, so that every key
// moves some predictions differently from the others (on the tiny model, the weights' read, the
// overhead and the GEMM ramp all look like one fixed cost per iteration).

const std::string kA100 = SERVESIM_PROJECT_DIR "/data/hardware/a100-80gb.toml";

const ModelSpec& llama() {
  static const ModelSpec m = load_model(SERVESIM_PROJECT_DIR "/data/models/llama-3-8b.json").value();
  return m;
}
const RooflineOptions bf16{};

HardwareSpec a100() { return load_hardware(kA100).value(); }

// The A100 as some serving stack really runs it: every fittable key away from the file's value and
// from its bounds.
HardwareSpec synthetic_truth() {
  HardwareSpec hw = a100();
  hw.gemm_efficiency = 0.45;
  hw.memory_efficiency = 0.55;
  hw.attention_efficiency = 0.35;
  hw.prefill_attention_efficiency = 0.25;
  hw.gemm_half_rows = 48;
  hw.overhead = 2e-3;  // a slow host, as with eager PyTorch
  return hw;
}

// A batch of prompt chunks (up to 4,096 tokens over up to 4,096 cached), decodes (up to 64, over
// up to 8,192 cached tokens) or both.
std::vector<RooflineModel::Item> serving_batch(std::mt19937& rng, int kind) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<RooflineModel::Item> items;
  if (kind != 1) {
    for (int i = uniform(1, 2); i > 0; --i) {
      items.push_back({uniform(16, 4096), uniform(0, 1) ? 0 : uniform(16, 4096), uniform(0, 3) != 0});
    }
  }
  if (kind != 0) {
    for (int i = uniform(1, 64); i > 0; --i) items.push_back({1, uniform(16, 8192), true});
  }
  return items;
}

// `n` batches priced by `truth`, plus `per_sequence` seconds for each of their sequences, each times
// (1 + noise x a standard normal draw), seeded.
std::vector<Measurement> measure(const HardwareSpec& truth, int n, double noise, uint32_t seed,
                                 double per_sequence = 0) {
  const RooflineModel roofline(truth, llama(), bf16);
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<Measurement> data;
  for (int i = 0; i < n; ++i) {
    Measurement m{serving_batch(rng, i % 3), 0};
    const double exact = roofline.price(m.items.data(), m.items.size()).total() +
                         per_sequence * static_cast<double>(m.items.size());
    m.measured = exact * std::max(0.5, 1 + noise * normal(rng));
    data.push_back(std::move(m));
  }
  return data;
}

CalibrationFit fit(const std::vector<Measurement>& data, CalibrationOptions options) {
  return fit_hardware(a100(), llama(), bf16, data, options);
}

CalibrationOptions bootstrap(int resamples) {
  CalibrationOptions o;
  o.bootstrap = resamples;
  return o;
}

const ParameterFit& parameter(const CalibrationFit& fit, FitKey key) {
  for (const ParameterFit& p : fit.parameters) {
    if (p.key == key) return p;
  }
  ADD_FAILURE() << "no parameter " << fit_key_name(key);
  return fit.parameters.front();
}

// The truth's value of each key, in the file's unit.
double truth_value(const HardwareSpec& t, FitKey key) {
  switch (key) {
    case FitKey::kGemmEfficiency: return t.gemm_efficiency;
    case FitKey::kMemoryEfficiency: return t.memory_efficiency;
    case FitKey::kAttentionEfficiency: return t.attention_efficiency;
    case FitKey::kPrefillAttentionEfficiency: return t.prefill_attention_efficiency;
    case FitKey::kPrefillSelfAttentionEfficiency: return t.prefill_self_attention_efficiency;
    case FitKey::kGemmHalfRows: return t.gemm_half_rows;
    case FitKey::kGemmTileRows: return t.gemm_tile_rows;
    case FitKey::kOverhead: return t.overhead * 1e6;
    case FitKey::kAttentionSequence: return t.attention_sequence_overhead * 1e6;
  }
  return 0;
}

// Recovers `truth` from its noisy measurements, fitting `keys` from a100-80gb.toml with the others
// set as in the truth: none at a bound, each within 10 %, each 95 % range holding the truth (give
// or take half its width: a 95 % range misses now and then).
void expect_recovered(const HardwareSpec& truth, std::vector<FitKey> keys) {
  const double noise = 0.01;
  CalibrationOptions options = bootstrap(40);
  options.keys = keys;
  HardwareSpec start = truth;
  for (FitKey key : keys) {
    const HardwareSpec file = a100();
    switch (key) {
      case FitKey::kGemmEfficiency: start.gemm_efficiency = file.gemm_efficiency; break;
      case FitKey::kMemoryEfficiency: start.memory_efficiency = file.memory_efficiency; break;
      case FitKey::kAttentionEfficiency: start.attention_efficiency = file.attention_efficiency; break;
      case FitKey::kPrefillAttentionEfficiency: start.prefill_attention_efficiency = 0; break;
      case FitKey::kPrefillSelfAttentionEfficiency: start.prefill_self_attention_efficiency = 0; break;
      case FitKey::kGemmHalfRows: start.gemm_half_rows = file.gemm_half_rows; break;
      case FitKey::kGemmTileRows: start.gemm_tile_rows = 0; break;
      case FitKey::kOverhead: start.overhead = file.overhead; break;
      case FitKey::kAttentionSequence: start.attention_sequence_overhead = 0; break;
    }
  }
  const CalibrationFit f = fit_hardware(start, llama(), bf16, measure(truth, 240, noise, 11), options);

  EXPECT_TRUE(f.convergence.converged) << f.convergence.result << ": " << f.convergence.meaning;
  EXPECT_GT(f.convergence.evaluations, 10);
  EXPECT_LT(f.convergence.loss, 0.01 * f.convergence.loss_start);
  EXPECT_LT(f.convergence.loss, 1.5 * noise * noise);  // down to the noise
  EXPECT_LT(f.mape_after, 0.015);
  EXPECT_GT(f.mape_before, 0.1);
  EXPECT_EQ(f.bootstrap, 40);
  ASSERT_EQ(f.parameters.size(), keys.size());
  for (const ParameterFit& p : f.parameters) {
    const double t = truth_value(truth, p.key);
    SCOPED_TRACE(fit_key_name(p.key));
    EXPECT_TRUE(p.fitted);
    EXPECT_EQ(p.at_bound, 0) << p.value;
    EXPECT_NEAR(p.value, t, 0.1 * t);
    EXPECT_LE(p.low, p.value);
    EXPECT_GE(p.high, p.value);
    EXPECT_LT(p.low, p.high);
    const double slack = (p.high - p.low) / 2;
    EXPECT_LE(p.low - slack, t) << "[" << p.low << ", " << p.high << "]";
    EXPECT_GE(p.high + slack, t) << "[" << p.low << ", " << p.high << "]";
  }
  // No bound, no failure to converge; a trade-off between keys may be reported (the overhead
  // and memory_efficiency move together: both price the weights-bound iterations).
  for (const std::string& w : f.warnings()) EXPECT_NE(w.find("trade against each other"), std::string::npos) << w;
}

// The overhead and gemm_half_rows cannot both be pinned by any batches: where a product is
// compute-bound its ramp adds a fixed cost too (2 K N half_rows / achieved FLOP/s), and where it
// is memory-bound the weights' read does. So each is recovered with the other known.
TEST(CalibrateFit, RecoversTheOverheadAndEfficienciesFromNoisyMeasurements) {
  expect_recovered(synthetic_truth(),
                   {FitKey::kGemmEfficiency, FitKey::kMemoryEfficiency, FitKey::kAttentionEfficiency,
                    FitKey::kPrefillAttentionEfficiency, FitKey::kOverhead});
}

TEST(CalibrateFit, RecoversTheGemmRampAndEfficienciesFromNoisyMeasurements) {
  expect_recovered(synthetic_truth(),
                   {FitKey::kGemmEfficiency, FitKey::kMemoryEfficiency, FitKey::kAttentionEfficiency,
                    FitKey::kPrefillAttentionEfficiency, FitKey::kGemmHalfRows});
}

// The terms Vidur's A100 timings showed missing: a fixed attention cost per sequence, the causal
// triangle of a prompt chunk at its own efficiency (both searched or solved with the rest).
TEST(CalibrateFit, RecoversThePerSequenceAttentionCostAndTheSelfAttentionEfficiency) {
  HardwareSpec truth = synthetic_truth();
  truth.attention_sequence_overhead = 10e-6;  // 10 us per sequence per layer: 0.3 ms per sequence
  truth.prefill_self_attention_efficiency = 0.1;
  expect_recovered(truth, {FitKey::kGemmEfficiency, FitKey::kMemoryEfficiency, FitKey::kAttentionEfficiency,
                           FitKey::kPrefillAttentionEfficiency, FitKey::kPrefillSelfAttentionEfficiency,
                           FitKey::kOverhead, FitKey::kAttentionSequence});
}

// gemm_tile_rows is not searched but chosen: the fit of the others at each candidate, the best kept;
// the held-out half chooses its own. Reported without a range, never at a bound.
TEST(CalibrateFit, ChoosesTheGemmTileRowsThatMadeTheMeasurements) {
  HardwareSpec truth = synthetic_truth();
  truth.gemm_half_rows = 0;
  truth.gemm_tile_rows = 64;
  // Batches of prompt chunks of up to a few hundred tokens, where the rounding to 64 rows shows.
  const RooflineModel roofline(truth, llama(), bf16);
  std::vector<Measurement> data;
  for (int tokens = 8; tokens <= 520; tokens += 7) {
    Measurement m{{{tokens, 0, true}}, 0};
    m.measured = roofline.price(m.items.data(), m.items.size()).total();
    data.push_back(std::move(m));
  }
  CalibrationOptions options = bootstrap(5);
  options.keys = {FitKey::kGemmEfficiency, FitKey::kMemoryEfficiency, FitKey::kGemmTileRows, FitKey::kOverhead};
  HardwareSpec start = truth;
  start.gemm_tile_rows = 0;
  start.gemm_efficiency = 0.7;
  const CalibrationFit f = fit_hardware(start, llama(), bf16, data, options);
  const ParameterFit& tile = parameter(f, FitKey::kGemmTileRows);
  EXPECT_TRUE(tile.grid);
  EXPECT_TRUE(tile.fitted);
  EXPECT_EQ(tile.start, 0);
  EXPECT_EQ(tile.value, 64);
  EXPECT_EQ(tile.low, 64);
  EXPECT_EQ(tile.high, 64);
  EXPECT_EQ(tile.at_bound, 0);
  EXPECT_EQ(f.hardware.gemm_tile_rows, 64);
  EXPECT_NEAR(f.hardware.gemm_efficiency, truth.gemm_efficiency, 1e-3);
  EXPECT_LT(f.mape_after, 1e-4);
  EXPECT_LT(f.held_out_after, 1e-4);
  // The loss it started from is the start's own (tile 0), not the chosen tile's with the start's
  // other values.
  options.keys = {FitKey::kGemmEfficiency, FitKey::kMemoryEfficiency, FitKey::kOverhead};
  EXPECT_DOUBLE_EQ(f.convergence.loss_start, fit_hardware(start, llama(), bf16, data, options).convergence.loss_start);
  ASSERT_FALSE(f.held_out_by_kind.empty());
  EXPECT_EQ(f.held_out_by_kind[0].kind, "prefill");
}

TEST(CalibrateFit, AnEfficiencyThatWouldNeedToExceedOneIsFlaggedAtItsBound) {
  // The measuring machine computes four times faster than the file's peak at full efficiency.
  HardwareSpec truth = synthetic_truth();
  truth.fp16_flops *= 4;
  truth.gemm_efficiency = 1;
  const CalibrationFit f = fit(measure(truth, 120, 0.02, 3), bootstrap(0));
  const ParameterFit& gemm = parameter(f, FitKey::kGemmEfficiency);
  EXPECT_EQ(gemm.at_bound, 1);
  EXPECT_EQ(gemm.value, 1);  // on the bound, not a hair below it
  EXPECT_EQ(gemm.low, gemm.value);  // no bootstrap: no range
  bool warned = false;
  for (const std::string& w : f.warnings()) {
    if (w.rfind("gemm_efficiency = 1 sits at its upper bound (1)", 0) == 0) {
      warned = true;
      EXPECT_NE(w.find("too slow for these batches even at peak"), std::string::npos) << w;
    }
  }
  EXPECT_TRUE(warned);
}

TEST(CalibrateFit, TheHeldOutSplitAndTheRangesDependOnlyOnTheSeed) {
  const std::vector<Measurement> data = measure(synthetic_truth(), 80, 0.05, 5);
  CalibrationOptions options = bootstrap(10);
  options.seed = 7;
  options.threads = 1;
  const CalibrationFit a = fit(data, options);
  options.threads = 3;  // the resamples go to other threads: the same ranges
  const CalibrationFit b = fit(data, options);
  options.seed = 8;
  const CalibrationFit c = fit(data, options);

  EXPECT_EQ(a.held_out_count, 40u);
  EXPECT_EQ(a.held_out_before, b.held_out_before);
  EXPECT_EQ(a.held_out_after, b.held_out_after);
  EXPECT_NE(a.held_out_before, c.held_out_before);  // another half
  EXPECT_GT(a.held_out_before, 0.3);
  EXPECT_LT(a.held_out_after, 0.1);
  for (size_t k = 0; k < a.parameters.size(); ++k) {
    EXPECT_EQ(a.parameters[k].value, b.parameters[k].value);
    EXPECT_EQ(a.parameters[k].low, b.parameters[k].low);
    EXPECT_EQ(a.parameters[k].high, b.parameters[k].high);
  }
  // Other resamples: other ranges.
  EXPECT_NE(parameter(a, FitKey::kGemmEfficiency).low, parameter(c, FitKey::kGemmEfficiency).low);
  // Too few measurements to split: no held-out error.
  const std::vector<Measurement> three(data.begin(), data.begin() + 3);
  EXPECT_EQ(fit(three, options).held_out_count, 0u);
}

TEST(CalibrateFit, APriceWithoutTheOverheadLeavesItUnfitted) {
  // A profile that times the operators only (no fixed cost): the comparable price omits it.
  const MeasurementPrice operators_only = [](const RooflineModel& r, const Measurement& m) {
    const RooflineBreakdown b = r.price(m.items.data(), m.items.size());
    return b.total() - b.overhead;
  };
  const HardwareSpec truth = synthetic_truth();
  const RooflineModel roofline(truth, llama(), bf16);
  std::vector<Measurement> data = measure(truth, 90, 0, 9);
  for (Measurement& m : data) m.measured = operators_only(roofline, m);
  CalibrationOptions options = bootstrap(0);
  options.price = operators_only;
  const CalibrationFit f = fit(data, options);
  const ParameterFit& overhead = parameter(f, FitKey::kOverhead);
  EXPECT_FALSE(overhead.fitted);
  EXPECT_EQ(overhead.at_bound, 0);
  EXPECT_EQ(f.hardware.overhead, a100().overhead);
  EXPECT_NEAR(f.hardware.gemm_efficiency, truth.gemm_efficiency, 0.01);
  EXPECT_LT(f.mape_after, 0.01);
}

TEST(CalibrateFit, DecodesAloneLeaveThePrefillEfficiencyUnfitted) {
  std::vector<Measurement> data;
  for (const Measurement& m : measure(synthetic_truth(), 90, 0.01, 4)) {
    if (std::all_of(m.items.begin(), m.items.end(), [](const auto& it) { return it.new_tokens == 1; })) {
      data.push_back(m);
    }
  }
  ASSERT_EQ(data.size(), 30u);
  const CalibrationFit f = fit(data, bootstrap(0));
  EXPECT_FALSE(parameter(f, FitKey::kPrefillAttentionEfficiency).fitted);
  EXPECT_EQ(f.hardware.prefill_attention_efficiency, 0);  // still "as attention_efficiency"
  ASSERT_EQ(f.residuals.size(), 2u);  // decode, small and large
  EXPECT_EQ(f.residuals[0].kind, "decode");
}

TEST(CalibrateFit, ResidualsShowATermTheModelLacks) {
  // Attention over prompts runs at a quarter of the fraction of peak it reaches over decodes (as the
  // cpu engine's does against cpu-host.toml). A fit without prefill_attention_efficiency (as sim
  // calibrate was before it) cannot say so: the long prompts' residuals show it. With it, nothing
  // is left.
  HardwareSpec truth = synthetic_truth();
  truth.prefill_attention_efficiency = truth.attention_efficiency / 4;
  const std::vector<Measurement> data = measure(truth, 240, 0, 6);
  CalibrationOptions options = bootstrap(0);
  options.keys = {FitKey::kGemmEfficiency, FitKey::kMemoryEfficiency, FitKey::kAttentionEfficiency,
                  FitKey::kGemmHalfRows, FitKey::kOverhead};
  const CalibrationFit without = fit(data, options);
  const ResidualGroup* small = nullptr;
  const ResidualGroup* large = nullptr;
  for (const ResidualGroup& g : without.residuals) {
    if (g.kind == "prefill") (g.band == "small" ? small : large) = &g;
  }
  ASSERT_TRUE(small && large);
  EXPECT_LT(large->after, -0.03);  // the roofline is too fast for long prompts
  EXPECT_GT(small->after, large->after + 0.03);
  EXPECT_EQ(small->size.rfind("<= ", 0), 0u) << small->size;
  EXPECT_NE(small->size.find(" tokens"), std::string::npos) << small->size;
  EXPECT_EQ(small->count + large->count, 80u);

  const CalibrationFit with = fit(data, bootstrap(0));
  ASSERT_EQ(with.residuals.size(), 6u);
  for (const ResidualGroup& g : with.residuals) EXPECT_NEAR(g.after, 0, 2e-3) << g.kind << " " << g.band;
  EXPECT_EQ(with.residuals[2].kind, "decode");
  EXPECT_EQ(with.residuals[2].size.find(" seqs"), with.residuals[2].size.size() - 5);
}

// Measurements no key can explain: every iteration took 1,000 s (a stalled host), where the slowest
// the keys allow (efficiencies at 0.01, the overhead at the reader's most, a second) prices these
// batches at a few seconds. Before: the overhead was solved without its upper bound, so each
// bootstrap sample said about 1e9 us (a file `sim run` refused), and the loss printed was the one of
// that unbounded overhead (about 1e-5) while the file got 1 s and a MAPE of 99 % (issue 42).
TEST(CalibrateFit, MeasurementsNoKeyCanExplainGiveAFileThatLoadsAndTheLossOfThatFile) {
  std::vector<Measurement> data = measure(synthetic_truth(), 60, 0, 12);
  for (Measurement& m : data) m.measured = 1000;
  const CalibrationFit f = fit(data, bootstrap(20));
  EXPECT_EQ(f.undetermined(), "");  // 60 distinct batches: determined, just not by this model

  const std::string path = servesim::testing::temp_path("stalled.toml");
  std::ofstream(path) << hardware_toml(with_calibration_table(f.hardware, f), "# test\n");
  const Result<HardwareSpec> loaded = load_hardware(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  ASSERT_EQ(loaded.value().calibration_samples.size(), 20u);
  for (int64_t k = 0; k < 20; ++k) EXPECT_TRUE(with_calibration_sample(loaded.value(), k).ok()) << k;
  const ParameterFit& overhead = parameter(f, FitKey::kOverhead);
  EXPECT_EQ(overhead.value, 1e6);  // microseconds: the reader's upper bound
  EXPECT_EQ(overhead.at_bound, 1);
  EXPECT_LE(overhead.high, 1e6);

  // The loss printed is the mean squared relative error of the hardware written, whose mean
  // absolute relative error is the MAPE printed beside it.
  const RooflineModel written(f.hardware, llama(), bf16);
  double squared = 0, absolute = 0;
  for (const Measurement& m : data) {
    const double r = (written.price(m.items.data(), m.items.size()).total() - m.measured) / m.measured;
    squared += r * r;
    absolute += std::fabs(r);
  }
  const double n = static_cast<double>(data.size());
  EXPECT_NEAR(f.convergence.loss, squared / n, 1e-9 * squared / n);
  EXPECT_NEAR(f.mape_after, absolute / n, 1e-12);
  EXPECT_GT(f.mape_after, 0.5);
  EXPECT_GE(std::sqrt(f.convergence.loss), f.mape_after - 1e-12);  // RMS >= mean of |r|
}

// One batch measured over and over pins one sum of the keys, not each: every resample would fit it
// exactly, so the ranges would be 0 wide around arbitrary values.
TEST(CalibrateFit, IdenticalMeasurementsCannotDetermineTheKeys) {
  const std::vector<Measurement> one = measure(synthetic_truth(), 1, 0, 13);
  std::vector<Measurement> data(40, one[0]);
  const CalibrationFit f = fit(data, bootstrap(5));
  EXPECT_EQ(f.distinct_batches, 1u);
  EXPECT_NE(f.undetermined().find("the measurements are of 1 distinct batch, too few to determine the"),
            std::string::npos)
      << f.undetermined();
  // The order of a batch's items does not make it another batch.
  std::vector<Measurement> shuffled = data;
  std::reverse(shuffled[1].items.begin(), shuffled[1].items.end());
  EXPECT_EQ(fit(shuffled, bootstrap(0)).distinct_batches, 1u);
  // Fitting the overhead alone from it is determined.
  CalibrationOptions overhead_only = bootstrap(0);
  overhead_only.keys = {FitKey::kOverhead};
  EXPECT_EQ(fit(data, overhead_only).undetermined(), "");
}

TEST(CalibrateFit, TheFitsBoundsAreWithinTheReaders) {
  for (FitKey key : kFitKeys) {
    CalibrationOptions options = bootstrap(0);
    options.keys = {key};
    const CalibrationFit f = fit(measure(synthetic_truth(), 6, 0, 14), options);
    const ParameterFit& p = f.parameters.at(0);
    SCOPED_TRACE(fit_key_name(key));
    HardwareSpec hw;
    EXPECT_TRUE(set_hardware_number(hw, fit_key_name(key), p.lower).ok());
    EXPECT_TRUE(set_hardware_number(hw, fit_key_name(key), p.upper).ok());
  }
}

TEST(CalibrateFit, KeyNames) {
  for (FitKey key : kFitKeys) EXPECT_EQ(parse_fit_key(fit_key_name(key)).value(), key);
  Result<FitKey> bad = parse_fit_key("overhead");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("overhead_us"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace servesim

namespace servesim::testing {
namespace {

using CalibrateCli = Cli;

// Our CSV of measured iterations (data/measured/README.md): one prompt chunk each, of `tokens(i)`
// new tokens, taking `ms(i)`.
std::string measured_csv(int iterations, const std::function<int(int)>& tokens, const std::function<double(int)>& ms) {
  std::string csv = "iteration,new_tokens,context_tokens,measured_ms\n";
  for (int i = 0; i < iterations; ++i) {
    csv += std::to_string(i) + "," + std::to_string(tokens(i)) + ",0," + std::to_string(ms(i)) + "\n";
  }
  return csv;
}

// Issue 42: `sim calibrate` wrote a hardware file that `sim run` then refused (bootstrap samples
// outside the keys' bounds) on data whose time does not depend on the batch.
TEST_F(CalibrateCli, AFitToDataNoKeyExplainsWritesAFileThatRunsAndIdenticalDataIsRefused) {
  write("stalled.csv", measured_csv(24, [](int i) { return 16 * (i + 1); }, [](int) { return 1e6; }));
  const std::vector<std::string> calibrate = {"calibrate", "--measured", "stalled.csv", "--hardware", "a100-80gb",
                                              "--model", "llama-2-7b", "--bootstrap", "10", "--out", "stalled.toml"};
  Outcome o = sim(calibrate);
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("AT UPPER BOUND"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("Wrote stalled.toml"), std::string::npos) << o.output;
  o = sim({"--trace", kData + "/workloads/seed-toy.toml", "--hardware", "stalled.toml", "--model", "llama-2-7b",
           "--backend", "roofline", "--model-uncertainty", "--log", "summary"});
  EXPECT_EQ(o.status, 0) << o.output;

  write("same.csv", measured_csv(24, [](int) { return 512; }, [](int) { return 41.2; }));
  std::vector<std::string> same = calibrate;
  same[2] = "same.csv";
  same.back() = "same.toml";
  o = sim(same);
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("sim calibrate: same.csv: the measurements are of 1 distinct batch, too few to determine"),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("--fit"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "same.toml"));
  // With one key to fit, one batch determines it.
  same.insert(same.end(), {"--fit", "overhead_us"});
  o = sim(same);
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST_F(CalibrateCli, ReportsConvergenceRangesHeldOutErrorAndResiduals) {
  const std::string w = write("w.toml",
                              "[generate]\nrequests = 16\nseed = 3\n[generate.arrival]\nprocess = "
                              "\"poisson\"\nrate = 400.0\n[generate.prompt_tokens]\ndist = \"uniform\"\n"
                              "min = 8\nmax = 96\n[generate.output_tokens]\ndist = \"uniform\"\nmin = 2\n"
                              "max = 12\n");
  ASSERT_EQ(sim({"--backend", "cpu", "--policy", "chunked-prefill", "--trace", w, "--max-num-seqs",
                 "6", "--max-num-batched-tokens", "64"}).status, 0);
  const Outcome cal = sim({"calibrate", "--out", "fitted.toml", "--bootstrap", "20", "--seed", "3"});
  ASSERT_EQ(cal.status, 0) << cal.output;
  for (const char* line : {"Convergence: ", "evaluations, loss", "95 % range (bootstrap)",
                           "attention_efficiency", "overhead_us", "Held-out: fitted on a random half (seed 3)",
                           "Residuals: mean (predicted - measured) / measured", "decode ", "Wrote fitted.toml"}) {
    EXPECT_NE(cal.output.find(line), std::string::npos) << line << " in:\n" << cal.output;
  }
  EXPECT_TRUE(load_hardware((dir_ / "fitted.toml").string()).ok());
  EXPECT_NE(query("SELECT value FROM metrics WHERE name = 'calibrate_mape_after'"), "");
  EXPECT_NE(query("SELECT value FROM metrics WHERE name = 'calibrate_held_out_mape_after'"), "");

  const Outcome subset = sim({"calibrate", "--out", "g.toml", "--bootstrap", "0", "--fit",
                              "attention_efficiency,overhead_us"});
  ASSERT_EQ(subset.status, 0) << subset.output;
  EXPECT_EQ(subset.output.find("gemm_efficiency "), std::string::npos) << subset.output;
  EXPECT_NE(subset.output.find("range (no bootstrap)"), std::string::npos) << subset.output;

  const Outcome bad = sim({"calibrate", "--out", "h.toml", "--fit", "gemm_efficiency,speed"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("unknown key 'speed'"), std::string::npos) << bad.output;
  EXPECT_EQ(sim({"calibrate", "--out", "h.toml", "--bootstrap", "-1"}).status, 2);
  EXPECT_EQ(sim({"calibrate", "--out", "h.toml", "--fit", "overhead_us,overhead_us"}).status, 2);
  EXPECT_FALSE(fs::exists(dir_ / "h.toml"));
}

}  // namespace
}  // namespace servesim
