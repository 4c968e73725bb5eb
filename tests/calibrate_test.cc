// sim calibrate: fitting a hardware file to a run measured on a known, different machine.
#include "analysis/calibrate.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "analysis/batch_log.h"
#include "analysis/database.h"
#include "analysis/validate.h"

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

TEST_F(CalibrateTest, RecoversTheMachineThatMeasuredTheRun) {
  const int64_t run = make_run(240);
  const std::string out_path = (dir_ / "fitted.toml").string();
  std::ostringstream out;
  Status s = calibrate_run(db_path_, run, out_path, out);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_NE(out.str().find("MAPE"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("overhead_us"), std::string::npos) << out.str();

  Result<HardwareSpec> fitted = load_hardware(out_path);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const HardwareSpec truth = true_hardware();
  EXPECT_NEAR(fitted.value().gemm_efficiency, truth.gemm_efficiency, 0.03);
  EXPECT_NEAR(fitted.value().memory_efficiency, truth.memory_efficiency, 0.04);
  EXPECT_NEAR(fitted.value().attention_efficiency, truth.attention_efficiency, 0.02);
  EXPECT_NEAR(fitted.value().overhead, truth.overhead, 20e-6);
  // Every other key is copied.
  const HardwareSpec shipped = load_hardware(kHardware).value();
  EXPECT_EQ(fitted.value().name, shipped.name);
  EXPECT_DOUBLE_EQ(fitted.value().memory_bytes, shipped.memory_bytes);
  EXPECT_DOUBLE_EQ(fitted.value().memory_bandwidth, shipped.memory_bandwidth);
  EXPECT_DOUBLE_EQ(fitted.value().fp16_flops, shipped.fp16_flops);
  EXPECT_DOUBLE_EQ(fitted.value().fp32_flops, shipped.fp32_flops);
  EXPECT_EQ(fitted.value().bf16, shipped.bf16);
  EXPECT_DOUBLE_EQ(fitted.value().gemm_half_rows, shipped.gemm_half_rows);

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
  ASSERT_TRUE(calibrate_run(db_path_, run, a, out).ok());
  ASSERT_TRUE(calibrate_run(db_path_, std::nullopt, b, out).ok());  // the latest run: the same
  std::ifstream fa(a), fb(b);
  std::stringstream sa, sb;
  sa << fa.rdbuf();
  sb << fb.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
}

TEST_F(CalibrateTest, Errors) {
  const std::string out_path = (dir_ / "fitted.toml").string();
  std::ostringstream out;
  Status s = calibrate_run(db_path_, std::nullopt, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no database"), std::string::npos) << s.error().message;

  const int64_t run = make_run(10);
  s = calibrate_run(db_path_, run + 5, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no run " + std::to_string(run + 5)), std::string::npos)
      << s.error().message;

  const int64_t bare = make_run(10, /*log_items=*/false);
  s = calibrate_run(db_path_, bare, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("logged no batches"), std::string::npos) << s.error().message;

  const int64_t empty = make_run(0);
  s = calibrate_run(db_path_, empty, out_path, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no measured iterations"), std::string::npos)
      << s.error().message;

  s = calibrate_run(db_path_, run, (dir_ / "no" / "such" / "dir.toml").string(), out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cannot write"), std::string::npos) << s.error().message;
  EXPECT_FALSE(fs::exists(out_path));
}

}  // namespace
}  // namespace servesim
