// sim validate (stored predictions, and re-pricing with another hardware file) and the BatchLog
// recorder whose rows the re-pricing reads.
#include "analysis/calibration/validate.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/calibration/logged_batches.h"
#include "analysis/storage/batch_log.h"
#include "analysis/storage/database.h"
#include "analysis/storage/db_recorder.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;
const std::string kHardware = SERVESIM_PROJECT_DIR "/data/hardware/cpu-host.toml";
const std::string kModel = SERVESIM_PROJECT_DIR "/data/models/tiny.json";

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("servesim_validate_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = (dir_ / "sim.db").string();
    db_ = std::move(Database::open(db_path_)).value();
    RunInfo info{.name = "t", .backend = "cpu", .hardware = kHardware, .model = kModel};
    run_ = db_->begin_run(info).value();
  }
  void TearDown() override {
    db_.reset();
    fs::remove_all(dir_);
  }

  // Two iterations through a DbRecorder and a BatchLog sharing the connection: a prefill of two
  // prompts (the second a chunk that does not finish its prompt), then a decode of both with a
  // padding row. Measured = 2 x the shipped file's prediction, so its MAPE is 50 %.
  void record_run(bool with_batch_log) {
    const ModelSpec model = load_model(kModel).value();
    const RooflineModel shipped(load_hardware(kHardware).value(), model,
                                replay_options("cpu", model));
    seqs_[0].prompt_tokens = 12;
    seqs_[1].prompt_tokens = 40;
    seqs_[0].num_output = seqs_[1].num_output = 0;
    MetricsAccumulator metrics{MetricsOptions{}};
    DbRecorder writer(*db_, run_, metrics);
    std::optional<BatchLog> log;
    if (with_batch_log) log.emplace(*db_, run_);
    auto iterate = [&](int64_t step, std::vector<BatchItem> items, int64_t prefill,
                       int64_t decode) {
      Batch batch;
      batch.items = items;
      const double predicted = shipped.price(batch).total();
      for (BatchItem& b : items) {
        b.emitted = !b.padding && b.context_tokens + b.new_tokens >= b.seq->num_tokens();
      }
      IterationRecord it{.step = step, .start = 0, .duration = from_seconds(2 * predicted),
                         .num_seqs = static_cast<int32_t>(items.size()),
                         .prefill_tokens = prefill, .decode_tokens = decode,
                         .predicted = from_seconds(predicted)};
      writer.on_iteration(it, items);
      if (log) log->on_iteration(it, items);
    };
    iterate(0, {{&seqs_[0], 12, 0}, {&seqs_[1], 16, 0}}, 28, 0);
    seqs_[0].num_output = 1;
    iterate(1, {{&seqs_[0], 1, 12}, {&seqs_[1], 24, 16}, {&seqs_[0], 1, 0, true}}, 24, 2);
    if (log) log->on_run_end(RunOutcome::kDone, "");
    writer.on_run_end(RunOutcome::kDone, "");
    if (log) {
      EXPECT_EQ(log->write_error(), "");
    }
    EXPECT_EQ(writer.write_error(), "");
  }

  std::string validate(std::optional<std::string> hardware, Status* status = nullptr) {
    std::ostringstream out;
    Status s = validate_run(db_path_, run_, out, hardware);
    if (status) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.error().message;
    }
    return out.str();
  }

  double metric(const std::string& name) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db_->handle(), "SELECT value FROM metrics WHERE run_id = ?1 AND name = ?2",
                       -1, &st, nullptr);
    sqlite3_bind_int64(st, 1, run_);
    sqlite3_bind_text(st, 2, name.c_str(), -1, SQLITE_TRANSIENT);
    const double v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_double(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
  }

  fs::path dir_;
  std::string db_path_;
  std::unique_ptr<Database> db_;
  int64_t run_ = 0;
  Sequence seqs_[2];
};

TEST_F(ValidateTest, BatchLogWritesOneRowPerItem) {
  record_run(true);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db_->handle(),
                     "SELECT run_id, replica, step, item, new_tokens, context_tokens, emits FROM "
                     "batch_items ORDER BY step, item",
                     -1, &st, nullptr);
  std::vector<std::vector<int64_t>> rows;
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<int64_t> r;
    for (int c = 0; c < 7; ++c) r.push_back(sqlite3_column_int64(st, c));
    rows.push_back(r);
  }
  sqlite3_finalize(st);
  const std::vector<std::vector<int64_t>> expected = {
      {run_, 0, 0, 0, 12, 0, 1},   // the whole prompt: samples its first token
      {run_, 0, 0, 1, 16, 0, 0},   // a chunk: no token yet
      {run_, 0, 1, 0, 1, 12, 1},   // a decode
      {run_, 0, 1, 1, 24, 16, 1},  // the rest of the prompt
      {run_, 0, 1, 2, 1, 0, 1},    // padding computes a token too
  };
  EXPECT_EQ(rows, expected);
}

TEST_F(ValidateTest, BatchLogCommitsInItsDestructor) {
  {
    BatchLog log(*db_, run_);
    BatchItem b{&seqs_[0], 5, 0};
    log.on_iteration(IterationRecord{.step = 3}, std::span<const BatchItem>(&b, 1));
  }
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db_->handle(), "SELECT count(*) FROM batch_items WHERE step = 3", -1, &st,
                     nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 1);
  sqlite3_finalize(st);
}

TEST_F(ValidateTest, StoredPredictions) {
  record_run(true);
  const std::string out = validate(std::nullopt);
  EXPECT_NE(out.find("all                       2    50.0%"), std::string::npos) << out;
  EXPECT_NEAR(metric("validate_mape"), 0.5, 1e-6);
}

TEST_F(ValidateTest, HardwareOverrideRepricesTheBatches) {
  record_run(true);
  // The same file: the stored predictions again.
  std::string out = validate(kHardware);
  EXPECT_NE(out.find("re-priced with " + kHardware), std::string::npos) << out;
  EXPECT_NE(out.find("all                       2    50.0%"), std::string::npos) << out;
  // A machine half as fast everywhere, with the same overhead doubled: exactly the measurements.
  HardwareSpec slow = load_hardware(kHardware).value();
  slow.memory_bandwidth /= 2;
  slow.fp16_flops /= 2;
  slow.fp32_flops /= 2;
  slow.overhead *= 2;
  const std::string path = (dir_ / "slow.toml").string();
  std::ofstream(path) << "name = \"slow\"\nmemory_gib = 16\nmemory_bandwidth_gbs = 10\n"
                         "fp16_tflops = 0.025\nfp32_tflops = 0.025\ninterconnect_gbs = 10\n"
                         "gemm_efficiency = 0.5\nmemory_efficiency = 0.6\n"
                         "attention_efficiency = 0.5\noverhead_us = 100\ngemm_half_rows = 0\n";
  out = validate(path);
  EXPECT_NE(out.find("all                       2     0.0%"), std::string::npos) << out;
  // Re-pricing stores nothing: the run's own validate_mape stays.
  (void)validate(std::nullopt);
  EXPECT_NEAR(metric("validate_mape"), 0.5, 1e-6);
}

// Regression: a wildly wrong prediction broke the table apart (a 300-digit percentage overran the
// line buffer). Re-priced on a machine a million times slower, every column keeps its place.
TEST_F(ValidateTest, HugeErrorsKeepTheTableInColumns) {
  record_run(true);
  const std::string path = (dir_ / "glacial.toml").string();
  std::ofstream(path) << "name = \"glacial\"\nmemory_gib = 16\nmemory_bandwidth_gbs = 0.001\n"
                         "fp16_tflops = 0.000001\nfp32_tflops = 0.000001\ninterconnect_gbs = 10\n"
                         "overhead_us = 1000000\n";
  const std::string out = validate(path);
  std::istringstream lines(out);
  std::string line, header;
  std::getline(lines, line);  // the title
  std::getline(lines, header);
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(line.size(), header.size()) << "\n" << header << "\n" << line;
    EXPECT_NE(line.find("e+"), std::string::npos) << line;  // the huge figures, as exponents
  }
  EXPECT_GE(rows, 2);
}

TEST_F(ValidateTest, Errors) {
  record_run(false);
  Status s = Ok{};
  validate(kHardware, &s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("run " + std::to_string(run_) + " logged no batches"),
            std::string::npos)
      << s.error().message;
  // Without the override the stored predictions still serve.
  validate(std::nullopt);

  // A run with batches: a missing hardware file is an error naming it.
  run_ = db_->begin_run(RunInfo{.backend = "cpu", .hardware = kHardware, .model = kModel}).value();
  record_run(true);
  validate((dir_ / "missing.toml").string(), &s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("missing.toml"), std::string::npos) << s.error().message;

  std::ostringstream out;
  s = validate_run(db_path_, run_ + 1, out, kHardware);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no run " + std::to_string(run_ + 1)), std::string::npos);
}

}  // namespace
}  // namespace servesim
