#include "analysis/calibrate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "analysis/batch_log.h"
#include "analysis/database.h"

namespace servesim {
namespace {

constexpr double kMinEfficiency = 0.01, kMaxEfficiency = 1.0;
constexpr int kMaxEvaluations = 3000;

// Predictions of every measurement under hw with the overhead set to the best value for them.
struct Evaluation {
  double loss = 0;      // sum of squared relative errors
  double overhead = 0;  // seconds
};

Evaluation evaluate(HardwareSpec hw, const ModelSpec& model, const RooflineOptions& options,
                    const std::vector<Measurement>& data, std::vector<double>& base) {
  hw.overhead = 0;
  const RooflineModel roofline(std::move(hw), model, options);
  base.resize(data.size());
  // With p_i = b_i + o, sum ((b_i + o - m_i) / m_i)^2 is least at o = sum (m_i - b_i) / m_i^2
  // over sum 1 / m_i^2; overhead >= 0 keeps it there or at 0 (the loss is convex in o).
  double num = 0, den = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    base[i] = roofline.price(data[i].items.data(), data[i].items.size()).total();
    const double w = 1 / (data[i].measured * data[i].measured);
    num += (data[i].measured - base[i]) * w;
    den += w;
  }
  Evaluation e;
  e.overhead = std::max(0.0, num / den);
  for (size_t i = 0; i < data.size(); ++i) {
    const double r = (base[i] + e.overhead - data[i].measured) / data[i].measured;
    e.loss += r * r;
  }
  return e;
}

double mape(const HardwareSpec& hw, const ModelSpec& model, const RooflineOptions& options,
            const std::vector<Measurement>& data) {
  const RooflineModel roofline(hw, model, options);
  double sum = 0;
  for (const Measurement& m : data) {
    const double p = roofline.price(m.items.data(), m.items.size()).total();
    sum += std::fabs(p - m.measured) / m.measured;
  }
  return sum / static_cast<double>(data.size());
}

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

}  // namespace

CalibrationFit fit_hardware(const HardwareSpec& start, const ModelSpec& model,
                            const RooflineOptions& options, const std::vector<Measurement>& data) {
  CalibrationFit fit{start, mape(start, model, options, data), 0, 0};
  std::vector<double> base;
  auto clamp = [](double x) {
    return std::clamp(x, std::log(kMinEfficiency), std::log(kMaxEfficiency));
  };
  std::array<double, 3> x = {clamp(std::log(std::max(start.gemm_efficiency, kMinEfficiency))),
                             clamp(std::log(std::max(start.memory_efficiency, kMinEfficiency))),
                             clamp(std::log(std::max(start.attention_efficiency, kMinEfficiency)))};
  auto at = [&](const std::array<double, 3>& p) {
    HardwareSpec hw = start;
    hw.gemm_efficiency = std::exp(p[0]);
    hw.memory_efficiency = std::exp(p[1]);
    hw.attention_efficiency = std::exp(p[2]);
    ++fit.evaluations;
    return evaluate(hw, model, options, data, base);
  };
  Evaluation best = at(x);
  // Directions: each efficiency alone, and all three together (a faster or slower machine).
  constexpr std::array<std::array<double, 3>, 4> kDirections = {
      {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}}};
  for (double step = 1.0; step > 1e-4 && fit.evaluations < kMaxEvaluations;) {
    bool improved = false;
    for (const auto& d : kDirections) {
      for (double sign : {1.0, -1.0}) {
        std::array<double, 3> y = x;
        for (int k = 0; k < 3; ++k) y[k] = clamp(x[k] + sign * step * d[k]);
        if (y == x) continue;
        const Evaluation e = at(y);
        if (e.loss < best.loss) {
          best = e;
          x = y;
          improved = true;
          break;
        }
      }
    }
    if (!improved) step /= 2;
  }
  fit.hardware.gemm_efficiency = std::exp(x[0]);
  fit.hardware.memory_efficiency = std::exp(x[1]);
  fit.hardware.attention_efficiency = std::exp(x[2]);
  fit.hardware.overhead = best.overhead;
  fit.mape_after = mape(fit.hardware, model, options, data);
  return fit;
}

std::string hardware_toml(const HardwareSpec& hw, const std::string& header) {
  std::ostringstream s;
  s << header;
  s << "name = " << quoted(hw.name) << "\n"
    << "memory_gib = " << number(hw.memory_bytes / (1024.0 * 1024 * 1024)) << "\n"
    << "memory_bandwidth_gbs = " << number(hw.memory_bandwidth / 1e9) << "\n"
    << "fp16_tflops = " << number(hw.fp16_flops / 1e12) << "\n"
    << "fp8_tflops = " << number(hw.fp8_flops / 1e12) << "\n"
    << "fp32_tflops = " << number(hw.fp32_flops / 1e12) << "\n"
    << "bf16 = " << (hw.bf16 ? "true" : "false") << "\n"
    << "interconnect_gbs = " << number(hw.interconnect_bandwidth / 1e9) << "\n"
    << "interconnect_latency_us = " << number(hw.interconnect_latency * 1e6) << "\n"
    << "gemm_efficiency = " << number(hw.gemm_efficiency) << "\n"
    << "memory_efficiency = " << number(hw.memory_efficiency) << "\n"
    << "attention_efficiency = " << number(hw.attention_efficiency) << "\n"
    << "overhead_us = " << number(hw.overhead * 1e6) << "\n"
    << "gemm_half_rows = " << number(hw.gemm_half_rows) << "\n";
  if (hw.price_per_hour_usd > 0) s << "price_per_hour_usd = " << number(hw.price_per_hour_usd) << "\n";
  return s.str();
}

Status calibrate_run(const std::string& db_path, std::optional<int64_t> run_id,
                     const std::string& out_path, std::ostream& out) {
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(db_path);
  if (!opened.ok()) return opened.error();
  sqlite3* db = opened.value()->handle();
  Result<RunSources> source = read_run_sources(db, db_path, run_id);
  if (!source.ok()) return source.error();
  const RunSources& run = source.value();
  const std::string name = "run " + std::to_string(run.id);
  Result<std::vector<LoggedIteration>> logged = read_logged_iterations(db, run.id, false);
  if (!logged.ok()) return logged.error();
  if (logged.value().empty()) {
    return Error{name + " of " + db_path + " has no measured iterations: calibrate a run of a "
                 "measuring backend (--backend cpu or cuda)"};
  }
  logged = read_logged_iterations(db, run.id, true);
  if (!logged.ok()) return logged.error();
  if (run.hardware.empty()) return Error{name + " names no hardware file; nothing to calibrate"};
  Result<RooflineModel> roofline = replay_roofline(run, run.hardware);
  if (!roofline.ok()) return roofline.error();

  std::vector<Measurement> data;
  for (LoggedIteration& it : logged.value()) {
    if (!it.items.empty()) data.push_back({std::move(it.items), it.measured});
  }
  if (data.empty()) return Error{name + " logged no batches of its measured iterations"};
  const RooflineModel& r = roofline.value();
  const CalibrationFit fit = fit_hardware(r.hardware(), r.model(), r.options(), data);

  char line[160];
  std::snprintf(line, sizeof line, "# MAPE of the predictions before: %.1f %%, after: %.1f %%.\n",
                100 * fit.mape_before, 100 * fit.mape_after);
  const std::string header = "# Calibrated by `sim calibrate` from " + name + " of " +
                             one_line(db_path) + " (" + std::to_string(data.size()) +
                             " measured iterations).\n" + line +
                             "# Fitted: gemm_efficiency, memory_efficiency, attention_efficiency, "
                             "overhead_us; the rest copied from " + one_line(run.hardware) + ".\n";
  {
    std::ofstream file(out_path, std::ios::binary | std::ios::trunc);
    if (file) file << hardware_toml(fit.hardware, header);
    if (!file || !file.flush()) return Error{"cannot write " + out_path + "; use another --out"};
  }

  const HardwareSpec& a = r.hardware();
  const HardwareSpec& b = fit.hardware;
  out << "Calibration of " << run.hardware << " from " << name << " of " << db_path << " ("
      << data.size() << " iterations)\n";
  std::snprintf(line, sizeof line, "%-22s %12s %12s\n", "", "before", "after");
  out << line;
  auto row = [&](const char* what, double x, double y, const char* unit) {
    std::snprintf(line, sizeof line, "%-22s %12.4g %12.4g%s\n", what, x, y, unit);
    out << line;
  };
  row("MAPE (%)", 100 * fit.mape_before, 100 * fit.mape_after, "");
  row("gemm_efficiency", a.gemm_efficiency, b.gemm_efficiency, "");
  row("memory_efficiency", a.memory_efficiency, b.memory_efficiency, "");
  row("attention_efficiency", a.attention_efficiency, b.attention_efficiency, "");
  row("overhead_us", a.overhead * 1e6, b.overhead * 1e6, "");
  out << "Wrote " << out_path << "\n";
  return Ok{};
}

}  // namespace servesim
