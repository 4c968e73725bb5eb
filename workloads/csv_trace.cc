#include "workloads/csv_trace.h"

#include <optional>
#include <string>
#include <unordered_map>

#include "workloads/csv_reader.h"

namespace servesim {
namespace {

// The index of the column `name`, or nullopt when `name` is empty (an optional column not used).
Result<std::optional<size_t>> optional_column(const CsvHeader& header, const std::string& name) {
  if (name.empty()) return std::optional<size_t>{};
  auto found = header.find(name);
  if (!found) return found.error();
  return std::optional<size_t>{found.value()};
}

}  // namespace

Status read_csv_trace_rows(const ReplayOptions& options, TraceRowSink& sink) {
  const CsvColumns& names = options.columns;
  auto in = LineReader::open(options.path);
  if (!in) return in.error();
  LineReader& reader = in.value();
  auto header = CsvHeader::read(reader);
  if (!header) return header.error();
  size_t col[3];
  const std::string* const required[3] = {&names.arrival, &names.prompt_tokens,
                                          &names.output_tokens};
  for (size_t i = 0; i < 3; ++i) {
    auto found = header.value().find(*required[i]);
    if (!found) return found.error();
    col[i] = found.value();
  }
  auto id_col = optional_column(header.value(), names.id);
  if (!id_col) return id_col.error();
  auto max_col = optional_column(header.value(), names.max_tokens);
  if (!max_col) return max_col.error();
  auto priority_col = optional_column(header.value(), names.priority);
  if (!priority_col) return priority_col.error();

  size_t rows = 0;
  std::unordered_map<std::string, int32_t> id_lines;  // only with an id column: id -> its line
  auto row = [&](std::span<const std::string_view> fields) -> Status {
    auto arrival = parse_seconds(reader, names.arrival, fields[col[0]]);
    if (!arrival) return arrival.error();
    auto prompt = parse_token_count(reader, names.prompt_tokens, fields[col[1]]);
    if (!prompt) return prompt.error();
    auto output = parse_token_count(reader, names.output_tokens, fields[col[2]]);
    if (!output) return output.error();
    int32_t max_tokens = 0;
    if (max_col.value() && !fields[*max_col.value()].empty()) {  // an empty cell: not given
      auto limit = parse_token_count(reader, names.max_tokens, fields[*max_col.value()]);
      if (!limit) return limit.error();
      max_tokens = limit.value();
    }
    int32_t priority = 0;
    if (priority_col.value() && !fields[*priority_col.value()].empty()) {  // empty: the default 0
      auto p = parse_priority(reader, names.priority, fields[*priority_col.value()]);
      if (!p) return p.error();
      priority = p.value();
    }
    std::string id;
    if (id_col.value()) {
      id.assign(fields[*id_col.value()]);
      if (id.empty()) return reader.expected(names.id, "a non-empty id", id);
      const auto [it, inserted] = id_lines.emplace(id, reader.line_number());
      if (!inserted) {
        return reader.error(names.id + ": duplicate id '" + id + "' (first on line " +
                            std::to_string(it->second) + ")");
      }
    }
    if (rows == kRowsBeforeReserving) sink.reserve(reader.rows_expected(rows, options.limit));
    RequestSpec& spec = sink.add();
    spec.id = id_col.value() ? std::move(id) : default_request_id(static_cast<int64_t>(rows));
    spec.line = reader.line_number();
    spec.arrival = from_seconds(arrival.value());
    spec.prompt_tokens = prompt.value();
    spec.output_tokens = output.value();
    spec.max_tokens = max_tokens;
    spec.priority = priority;
    ++rows;
    return Ok{};
  };
  return for_each_csv_row(reader, header.value(), options.limit, row, &sink);
}

Result<std::vector<RequestSpec>> read_csv_trace(const ReplayOptions& options) {
  TraceRowVector sink;
  if (Status s = read_csv_trace_rows(options, sink); !s) return s.error();
  return std::move(sink.rows);
}

}  // namespace servesim
