// `sim calibrate` on a logged run (calibrate.h): reads the measurements, fits, writes the hardware
// file and prints the report of the fit. The fit itself is in calibrate.cc.
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "analysis/calibration/logged_batches.h"
#include "analysis/storage/batch_log.h"
#include "analysis/calibration/calibrate.h"
#include "analysis/calibration/measured.h"
#include "analysis/storage/database.h"
#include "sim/io/output_file.h"

namespace servesim {
namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;  // control characters: dropped
    q += c;
  }
  return q + "\"";
}

// s with line breaks replaced, for a comment line.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[200];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

// The measured iterations of the run with their logged batches.
Result<std::vector<Measurement>> read_measurements(sqlite3* db, const std::string& db_path,
                                                   const RunSources& run) {
  const std::string name = "run " + std::to_string(run.id);
  Result<std::vector<LoggedIteration>> logged = read_logged_iterations(db, run.id, false);
  if (!logged.ok()) return logged.error();
  if (logged.value().empty()) {
    return Error{name + " of " + db_path + " has no measured iterations: calibrate a run of a "
                 "measuring backend (--backend cpu or cuda)"};
  }
  logged = read_logged_iterations(db, run.id, true);
  if (!logged.ok()) return logged.error();
  std::vector<Measurement> data;
  for (LoggedIteration& it : logged.value()) {
    if (!it.items.empty()) data.push_back({std::move(it.items), it.measured});
  }
  if (data.empty()) return Error{name + " logged no batches of its measured iterations"};
  return data;
}

// The lines that say how far to trust the fit, for the terminal and the file's header.
std::vector<std::string> summary(const CalibrationFit& fit, const CalibrationOptions& cal) {
  const Convergence& v = fit.convergence;
  std::vector<std::string> lines;
  lines.push_back("Convergence: " + v.result + " (" + v.meaning + "), " +
                  std::to_string(v.evaluations) + " evaluations, loss (mean squared relative " +
                  "error) " + format("%.4g -> %.4g", v.loss_start, v.loss));
  lines.push_back(format("MAPE: %.1f %% before, %.1f %% after", 100 * fit.mape_before,
                         100 * fit.mape_after));
  if (fit.held_out_count > 0) {
    lines.push_back("Held-out: fitted on a random half (seed " + std::to_string(cal.seed) +
                    "), MAPE on the other " + std::to_string(fit.held_out_count) + " iterations: " +
                    format("%.1f %% before, %.1f %% after", 100 * fit.held_out_before,
                           100 * fit.held_out_after));
    if (!fit.held_out_by_kind.empty()) {
      std::string by_kind = "Held-out by kind:";
      for (const CalibrationFit::KindError& k : fit.held_out_by_kind) {
        by_kind += " " + k.kind + " (" + std::to_string(k.count) + ") " +
                   format("%.1f %% -> %.1f %%;", 100 * k.before, 100 * k.after);
      }
      by_kind.pop_back();
      lines.push_back(by_kind);
    }
  }
  return lines;
}

// How the keys were fitted, in one line.
std::string method(const CalibrationFit& fit) {
  std::string searched, solved, grid;
  for (const ParameterFit& p : fit.parameters) {
    std::string& list = p.grid ? grid : p.additive ? solved : searched;
    list += std::string(list.empty() ? "" : ", ") + fit_key_name(p.key);
  }
  std::string line = "Fit: mean squared relative error";
  if (!searched.empty()) line += "; NLopt BOBYQA over " + searched + " (log scale)";
  if (!solved.empty()) line += "; " + solved + " solved exactly (within their bounds) at every step";
  if (!grid.empty()) {
    line += "; " + grid + " the best of";
    for (double v : kGemmTileRowsCandidates) line += format(" %g", v);
    line += " (a fit of the rest at each)";
  }
  return line;
}

void print_parameters(const CalibrationFit& fit, std::ostream& out) {
  char line[200];
  std::snprintf(line, sizeof line, "%-34s %10s %10s   %-24s %s\n", "key", "start", "fitted",
                fit.bootstrap > 0 ? "95 % range (bootstrap)" : "range (no bootstrap)", "bounds");
  out << line;
  for (const ParameterFit& p : fit.parameters) {
    const std::string range = !p.fitted ? "not fitted" : p.grid ? "chosen from a grid" : format("%.4g .. %.4g", p.low, p.high);
    std::snprintf(line, sizeof line, "%-34s %10.4g %10.4g   %-24s [%g, %g]%s\n",
                  fit_key_name(p.key), p.start, p.value, range.c_str(), p.lower, p.upper,
                  p.at_bound < 0 ? "  AT LOWER BOUND" : p.at_bound > 0 ? "  AT UPPER BOUND" : "");
    out << line;
  }
  if (fit.bootstrap > 0) {
    out << "(ranges: 2.5-97.5 % of " << fit.bootstrap
        << " fits of the iterations resampled with replacement)\n";
  }
}

void print_residuals(const CalibrationFit& fit, std::ostream& out) {
  out << "Residuals: mean (predicted - measured) / measured; + = the roofline is too slow\n";
  char line[200];
  std::snprintf(line, sizeof line, "%-12s %-18s %7s %10s %10s\n", "kind", "size", "count", "before",
                "after");
  out << line;
  for (const ResidualGroup& g : fit.residuals) {
    std::snprintf(line, sizeof line, "%-12s %-18s %7zu %+9.1f%% %+9.1f%%\n", g.kind.c_str(),
                  g.size.c_str(), g.count, 100 * g.before, 100 * g.after);
    out << line;
  }
}

// The fit's summary as metrics rows of the run (calibrate_mape_before / _after,
// calibrate_held_out_mape_before / _after, calibrate_converged, calibrate_at_bound: the number of
// keys at a bound), for `sim report --format json`.
Status store_metrics(const std::string& db_path, int64_t run, const CalibrationFit& fit) {
  Result<std::unique_ptr<Database>> rw = Database::open(db_path);
  if (!rw.ok()) return rw.error();
  sqlite3* w = rw.value()->handle();
  sqlite3_stmt* ins = nullptr;
  if (sqlite3_prepare_v2(w, "INSERT OR REPLACE INTO metrics (run_id, name, value) VALUES (?1, ?2, ?3)",
                         -1, &ins, nullptr) != SQLITE_OK) {
    return Error{db_path + ": " + sqlite3_errmsg(w)};
  }
  double at_bound = 0;
  for (const ParameterFit& p : fit.parameters) at_bound += p.at_bound != 0 ? 1 : 0;
  const std::pair<const char*, double> rows[] = {
      {"calibrate_mape_before", fit.mape_before},
      {"calibrate_mape_after", fit.mape_after},
      {"calibrate_held_out_mape_before", fit.held_out_before},
      {"calibrate_held_out_mape_after", fit.held_out_after},
      {"calibrate_converged", fit.convergence.converged ? 1 : 0},
      {"calibrate_at_bound", at_bound},
  };
  for (const auto& [name, value] : rows) {
    if (fit.held_out_count == 0 && std::string(name).find("held_out") != std::string::npos) continue;
    sqlite3_bind_int64(ins, 1, run);
    sqlite3_bind_text(ins, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_double(ins, 3, value);
    const int rc = sqlite3_step(ins);
    sqlite3_reset(ins);
    if (rc != SQLITE_DONE) {
      sqlite3_finalize(ins);
      return Error{db_path + ": " + sqlite3_errmsg(w)};
    }
  }
  sqlite3_finalize(ins);
  return Ok{};
}

// Writes the fitted hardware file to out_path (its header comment: where the data came from, the
// keys fitted, the summary and the warnings) and prints the report of the fit.
Status write_and_print(const CalibrationFit& fit, const CalibrationOptions& calibration,
                       const std::string& from, size_t count, const std::string& what,
                       const std::string& hardware_path, OutputFile& out_file, std::ostream& out,
                       const std::vector<std::string>& by_source = {}) {
  if (const std::string why = fit.undetermined(); !why.empty()) {
    return Error{from + ": " + why + "; nothing written to " + out_file.path()};
  }
  std::vector<std::string> lines = summary(fit, calibration);
  if (!by_source.empty()) {
    lines.push_back("MAPE by source:");
    lines.insert(lines.end(), by_source.begin(), by_source.end());
  }
  const std::vector<std::string> warnings = fit.warnings();
  std::string header = "# Calibrated by `sim calibrate` from " + one_line(from) + " (" + std::to_string(count) +
                       " " + what + ");\n# the keys fitted:";
  for (const ParameterFit& p : fit.parameters) {
    if (p.fitted) header += std::string(" ") + fit_key_name(p.key);
  }
  header += "; the rest copied from " + one_line(hardware_path) + ".\n";
  for (const std::string& l : lines) header += "# " + l + "\n";
  for (const std::string& w : warnings) header += "# WARNING: " + w + "\n";
  if (Status s = out_file.write(hardware_toml(with_calibration_table(fit.hardware, fit), header)); !s.ok()) return s;
  out << "Calibration of " << hardware_path << " from " << from << " (" << count << " " << what << ")\n"
      << method(fit) << "\n";
  out << lines[0] << "\n";
  print_parameters(fit, out);
  for (size_t i = 1; i < lines.size(); ++i) out << lines[i] << "\n";
  print_residuals(fit, out);
  for (const std::string& w : warnings) out << "WARNING: " << w << "\n";
  out << "Wrote " << out_file.path() << "\n";
  return Ok{};
}

}  // namespace

std::string hardware_toml(const HardwareSpec& hw, const std::string& header) {
  std::ostringstream s;
  s << header;
  s << "name = " << quoted(hw.name) << "\n";
  // Every key the file sets, fitted or not (the collectives', the network's, the prices).
  for (const auto& [key, value] : hardware_numbers(hw)) s << key << " = " << number(value) << "\n";
  for (const auto& [key, value] : hardware_booleans(hw)) s << key << " = " << (value ? "true" : "false") << "\n";
  if (!hw.calibration_samples.empty()) {
    s << "\n# The fitted keys' values in each bootstrap resample of the measurements: `sim --model-uncertainty`\n"
      << "# reruns a workload with each row for a band on every metric.\n[calibration]\nkeys = [";
    for (size_t k = 0; k < hw.calibration_keys.size(); ++k) s << (k ? ", " : "") << quoted(hw.calibration_keys[k]);
    s << "]\nsamples = [\n";
    for (const std::vector<double>& row : hw.calibration_samples) {
      s << "  [";
      for (size_t k = 0; k < row.size(); ++k) s << (k ? ", " : "") << number(row[k]);
      s << "],\n";
    }
    s << "]\n";
  }
  return s.str();
}

HardwareSpec with_calibration_table(HardwareSpec hw, const CalibrationFit& fit) {
  hw.calibration_keys.clear();
  hw.calibration_samples.clear();
  if (fit.samples.empty()) return hw;
  std::vector<size_t> columns;
  for (size_t k = 0; k < fit.parameters.size(); ++k) {
    const ParameterFit& p = fit.parameters[k];
    if (!p.fitted || p.grid) continue;
    columns.push_back(k);
    hw.calibration_keys.push_back(fit_key_name(p.key));
  }
  if (columns.empty()) return hw;
  for (const std::vector<double>& run : fit.samples) {
    std::vector<double> row;
    for (size_t k : columns) row.push_back(run[k] * fit_key_file_unit(fit.parameters[k].key));
    hw.calibration_samples.push_back(std::move(row));
  }
  return hw;
}

Status calibrate_run(const std::string& db_path, std::optional<int64_t> run_id, OutputFile& out_file,
                     std::ostream& out, const CalibrationOptions& calibration) {
  if (Status s = out_file.check(); !s.ok()) return s;  // before the fit: a typo costs no time
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  sqlite3* db = opened.value()->handle();
  Result<RunSources> source = read_run_sources(db, db_path, run_id);
  if (!source.ok()) return source.error();
  const RunSources& run = source.value();
  const std::string name = "run " + std::to_string(run.id);
  Result<std::vector<Measurement>> data = read_measurements(db, db_path, run);
  if (!data.ok()) return data.error();
  if (run.hardware.empty()) return Error{name + " names no hardware file; nothing to calibrate"};
  Result<RooflineModel> roofline = replay_roofline(run, run.hardware);
  if (!roofline.ok()) return roofline.error();
  opened.value().reset();  // store_metrics opens it read-write

  const RooflineModel& r = roofline.value();
  const CalibrationFit fit = fit_hardware(r.hardware(), r.model(), r.options(), data.value(),
                                          calibration);
  const std::vector<std::string> lines = summary(fit, calibration);
  const std::vector<std::string> warnings = fit.warnings();

  Status written = write_and_print(fit, calibration, name + " of " + db_path, data.value().size(),
                                   "measured iterations", run.hardware, out_file, out);
  if (!written.ok()) return written;
  // The file is the product; a database that cannot take the summary (read-only) does not undo it.
  if (Status s = store_metrics(db_path, run.id, fit); !s.ok()) {
    out << "(the calibrate_* metrics were not stored: " << s.error().message << ")\n";
  }
  return Ok{};
}

Status calibrate_measured(const std::vector<MeasuredProfile>& sources, const std::string& hardware_path,
                          OutputFile& out_file, std::ostream& out, const CalibrationOptions& calibration) {
  if (Status s = out_file.check(); !s.ok()) return s;
  Result<HardwareSpec> hw = load_hardware(hardware_path);
  if (!hw.ok()) return hw.error();
  std::vector<FitModel> models;
  std::vector<Measurement> data;
  std::string from;
  for (const MeasuredProfile& source : sources) {
    Result<ModelSpec> model = load_model(source.model_path);
    if (!model.ok()) return model.error();
    if (Status s = check_tensor_parallel(model.value(), source.tp); !s.ok()) return s.error();
    Result<std::vector<MeasuredBatch>> read = read_measured_path(source.path, model.value(), source.tp, nullptr);
    if (!read.ok()) return read.error();
    if (read.value().empty()) return Error{source.path + " has no measured batch this model can be priced on"};
    // As sim validate --measured prices them: the model's own precision throughout.
    RooflineOptions options;
    options.tp = source.tp;
    options.weights = options.kv = options.activations = model.value().dtype;
    for (MeasuredBatch& b : read.value()) {
      data.push_back(std::move(b.measurement));
      data.back().model = static_cast<int32_t>(models.size());
    }
    models.push_back({model.value(), options});
    from += (from.empty() ? "" : ", ") + source.path + (source.tp > 1 ? " (tp " + std::to_string(source.tp) + ")" : "");
  }
  CalibrationOptions fit_options = calibration;
  fit_options.price = [](const RooflineModel& r, const Measurement& m) { return comparable_price(r, m.items, m.covers); };
  const CalibrationFit fit = fit_hardware(hw.value(), models, data, fit_options);
  // Each source's error, before and after (and on its share of the held-out half).
  std::vector<std::string> by_source;
  if (sources.size() > 1) {
    for (size_t k = 0; k < sources.size(); ++k) {
      const RooflineModel before(hw.value(), models[k].model, models[k].options);
      const RooflineModel after(fit.hardware, models[k].model, models[k].options);
      double b = 0, a = 0;
      size_t count = 0;
      for (const Measurement& m : data) {
        if (static_cast<size_t>(m.model) != k) continue;
        b += std::fabs(fit_options.price(before, m) - m.measured) / m.measured;
        a += std::fabs(fit_options.price(after, m) - m.measured) / m.measured;
        ++count;
      }
      std::string line = format("%.1f %% before, %.1f %% after", 100 * b / static_cast<double>(count),
                                100 * a / static_cast<double>(count));
      for (const CalibrationFit::KindError& h : fit.held_out_by_model) {
        if (h.kind == std::to_string(k) && h.count > 0) {
          line += format("; held out (%.0f): %.1f %% -> %.1f %%", static_cast<double>(h.count), 100 * h.before, 100 * h.after);
        }
      }
      by_source.push_back("  " + sources[k].path + (sources[k].tp > 1 ? " (tp " + std::to_string(sources[k].tp) + ")" : "") +
                          " (" + std::to_string(count) + "): " + line);
    }
  }
  return write_and_print(fit, fit_options, from, data.size(), "measured batches", hardware_path, out_file, out,
                         by_source);
}

}  // namespace servesim
