#include "analysis/calibration/logged_batches.h"

#include "backends/hardware.h"
#include "backends/model.h"

namespace servesim {

Result<RunSources> read_run_sources(sqlite3* db, const std::string& db_path,
                                    std::optional<int64_t> run_id) {
  sqlite3_stmt* st = nullptr;
  const char* sql = run_id
                        ? "SELECT id, backend, hardware, model FROM runs WHERE id = ?1"
                        : "SELECT id, backend, hardware, model FROM runs ORDER BY id DESC LIMIT 1";
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
    return Error{db_path + ": " + sqlite3_errmsg(db)};
  }
  if (run_id) sqlite3_bind_int64(st, 1, *run_id);
  if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_finalize(st);
    return Error{run_id ? "no run " + std::to_string(*run_id) + " in " + db_path
                        : "no runs in " + db_path + "; run `sim --backend cpu ...` first"};
  }
  auto text = [&](int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  RunSources out{sqlite3_column_int64(st, 0), text(1), text(2), text(3)};
  sqlite3_finalize(st);
  return out;
}

Result<std::vector<LoggedIteration>> read_logged_iterations(sqlite3* db, int64_t run,
                                                            bool with_items) {
  std::vector<LoggedIteration> its;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT replica, step, duration, predicted, num_seqs, prefill_tokens, "
                     "decode_tokens FROM iterations WHERE run_id = ?1 AND duration > 0 "
                     "ORDER BY replica, step",
                     -1, &st, nullptr);
  sqlite3_bind_int64(st, 1, run);
  while (sqlite3_step(st) == SQLITE_ROW) {
    LoggedIteration it;
    it.replica = sqlite3_column_int(st, 0);
    it.step = sqlite3_column_int64(st, 1);
    it.measured = sqlite3_column_double(st, 2);
    if (sqlite3_column_type(st, 3) != SQLITE_NULL) it.predicted = sqlite3_column_double(st, 3);
    it.num_seqs = sqlite3_column_int64(st, 4);
    it.prefill_tokens = sqlite3_column_int64(st, 5);
    it.decode_tokens = sqlite3_column_int64(st, 6);
    its.push_back(std::move(it));
  }
  sqlite3_finalize(st);
  if (!with_items) return its;

  // Both tables in (replica, step) order: one merge pass attaches the items.
  size_t rows = 0;
  st = nullptr;
  if (sqlite3_prepare_v2(db,
                         "SELECT replica, step, new_tokens, context_tokens, emits FROM batch_items "
                         "WHERE run_id = ?1 ORDER BY replica, step, item",
                         -1, &st, nullptr) == SQLITE_OK) {  // no table: no rows
    sqlite3_bind_int64(st, 1, run);
    size_t k = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
      ++rows;
      const int32_t replica = sqlite3_column_int(st, 0);
      const int64_t step = sqlite3_column_int64(st, 1);
      auto before = [&](const LoggedIteration& it) {
        return it.replica < replica || (it.replica == replica && it.step < step);
      };
      while (k < its.size() && before(its[k])) ++k;
      if (k < its.size() && its[k].replica == replica && its[k].step == step) {
        its[k].items.push_back({sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                                sqlite3_column_int(st, 4) != 0});
      }
    }
  }
  sqlite3_finalize(st);
  if (rows == 0) {
    return Error{"run " + std::to_string(run) +
                 " logged no batches; re-run it with this version (--backend cpu or cuda)"};
  }
  return its;
}

RooflineOptions replay_options(const std::string& backend, const ModelSpec& model) {
  RooflineOptions o;
  const DType d = backend == "cpu" ? DType::kFp32 : model.dtype;
  o.weights = o.kv = o.activations = d;
  return o;
}

Result<RooflineModel> replay_roofline(const RunSources& run, const std::string& hardware_path) {
  Result<HardwareSpec> hw = load_hardware(hardware_path);
  if (!hw.ok()) return hw.error();
  if (run.model.empty()) return Error{"run " + std::to_string(run.id) + " names no model file"};
  Result<ModelSpec> model = load_model(run.model);
  if (!model.ok()) {
    return Error{"the model of run " + std::to_string(run.id) + ": " + model.error().message};
  }
  const RooflineOptions options = replay_options(run.backend, model.value());
  return RooflineModel(std::move(hw).value(), std::move(model).value(), options);
}

}  // namespace servesim
