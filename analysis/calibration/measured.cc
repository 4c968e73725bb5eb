// Measured batches: their kinds, the roofline's comparable price, and the reader of our own CSV.
// The Vidur profile reader is in measured_vidur.cc.
#include "analysis/calibration/measured.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>

#include "sim/request.h"
#include "workloads/csv_reader.h"

namespace servesim {
namespace {

// An iteration of more than 11 days is not a measurement; the bound keeps every sum finite.
constexpr double kMaxMeasuredMs = 1e9;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_comment(std::string_view line) { return trim(line).starts_with('#'); }

// An integer from lo to hi; "12.0" is accepted as 12 (a float column's integers).
std::optional<int64_t> parse_integer(std::string_view text, int64_t lo, int64_t hi) {
  if (const size_t dot = text.find('.'); dot != std::string_view::npos) {
    const std::string_view fraction = text.substr(dot + 1);
    if (fraction.empty() || fraction.find_first_not_of('0') != std::string_view::npos) return std::nullopt;
    text = text.substr(0, dot);
  }
  int64_t v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// The columns of our CSV, by position in the file's header.
struct Columns {
  size_t iteration, new_tokens, context_tokens, measured_ms;
  size_t count;  // fields in the header, and so in every row
};

// "PATH:LINE:FIELD: COLUMN: MESSAGE", FIELD the column's 1-based position.
Error cell_error(const LineReader& in, size_t field, std::string_view column, std::string_view message) {
  return Error{in.path() + ":" + std::to_string(in.line_number()) + ":" + std::to_string(field + 1) + ": " +
               std::string(column) + ": " + std::string(message)};
}
Error expected(const LineReader& in, size_t field, std::string_view column, std::string_view what,
               std::string_view text) {
  return cell_error(in, field, column,
                    "expected " + std::string(what) + ", got '" + printable(text) + "'");
}

// The iteration being read: its items, its time and where it started.
struct Pending {
  int64_t iteration = -1;
  int32_t line = 0;
  double ms = 0;
  std::vector<RooflineModel::Item> items;
};

MeasuredKind kind_of(const std::vector<RooflineModel::Item>& items) {
  size_t decodes = 0;
  for (const RooflineModel::Item& it : items) {
    if (it.new_tokens == 1 && it.context_tokens > 0) ++decodes;
  }
  if (decodes == items.size()) return MeasuredKind::kDecode;
  return decodes == 0 ? MeasuredKind::kPrefill : MeasuredKind::kMixed;
}

MeasuredBatch finish(Pending&& p) {
  MeasuredBatch b;
  b.kind = kind_of(p.items);
  b.covers = Coverage::kIteration;
  b.measurement.covers = b.covers;
  b.label = "iteration " + std::to_string(p.iteration) + " (line " + std::to_string(p.line) + ")";
  b.measurement.items = std::move(p.items);
  b.measurement.measured = p.ms / 1e3;
  return b;
}

// Reads the header: the first line that is neither blank nor a comment.
Result<Columns> read_header(LineReader& in) {
  std::string line;
  std::vector<std::string> names;
  while (in.next(line)) {
    if (is_blank(line) || is_comment(line)) continue;
    if (!split_csv(line, names)) return in.error("malformed CSV header: unclosed quote");
    auto find = [&](std::string_view name) -> std::optional<size_t> {
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == name) return i;
      }
      return std::nullopt;
    };
    Columns c{};
    c.count = names.size();
    size_t* slots[] = {&c.iteration, &c.new_tokens, &c.context_tokens, &c.measured_ms};
    const char* wanted[] = {"iteration", "new_tokens", "context_tokens", "measured_ms"};
    for (size_t k = 0; k < 4; ++k) {
      const std::optional<size_t> at = find(wanted[k]);
      if (!at) {
        std::string found;
        for (const std::string& n : names) found += (found.empty() ? "" : ", ") + n;
        return in.error("missing column '" + std::string(wanted[k]) + "' (found: " + printable(found) +
                        "); the columns are iteration,new_tokens,context_tokens,measured_ms");
      }
      *slots[k] = *at;
    }
    return c;
  }
  if (!in.status().ok()) return in.status().error();
  return Error{in.path() + ": no header row (iteration,new_tokens,context_tokens,measured_ms)"};
}

// Adds one data row to `p`, or starts the next iteration (moving the finished one to `out`).
Status add_row(const LineReader& in, const Columns& c, const std::vector<std::string>& f, Pending& p,
               std::vector<MeasuredBatch>& out) {
  const std::optional<int64_t> iteration = parse_integer(f[c.iteration], 0, std::numeric_limits<int64_t>::max() - 1);
  if (!iteration) return expected(in, c.iteration, "iteration", "an integer >= 0", f[c.iteration]);
  const std::optional<int64_t> new_tokens = parse_integer(f[c.new_tokens], 1, kMaxTokens);
  if (!new_tokens) {
    return expected(in, c.new_tokens, "new_tokens", "an integer from 1 to " + std::to_string(kMaxTokens),
                    f[c.new_tokens]);
  }
  const std::optional<int64_t> context = parse_integer(f[c.context_tokens], 0, kMaxTokens);
  if (!context) {
    return expected(in, c.context_tokens, "context_tokens",
                    "an integer from 0 to " + std::to_string(kMaxTokens), f[c.context_tokens]);
  }
  const std::string& ms_text = f[c.measured_ms];
  std::optional<double> ms;
  if (!ms_text.empty()) {
    ms = parse_number(ms_text);
    if (!ms || *ms <= 0 || *ms > kMaxMeasuredMs) {
      return expected(in, c.measured_ms, "measured_ms", "a number of milliseconds > 0 (and <= 1e9)", ms_text);
    }
  }
  const std::string it = std::to_string(*iteration);
  if (p.iteration >= 0 && *iteration == p.iteration) {
    if (ms && *ms != p.ms) {
      return cell_error(in, c.measured_ms, "measured_ms",
                        "iteration " + it + " took " + f[c.measured_ms] + " ms here but " +
                            std::to_string(p.ms) + " ms on line " + std::to_string(p.line) +
                            ": repeat the same time or leave it empty");
    }
  } else {
    if (p.iteration >= 0 && *iteration < p.iteration) {
      return cell_error(in, c.iteration, "iteration",
                        "iteration " + it + " after iteration " + std::to_string(p.iteration) +
                            ": keep an iteration's rows together, and the iterations in order");
    }
    if (p.iteration >= 0 && *iteration > p.iteration + 1) {
      return cell_error(in, c.iteration, "iteration",
                        "iteration " + std::to_string(p.iteration + 1) + " has no rows (this row jumps from " +
                            std::to_string(p.iteration) + " to " + it +
                            "): number the iterations one after another; was a row lost?");
    }
    if (!ms) {
      return cell_error(in, c.measured_ms, "measured_ms",
                        "the first row of iteration " + it + " has no time: give its time in ms here");
    }
    if (p.iteration >= 0) out.push_back(finish(std::move(p)));
    p = Pending{*iteration, in.line_number(), *ms, {}};
  }
  p.items.push_back(RooflineModel::Item{*new_tokens, *context, true});
  return Ok{};
}

}  // namespace

const char* measured_kind_name(MeasuredKind kind) {
  switch (kind) {
    case MeasuredKind::kPrefill: return "prefill";
    case MeasuredKind::kDecode: return "decode";
    case MeasuredKind::kMixed: return "mixed";
    case MeasuredKind::kLinearOnly: return "linear-only";
  }
  return "?";
}

const char* coverage_name(Coverage c) {
  switch (c) {
    case Coverage::kIteration: return "iteration";
    case Coverage::kLayers: return "layers";
    case Coverage::kLinearLayers: return "linear layers";
  }
  return "?";
}

int64_t MeasuredBatch::new_tokens() const {
  int64_t n = 0;
  for (const RooflineModel::Item& it : measurement.items) n += it.new_tokens;
  return n;
}

double embedding_time(const RooflineModel& roofline, double tokens) {
  const HardwareSpec& hw = roofline.hardware();
  const double bytes = tokens * static_cast<double>(roofline.model().hidden_size) *
                       (dtype_bytes(roofline.options().weights) + dtype_bytes(roofline.options().activations));
  return bytes / (hw.memory_bandwidth * hw.memory_efficiency);
}

double comparable_price(const RooflineModel& roofline, const std::vector<RooflineModel::Item>& items,
                        Coverage covers) {
  const RooflineBreakdown t = roofline.price(items.data(), items.size());
  if (covers == Coverage::kIteration) return t.total();
  double tokens = 0;
  for (const RooflineModel::Item& it : items) tokens += static_cast<double>(it.new_tokens);
  // The layers' own norms, activation and adds: `other` holds them and the embedding rows' read.
  const double layer_other = t.other - embedding_time(roofline, tokens);
  if (covers == Coverage::kLinearLayers) return t.gemm + layer_other;
  return t.gemm + t.attention + layer_other;
}

double comparable_price(const RooflineModel& roofline, const MeasuredBatch& batch) {
  return comparable_price(roofline, batch.measurement.items, batch.covers);
}

Result<std::vector<MeasuredBatch>> read_measured_csv(const std::string& path) {
  Result<LineReader> opened = LineReader::open(path);
  if (!opened.ok()) return opened.error();
  LineReader& in = opened.value();
  Result<Columns> columns = read_header(in);
  if (!columns.ok()) return columns.error();
  const size_t width = columns.value().count;
  std::vector<MeasuredBatch> out;
  Pending pending;
  std::string line;
  std::vector<std::string> fields;
  while (in.next(line)) {
    if (is_blank(line) || is_comment(line)) continue;
    if (!split_csv(line, fields)) return in.error("malformed CSV row: unclosed quote");
    if (fields.size() != width) {
      return in.error("expected " + std::to_string(width) + " fields, as in the header, got " +
                      std::to_string(fields.size()) + " (an empty cell still needs its comma)");
    }
    if (Status s = add_row(in, columns.value(), fields, pending, out); !s.ok()) return s.error();
  }
  if (!in.status().ok()) return in.status().error();
  if (pending.iteration < 0) return Error{path + ": no measured iterations (no rows after the header)"};
  out.push_back(finish(std::move(pending)));
  return out;
}

Result<std::vector<MeasuredBatch>> read_measured_path(const std::string& path, const ModelSpec& model,
                                                      int32_t tp, std::vector<std::string>* notes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    Result<VidurProfile> profile = read_vidur_profile(path, model, tp);
    if (!profile.ok()) return profile.error();
    if (notes != nullptr) notes->insert(notes->end(), profile.value().notes.begin(), profile.value().notes.end());
    return std::move(profile.value().batches);
  }
  return read_measured_csv(path);
}

}  // namespace servesim
