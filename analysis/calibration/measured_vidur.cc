// Vidur's operator profiles read as measured batches (the rules are in measured.h).
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "analysis/calibration/measured.h"
#include "sim/config/presets.h"
#include "workloads/csv_reader.h"

namespace servesim {
namespace {
namespace fs = std::filesystem;

// The operators of one layer that Vidur's ExecutionTime.model_time sums, besides the attention
// (vidur/entities/execution_time.py: attention layer, MLP layer and add; the all-reduce only with
// tp > 1, and it is not in these profiles).
constexpr const char* kLayerOps[] = {"attn_pre_proj",   "attn_post_proj", "attn_rope",
                                     "mlp_up_proj",     "mlp_act",        "mlp_down_proj",
                                     "input_layernorm", "post_attention_layernorm", "add"};

// "PATH:LINE:FIELD: COLUMN: MESSAGE", FIELD the column's 1-based position.
Error cell_error(const LineReader& in, size_t field, std::string_view column, std::string_view message) {
  return Error{in.path() + ":" + std::to_string(in.line_number()) + ":" + std::to_string(field + 1) + ": " +
               std::string(column) + ": " + std::string(message)};
}

// A cell of a profile: an integer from lo to hi, or a number >= 0 (a time in ms).
Result<int64_t> integer_cell(const LineReader& in, std::span<const std::string_view> f, size_t field,
                             std::string_view column, int64_t lo, int64_t hi) {
  std::string_view text = f[field];
  if (text.ends_with(".0")) text.remove_suffix(2);  // pandas writes a float column's integers so
  int64_t v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || v < lo || v > hi) {
    return cell_error(in, field, column, "expected an integer from " + std::to_string(lo) + " to " +
                                             std::to_string(hi) + ", got '" + printable(f[field]) + "'");
  }
  return v;
}
Result<double> ms_cell(const LineReader& in, std::span<const std::string_view> f, size_t field,
                       std::string_view column) {
  double v = 0;
  const std::string_view text = f[field];
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || !std::isfinite(v) || v < 0 || v > 1e9) {
    return cell_error(in, field, column, "expected a time in ms from 0 to 1e9, got '" + printable(text) + "'");
  }
  return v;
}

// Medians of shapes profiled more than once are averaged.
struct Mean {
  double sum = 0;
  int n = 0;
  double value() const { return sum / n; }
};

// mlp.csv: the per-layer time (ms) of the operators above, by num_tokens, at tensor-parallel
// degree tp; the model's shapes are checked on every row of that degree.
struct LinearProfile {
  std::map<int64_t, Mean> by_tokens;
  std::set<int64_t> degrees;  // every num_tensor_parallel_workers of the file
};

Result<LinearProfile> read_mlp(const std::string& path, const ModelSpec& model, int32_t tp) {
  Result<LineReader> opened = LineReader::open(path);
  if (!opened.ok()) return opened.error();
  LineReader& in = opened.value();
  Result<CsvHeader> header = CsvHeader::read(in);
  if (!header.ok()) return header.error();
  const CsvHeader& h = header.value();
  // Every column needed, found before any row is read: a missing one is named at line 1.
  struct Shape {
    const char* column;
    int64_t want;
    const char* key;  // the config.json key it must equal
    size_t at = 0;
  };
  Shape shapes[] = {{"n_head", model.num_heads, "num_attention_heads"},
                    {"n_kv_head", model.num_kv_heads, "num_key_value_heads"},
                    {"n_embd", model.hidden_size, "hidden_size"},
                    {"n_expanded_embd", model.intermediate_size, "intermediate_size"}};
  for (Shape& s : shapes) {
    Result<size_t> at = h.find(s.column);
    if (!at.ok()) return at.error();
    s.at = at.value();
  }
  std::vector<size_t> ops;
  for (const char* op : kLayerOps) {
    Result<size_t> at = h.find(std::string("time_stats.") + op + ".median");
    if (!at.ok()) return at.error();
    ops.push_back(at.value());
  }
  Result<size_t> tokens_at = h.find("num_tokens");
  if (!tokens_at.ok()) return tokens_at.error();
  Result<size_t> tp_at = h.find("num_tensor_parallel_workers");
  if (!tp_at.ok()) return tp_at.error();

  LinearProfile out;
  Status s = for_each_csv_row(in, h, 0, [&](std::span<const std::string_view> f) -> Status {
    Result<int64_t> degree = integer_cell(in, f, tp_at.value(), "num_tensor_parallel_workers", 1, 4096);
    if (!degree.ok()) return degree.error();
    out.degrees.insert(degree.value());
    if (degree.value() != tp) return Ok{};
    for (const Shape& sh : shapes) {
      Result<int64_t> v = integer_cell(in, f, sh.at, sh.column, 1, int64_t{1} << 40);
      if (!v.ok()) return v.error();
      if (v.value() != sh.want) {
        return cell_error(in, sh.at, sh.column,
                          "the profile's is " + std::to_string(v.value()) + ", but model " + model.name + " has " +
                              sh.key + " = " + std::to_string(sh.want) + ": give the --model it was profiled for");
      }
    }
    Result<int64_t> tokens = integer_cell(in, f, tokens_at.value(), "num_tokens", 1, kMaxTokens);
    if (!tokens.ok()) return tokens.error();
    double layer = 0;
    for (size_t k = 0; k < ops.size(); ++k) {
      Result<double> ms = ms_cell(in, f, ops[k], std::string("time_stats.") + kLayerOps[k] + ".median");
      if (!ms.ok()) return ms.error();
      layer += ms.value();
    }
    if (layer <= 0) {  // a measured time of nothing: no relative error can be taken of it
      return in.error("the operators' medians of this row sum to 0 ms; a profile's times are > 0");
    }
    Mean& m = out.by_tokens[tokens.value()];
    m.sum += layer;
    ++m.n;
    return Ok{};
  });
  if (!s.ok()) return s.error();
  if (out.by_tokens.empty()) {
    std::string found;
    for (int64_t d : out.degrees) found += (found.empty() ? "" : ", ") + std::to_string(d);
    return Error{path + ": no row has num_tensor_parallel_workers = " + std::to_string(tp) + " (found: " +
                 found + "); give --tp one of these"};
  }
  return out;
}

// attention_rows.csv: per-layer attention time (ms) by shape.
struct AttentionShape {
  bool decode;
  int64_t kv, size;  // cached tokens; decode: batch size, prefill: chunk size
  auto operator<=>(const AttentionShape&) const = default;
};

Result<std::map<AttentionShape, Mean>> read_attention(const std::string& path) {
  Result<LineReader> opened = LineReader::open(path);
  if (!opened.ok()) return opened.error();
  LineReader& in = opened.value();
  Result<CsvHeader> header = CsvHeader::read(in);
  if (!header.ok()) return header.error();
  size_t at[5];
  const char* names[] = {"kind", "batch_size", "kv_cache_size", "prefill_chunk_size", "time_ms_median"};
  for (size_t k = 0; k < 5; ++k) {
    Result<size_t> a = header.value().find(names[k]);
    if (!a.ok()) return a.error();
    at[k] = a.value();
  }
  std::map<AttentionShape, Mean> out;
  Status s = for_each_csv_row(in, header.value(), 0, [&](std::span<const std::string_view> f) -> Status {
    const std::string_view kind = f[at[0]];
    if (kind != "decode" && kind != "prefill") {
      return cell_error(in, at[0], "kind", "expected decode or prefill, got '" + printable(kind) + "'");
    }
    const bool decode = kind == "decode";
    // Vidur profiles a prefill as one sequence (attention_input.py); a decode batch of any size.
    Result<int64_t> batch = integer_cell(in, f, at[1], "batch_size", 1, decode ? kMaxTokens : 1);
    if (!batch.ok()) return batch.error();
    Result<int64_t> kv = integer_cell(in, f, at[2], "kv_cache_size", 0, kMaxTokens);
    if (!kv.ok()) return kv.error();
    int64_t size = batch.value();
    if (!decode) {
      Result<int64_t> chunk = integer_cell(in, f, at[3], "prefill_chunk_size", 1, kMaxTokens);
      if (!chunk.ok()) return chunk.error();
      size = chunk.value();
    }
    Result<double> ms = ms_cell(in, f, at[4], "time_ms_median");
    if (!ms.ok()) return ms.error();
    Mean& m = out[AttentionShape{decode, kv.value(), size}];
    m.sum += ms.value();
    ++m.n;
    return Ok{};
  });
  if (!s.ok()) return s.error();
  return out;
}

template <typename Map>
int duplicates(const Map& m) {
  int n = 0;
  for (const auto& [key, mean] : m) n += mean.n > 1 ? 1 : 0;
  return n;
}

}  // namespace

Result<VidurProfile> read_vidur_profile(const std::string& dir, const ModelSpec& model, int32_t tp) {
  const std::string mlp_path = (fs::path(dir) / "mlp.csv").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Error{dir + ": not a folder (a Vidur profile is a folder with mlp.csv)"};
  if (!fs::exists(mlp_path, ec)) return Error{dir + ": not a Vidur profile folder: it has no mlp.csv"};
  Result<LinearProfile> linear = read_mlp(mlp_path, model, tp);
  if (!linear.ok()) return linear.error();
  const std::map<int64_t, Mean>& by_tokens = linear.value().by_tokens;
  const double layers = static_cast<double>(model.num_layers);

  VidurProfile out;
  if (int d = duplicates(by_tokens); d > 0) {
    out.notes.push_back("mlp.csv: " + std::to_string(d) + " token counts profiled more than once; their medians averaged");
  }
  const std::string attention_path = (fs::path(dir) / "attention_rows.csv").string();
  if (fs::exists(attention_path, ec) && tp != 1) {
    out.notes.push_back("attention_rows.csv not read: it was profiled at tp 1; with tp " + std::to_string(tp) +
                        " only mlp.csv's rows are compared");
  } else if (fs::exists(attention_path, ec)) {
    Result<std::map<AttentionShape, Mean>> attention = read_attention(attention_path);
    if (!attention.ok()) return attention.error();
    out.has_attention = true;
    std::set<int64_t> unprofiled;
    int skipped = 0;
    for (const auto& [shape, mean] : attention.value()) {
      const int64_t tokens = shape.size;  // a decode batch computes one token per sequence
      auto lin = by_tokens.find(tokens);
      if (lin == by_tokens.end()) {  // no real timing of the linear layers at this many tokens
        unprofiled.insert(tokens);
        ++skipped;
        continue;
      }
      MeasuredBatch b;
      b.kind = shape.decode ? MeasuredKind::kDecode : MeasuredKind::kPrefill;
      b.covers = Coverage::kLayers;
      b.measurement.covers = b.covers;
      if (shape.decode) {
        b.measurement.items.assign(static_cast<size_t>(shape.size), RooflineModel::Item{1, shape.kv, true});
        b.label = "decode batch " + std::to_string(shape.size) + " over " + std::to_string(shape.kv);
      } else {
        b.measurement.items = {RooflineModel::Item{shape.size, shape.kv, true}};
        b.label = "prefill " + std::to_string(shape.size) + " over " + std::to_string(shape.kv);
      }
      b.measurement.measured = layers * (lin->second.value() + mean.value()) / 1e3;
      out.batches.push_back(std::move(b));
    }
    if (int d = duplicates(attention.value()); d > 0) {
      out.notes.push_back("attention_rows.csv: " + std::to_string(d) +
                          " shapes profiled more than once; their medians averaged");
    }
    if (skipped > 0) {
      std::string list;
      int shown = 0;
      for (int64_t t : unprofiled) {
        if (shown++ == 8) {
          list += ", ...";
          break;
        }
        list += (list.empty() ? "" : ", ") + std::to_string(t);
      }
      out.notes.push_back("attention_rows.csv: " + std::to_string(skipped) +
                          " of its shapes skipped: mlp.csv has no timing of the linear layers at their token "
                          "counts (" + list + ")");
    }
  }
  for (const auto& [tokens, mean] : by_tokens) {
    MeasuredBatch b;
    b.kind = MeasuredKind::kLinearOnly;
    b.covers = Coverage::kLinearLayers;
    b.measurement.covers = b.covers;
    b.measurement.items = {RooflineModel::Item{tokens, 0, true}};
    b.measurement.measured = layers * mean.value() / 1e3;
    b.label = "linear " + std::to_string(tokens) + " tokens";
    out.batches.push_back(std::move(b));
  }
  return out;
}

VidurPresets vidur_presets(const std::string& dir) {
  static const std::map<std::string, std::string> kGpus = {{"a100", "a100-80gb"}, {"h100", "h100-sxm"}};
  VidurPresets p;
  for (const fs::path& part : fs::path(dir).lexically_normal()) {
    if (auto g = kGpus.find(part.string()); g != kGpus.end()) p.hardware = g->second;
    // A profile folder is named after the model's repository (meta-llama/Llama-2-7b-hf).
    if (auto m = model_preset_for_repository(part.string())) p.model = *m;
  }
  return p;
}

}  // namespace servesim
