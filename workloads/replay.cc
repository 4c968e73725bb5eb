#include "workloads/replay.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "sim/config/toml_fields.h"
#include "workloads/arrival.h"
#include "workloads/azure_trace.h"
#include "workloads/csv_reader.h"
#include "workloads/csv_trace.h"
#include "workloads/mooncake_trace.h"
#include "workloads/vidur_trace.h"

namespace servesim {
namespace {

constexpr double kMaxFactor = 1e9;  // the largest rate (req/s) and time_scale accepted

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

std::optional<TraceFormat> format_named(std::string_view name) {
  for (TraceFormat f : {TraceFormat::kAzure, TraceFormat::kVidur, TraceFormat::kMooncake,
                        TraceFormat::kCsv}) {
    if (name == trace_format_name(f)) return f;
  }
  return std::nullopt;
}

// Reads [replay.columns] into `columns`.
Status read_columns(const TableFields& f, CsvColumns& columns) {
  if (Status s = f.check_known(
          {"arrival", "prompt_tokens", "output_tokens", "id", "max_tokens", "priority"});
      !s) {
    return s;
  }
  std::pair<const char*, std::string*> keys[] = {{"arrival", &columns.arrival},
                                                 {"prompt_tokens", &columns.prompt_tokens},
                                                 {"output_tokens", &columns.output_tokens},
                                                 {"id", &columns.id},
                                                 {"max_tokens", &columns.max_tokens},
                                                 {"priority", &columns.priority}};
  for (auto& [key, out] : keys) {
    auto name = f.string(key);
    if (!name) return name.error();
    if (name.value()) *out = *name.value();
  }
  return Ok{};
}

// Rewrites arrivals in place: shift to 0, then rescale (see replay.h). REQUIRES: sorted, non-empty.
Status retime(const ReplayOptions& o, std::vector<RequestSpec>& rows) {
  const Time first = rows.front().arrival;
  for (RequestSpec& r : rows) r.arrival -= first;
  double factor = o.time_scale;
  if (o.rate > 0) {
    const Time span = rows.back().arrival;
    if (span == 0) {
      return Error{o.path + ": rate: cannot rescale to a mean rate: all " +
                   std::to_string(rows.size()) + " rows arrive at the same time"};
    }
    const double observed = static_cast<double>(rows.size() - 1) / to_seconds(span);
    factor = observed / o.rate;
  }
  const double last = static_cast<double>(rows.back().arrival) * factor;
  if (!(last <= kMaxArrivalSeconds * 1e9)) {  // every arrival stays within kMaxArrivalSeconds
    return Error{o.path + ": the replay would span more than 1e9 s (" +
                 format_number(to_seconds(rows.back().arrival)) + " s in the trace, times " +
                 format_number(factor) + ")"};
  }
  if (factor == 1.0) return Ok{};
  for (RequestSpec& r : rows) {
    r.arrival = static_cast<Time>(std::llround(static_cast<double>(r.arrival) * factor));
  }
  return Ok{};
}

// The rows of the trace in file order, from the reader of `format`.
Result<std::vector<RequestSpec>> read_rows(TraceFormat format, const ReplayOptions& o) {
  switch (format) {
    case TraceFormat::kAzure: return read_azure_trace(o);
    case TraceFormat::kVidur: return read_vidur_trace(o);
    case TraceFormat::kMooncake: return read_mooncake_trace(o);
    case TraceFormat::kCsv: return read_csv_trace(o);
  }
  return Error{o.path + ": unknown trace format"};
}

}  // namespace

const char* trace_format_name(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAzure: return "azure";
    case TraceFormat::kVidur: return "vidur";
    case TraceFormat::kMooncake: return "mooncake";
    case TraceFormat::kCsv: return "csv";
  }
  return "?";
}

bool is_trace_path(const std::string& path) {
  const std::string ext = lower_extension(path);
  return ext == ".csv" || ext == ".jsonl";
}

Result<ReplayOptions> parse_replay_table(const toml::table& replay, const std::string& workload_path) {
  const TableFields f(replay, workload_path, "replay");
  if (Status s = f.check_known(
          {"path", "format", "limit", "rate", "time_scale", "block_tokens", "columns", "priority"});
      !s) {
    return s.error();
  }
  if (Status s = f.require("path"); !s) return s.error();
  ReplayOptions o;
  auto path = f.string("path");
  if (!path) return path.error();
  o.path = (std::filesystem::path(workload_path).parent_path() / *path.value()).string();

  auto format = f.string("format");
  if (!format) return format.error();
  if (format.value()) {
    o.format = format_named(*format.value());
    if (!o.format) return f.expected("format", "one of \"azure\", \"mooncake\", \"vidur\", \"csv\"");
  }
  auto limit = f.integer("limit", 1, std::numeric_limits<int64_t>::max());
  if (!limit) return limit.error();
  o.limit = limit.value().value_or(0);
  auto rate = f.number("rate", 0.0, false, kMaxFactor);
  if (!rate) return rate.error();
  o.rate = rate.value().value_or(0.0);
  auto time_scale = f.number("time_scale", 0.0, false, kMaxFactor);
  if (!time_scale) return time_scale.error();
  o.time_scale = time_scale.value().value_or(1.0);
  if (rate.value() && time_scale.value()) {
    return f.error_at_key("time_scale",
                          "cannot be combined with rate (rate rescales arrivals to a mean rate; "
                          "time_scale multiplies them); set one of the two");
  }
  auto block = f.integer("block_tokens", 1, std::numeric_limits<int32_t>::max());
  if (!block) return block.error();
  if (block.value() && o.format && o.format != TraceFormat::kMooncake) {
    return f.error_at_key("block_tokens", "only for format = \"mooncake\"");
  }
  o.block_tokens = static_cast<int32_t>(block.value().value_or(512));

  auto columns = f.subtable("columns");
  if (!columns) return columns.error();
  if (columns.value()) {
    if (o.format && o.format != TraceFormat::kCsv) {
      return f.error_at_key("columns", "only for format = \"csv\"");
    }
    o.format = TraceFormat::kCsv;
    if (Status s = read_columns(TableFields(*columns.value(), workload_path, "replay.columns"),
                                o.columns);
        !s) {
      return s.error();
    }
  }
  auto priority = f.subtable("priority");
  if (!priority) return priority.error();
  if (priority.value()) {
    if (!o.columns.priority.empty()) {
      return f.error_at_key("priority", "the trace's priority column already gives priorities; "
                                        "remove [replay.priority] or columns.priority");
    }
    auto read = read_priority_options(*priority.value(), workload_path, "replay.priority");
    if (!read) return read.error();
    o.priority = std::move(read).value();
  }
  return o;
}

Result<TraceFormat> detect_trace_format(const std::string& path, const CsvColumns& columns) {
  auto in = LineReader::open(path);
  if (!in) return in.error();
  if (lower_extension(path) == ".jsonl") return TraceFormat::kMooncake;
  std::string line;
  bool more = in.value().next(line);
  while (more && is_blank(line)) more = in.value().next(line);
  const size_t start = line.find_first_not_of(" \t");
  if (more && start != std::string::npos && line[start] == '{') return TraceFormat::kMooncake;
  auto reopened = LineReader::open(path);
  if (!reopened) return reopened.error();
  auto header = CsvHeader::read(reopened.value());
  if (!header) return header.error();
  const CsvHeader& h = header.value();
  auto has_all = [&](std::initializer_list<std::string_view> names) {
    return std::all_of(names.begin(), names.end(), [&](std::string_view n) { return h.has(n); });
  };
  if (has_all({"TIMESTAMP", "ContextTokens", "GeneratedTokens"})) return TraceFormat::kAzure;
  if (has_all({"arrived_at", "num_prefill_tokens", "num_decode_tokens"})) return TraceFormat::kVidur;
  if (has_all({columns.arrival, columns.prompt_tokens, columns.output_tokens})) return TraceFormat::kCsv;
  return Error{path + ":1: cannot tell the trace format from the header (found: " + h.list() +
               "); known: azure (TIMESTAMP, ContextTokens, GeneratedTokens), vidur (arrived_at, "
               "num_prefill_tokens, num_decode_tokens), csv (" + columns.arrival + ", " +
               columns.prompt_tokens + ", " + columns.output_tokens + "); set format and columns"};
}

Result<Workload> replay_trace(const ReplayOptions& o) {
  if (o.limit < 0 || o.block_tokens < 1 || !(o.rate >= 0 && o.rate <= kMaxFactor) ||
      !(o.time_scale > 0 && o.time_scale <= kMaxFactor) || (o.rate > 0 && o.time_scale != 1.0)) {
    return Error{o.path + ": invalid replay options: need limit >= 0, block_tokens >= 1, "
                 "0 < time_scale <= 1e9 and 0 <= rate <= 1e9, not both rate and time_scale"};
  }
  TraceFormat format;
  if (o.format) {
    format = *o.format;
  } else {
    auto detected = detect_trace_format(o.path, o.columns);
    if (!detected) return detected.error();
    format = detected.value();
  }
  auto rows = read_rows(format, o);
  if (!rows) return rows.error();
  Workload w;
  w.path = o.path;
  w.requests = std::move(rows).value();
  if (w.requests.empty()) return Error{o.path + ": empty trace (no rows)"};
  const auto by_arrival = [](const RequestSpec& a, const RequestSpec& b) { return a.arrival < b.arrival; };
  if (!std::is_sorted(w.requests.begin(), w.requests.end(), by_arrival)) {  // traces mostly are
    std::stable_sort(w.requests.begin(), w.requests.end(), by_arrival);
  }
  if (Status s = retime(o, w.requests); !s) return s.error();
  if (o.priority) {
    w.seed = o.seed;
    assign_priorities(*o.priority, o.seed, w.requests);
  }
  return w;
}

}  // namespace servesim
