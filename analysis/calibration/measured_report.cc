#include "analysis/calibration/measured_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "analysis/metrics/metrics.h"
#include "backends/hardware.h"
#include "backends/model.h"
#include "sim/config/presets.h"

namespace servesim {
namespace {

constexpr MeasuredKind kKinds[] = {MeasuredKind::kPrefill, MeasuredKind::kDecode, MeasuredKind::kMixed,
                                   MeasuredKind::kLinearOnly};
constexpr size_t kWorstShown = 10;

ErrorSummary summarise(std::string group, const std::vector<double>& errors) {
  ErrorSummary s;
  s.group = std::move(group);
  s.count = errors.size();
  std::vector<double> abs;
  for (double e : errors) {
    abs.push_back(std::fabs(e));
    s.bias += e;
    s.mape += std::fabs(e);
  }
  std::sort(abs.begin(), abs.end());
  s.mape /= static_cast<double>(s.count);
  s.bias /= static_cast<double>(s.count);
  s.p50 = percentile(abs, 50);
  s.p90 = percentile(abs, 90);
  return s;
}

bool is_large(const MeasuredBatch& b) {
  return b.kind == MeasuredKind::kDecode ? b.batch_size() > 16 : b.new_tokens() > 512;
}

const char* band_name(MeasuredKind kind, bool large) {
  if (kind == MeasuredKind::kDecode) return large ? "batch 17+" : "batch 1-16";
  return large ? "513+ tokens" : "1-512 tokens";
}

// Which sources' times cover what, said once above the table.
std::string coverage_line(const MeasuredValidation& v) {
  std::set<Coverage> seen;
  for (const PricedBatch& p : v.priced) seen.insert(p.batch->covers);
  std::string s;
  for (Coverage c : seen) {
    if (!s.empty()) s += "; ";
    switch (c) {
      case Coverage::kIteration: s += "iterations: the whole roofline price"; break;
      case Coverage::kLayers: s += "prefill/decode: the layers only (no embedding, LM head, overhead)"; break;
      case Coverage::kLinearLayers: s += "linear-only: linear layers, norms, activation (no attention)"; break;
    }
  }
  return s;
}

std::string pct(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * fraction);
  return buf;
}

std::string signed_pct(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * fraction);
  return buf;
}

void print_text(const MeasuredValidation& v, const MeasuredSource& src, std::ostream& out) {
  out << "Roofline (" << src.hardware << ", " << src.model << ", tp " << src.tp << ") against "
      << v.priced.size() << " measured batches from " << src.path << "\n"
      << "Compared: " << coverage_line(v) << "\n"
      << "error = (predicted - measured) / measured; MAPE = mean |error|; bias = mean error "
         "(> 0: the roofline is too slow)\n";
  char line[200];
  std::snprintf(line, sizeof line, "%-26s %7s %9s %9s %9s %9s\n", "batches", "count", "MAPE", "p50", "p90", "bias");
  out << line;
  auto row = [&](const ErrorSummary& s) {
    std::snprintf(line, sizeof line, "%-26s %7zu %9s %9s %9s %9s\n", s.group.c_str(), s.count, pct(s.mape).c_str(),
                  pct(s.p50).c_str(), pct(s.p90).c_str(), signed_pct(s.bias).c_str());
    out << line;
  };
  row(v.all);
  for (const ErrorSummary& s : v.by_kind) row(s);
  for (const ErrorSummary& s : v.by_band) row(s);
  out << "\nWorst shapes:\n";
  std::snprintf(line, sizeof line, "%-30s %-12s %14s %15s %9s\n", "shape", "kind", "measured (ms)", "predicted (ms)",
                "error");
  out << line;
  for (size_t i : v.worst) {
    const PricedBatch& p = v.priced[i];
    std::snprintf(line, sizeof line, "%-30s %-12s %14.3f %15.3f %9s\n", p.batch->label.c_str(),
                  measured_kind_name(p.batch->kind), 1e3 * p.batch->measurement.measured, 1e3 * p.predicted,
                  signed_pct(p.error).c_str());
    out << line;
  }
  for (const std::string& n : src.notes) out << "Note: " << n << "\n";
}

nlohmann::json summary_json(const ErrorSummary& s) {
  return {{"count", s.count}, {"mape", s.mape}, {"p50", s.p50}, {"p90", s.p90}, {"bias", s.bias}};
}

nlohmann::json shape_json(const PricedBatch& p) {
  const MeasuredBatch& b = *p.batch;
  return {{"label", b.label},
          {"kind", measured_kind_name(b.kind)},
          {"covers", coverage_name(b.covers)},
          {"batch_size", b.batch_size()},
          {"new_tokens", b.new_tokens()},
          {"measured_ms", 1e3 * b.measurement.measured},
          {"predicted_ms", 1e3 * p.predicted},
          {"error", p.error}};
}

void print_json(const MeasuredValidation& v, const MeasuredSource& src, std::ostream& out) {
  nlohmann::json j;
  j["source"] = src.path;
  j["hardware"] = src.hardware;
  j["model"] = src.model;
  j["tp"] = src.tp;
  j["all"] = summary_json(v.all);
  j["by_kind"] = nlohmann::json::object();
  for (const ErrorSummary& s : v.by_kind) j["by_kind"][s.group] = summary_json(s);
  j["by_band"] = nlohmann::json::object();
  for (const ErrorSummary& s : v.by_band) j["by_band"][s.group] = summary_json(s);
  j["worst"] = nlohmann::json::array();
  for (size_t i : v.worst) j["worst"].push_back(shape_json(v.priced[i]));
  j["shapes"] = nlohmann::json::array();
  for (const PricedBatch& p : v.priced) j["shapes"].push_back(shape_json(p));
  j["notes"] = src.notes;
  out << j.dump(2) << "\n";
}

}  // namespace

const char* size_band(const MeasuredBatch& b) { return band_name(b.kind, is_large(b)); }

MeasuredValidation validate_measured(const RooflineModel& roofline, const std::vector<MeasuredBatch>& batches) {
  MeasuredValidation v;
  std::vector<double> all;
  std::map<MeasuredKind, std::vector<double>> kinds;
  std::map<std::pair<MeasuredKind, bool>, std::vector<double>> bands;  // (kind, large)
  for (const MeasuredBatch& b : batches) {
    const double predicted = comparable_price(roofline, b);
    const double error = (predicted - b.measurement.measured) / b.measurement.measured;
    v.priced.push_back(PricedBatch{&b, predicted, error});
    all.push_back(error);
    kinds[b.kind].push_back(error);
    bands[{b.kind, is_large(b)}].push_back(error);
  }
  v.all = summarise("all", all);
  for (MeasuredKind k : kKinds) {
    if (kinds.count(k) != 0) v.by_kind.push_back(summarise(measured_kind_name(k), kinds[k]));
    for (bool large : {false, true}) {
      auto it = bands.find({k, large});
      if (it == bands.end()) continue;
      v.by_band.push_back(summarise(std::string(measured_kind_name(k)) + " " + band_name(k, large), it->second));
    }
  }
  std::vector<size_t> order(v.priced.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::fabs(v.priced[a].error) > std::fabs(v.priced[b].error);
  });
  order.resize(std::min(order.size(), kWorstShown));
  v.worst = std::move(order);
  return v;
}

void print_measured_validation(const MeasuredValidation& v, const MeasuredSource& source, ReportFormat format,
                               std::ostream& out) {
  if (format == ReportFormat::kJson) {
    print_json(v, source, out);
  } else {
    print_text(v, source, out);
  }
}

Status validate_measured_path(const MeasuredRequest& r, std::ostream& out) {
  Result<HardwareSpec> hw = load_hardware(r.hardware_path);
  if (!hw.ok()) return hw.error();
  Result<ModelSpec> model = load_model(r.model_path);
  if (!model.ok()) return model.error();
  if (Status s = check_tensor_parallel(model.value(), r.tp); !s.ok()) return s.error();
  MeasuredSource source{r.path, preset_display_name(r.hardware_path, PresetKind::kHardware),
                        preset_display_name(r.model_path, PresetKind::kModel), r.tp, {}};
  Result<std::vector<MeasuredBatch>> read = read_measured_path(r.path, model.value(), r.tp, &source.notes);
  if (!read.ok()) return read.error();
  const std::vector<MeasuredBatch>& batches = read.value();
  // The precision the model is served in, as a measuring run's replay prices it (batch_log.cc).
  RooflineOptions options;
  options.tp = r.tp;
  options.weights = options.kv = options.activations = model.value().dtype;
  const RooflineModel roofline(std::move(hw).value(), std::move(model).value(), options);
  print_measured_validation(validate_measured(roofline, batches), source, r.format, out);
  return Ok{};
}

}  // namespace servesim
