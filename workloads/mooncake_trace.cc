#include "workloads/mooncake_trace.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/config/json_text.h"
#include "workloads/arrival.h"
#include "workloads/csv_reader.h"

namespace servesim {
namespace {

using nlohmann::json;

// A JSON value for a message: short and flat (json_excerpt).
std::string shown(const json& v) { return json_excerpt(v); }

// Parses one line; every failure of the JSON reader is an error naming the line and column.
Result<json> parse_line(const LineReader& in, const std::string& line) {
  json row;
  if (const auto failure = parse_json(line, row)) {
    std::string what = failure->message;
    // nlohmann says "at line 1, column N"; the line is the file's, given by the reader.
    if (const size_t at = what.find("at line 1, "); at != std::string::npos) what.erase(at + 3, 8);
    if (failure->byte != 0 && what.find("column") == std::string::npos) {
      what += " (at column " + std::to_string(failure->byte) + ")";
    }
    return in.error("malformed JSON: " + what);
  }
  return row;
}

Result<const json*> field(const LineReader& in, const json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end()) return in.error(std::string("missing key '") + key + "'");
  return &*it;
}

Result<int32_t> token_count(const LineReader& in, const json& row, const char* key) {
  auto v = field(in, row, key);
  if (!v) return v.error();
  const json& x = *v.value();
  constexpr int64_t kMax = kMaxTokens;
  const std::string got = ", got " + shown(x);
  if (!x.is_number_integer()) return in.error(key + (": expected an integer >= 1" + got));
  if (x.is_number_unsigned() ? x.get<uint64_t>() > kMax : x.get<int64_t>() > kMax) {
    return in.error(key + (": expected an integer <= " + std::to_string(kMax) + got));
  }
  const int64_t n = x.get<int64_t>();
  if (n < 1) return in.error(key + (": expected an integer >= 1" + got));
  return static_cast<int32_t>(n);
}

// The arrival in ns of a timestamp in ms (an integer or a finite number from 0 to 1e12 ms).
Result<Time> arrival_ns(const LineReader& in, const json& row) {
  auto v = field(in, row, "timestamp");
  if (!v) return v.error();
  const json& x = *v.value();
  const double ms = x.is_number() ? x.get<double>() : -1.0;
  if (!(ms >= 0 && ms <= kMaxArrivalSeconds * 1e3)) {
    return in.error("timestamp: expected a number of milliseconds from 0 to 1e12, got " + shown(x));
  }
  if (x.is_number_integer()) return x.get<int64_t>() * 1'000'000;  // exact
  return static_cast<Time>(std::llround(ms * 1e6));
}

// The prompt's segments: one per hash id, each block_tokens long but the last.
Status segments(const LineReader& in, const json& row, int32_t prompt_tokens, int32_t block_tokens,
                std::vector<Segment>& out) {
  auto v = field(in, row, "hash_ids");
  if (!v) return v.error();
  const json& ids = *v.value();
  if (!ids.is_array()) {
    return in.error(std::string("hash_ids: expected an array of integers, got ") + ids.type_name());
  }
  const int64_t blocks = (int64_t{prompt_tokens} + block_tokens - 1) / block_tokens;
  if (static_cast<int64_t>(ids.size()) != blocks) {
    return in.error("hash_ids: expected ceil(input_length / block_tokens) = " +
                    std::to_string(blocks) + " ids (input_length " + std::to_string(prompt_tokens) +
                    ", block_tokens " + std::to_string(block_tokens) + "), got " +
                    std::to_string(ids.size()));
  }
  out.reserve(ids.size());
  int32_t left = prompt_tokens;
  for (size_t i = 0; i < ids.size(); ++i) {
    const json& id = ids[i];
    if (!id.is_number_integer()) {
      return in.error("hash_ids: expected an array of integers, got " + shown(id) + " at index " +
                      std::to_string(i));
    }
    // Signed or unsigned, the 64 bits name the block; equal ids stay equal.
    const uint64_t n = id.is_number_unsigned() ? id.get<uint64_t>()
                                               : static_cast<uint64_t>(id.get<int64_t>());
    const int32_t tokens = std::min(block_tokens, left);
    out.push_back(Segment{content_id(kTraceBlockContent, n), tokens});
    left -= tokens;
  }
  return Ok{};
}

}  // namespace

Result<std::vector<RequestSpec>> read_mooncake_trace(const ReplayOptions& options) {
  auto in = LineReader::open(options.path);
  if (!in) return in.error();
  LineReader& reader = in.value();
  std::vector<RequestSpec> rows;
  std::string line;
  while ((options.limit == 0 || static_cast<int64_t>(rows.size()) < options.limit) &&
         reader.next(line)) {
    if (is_blank(line)) continue;
    auto parsed = parse_line(reader, line);
    if (!parsed) return parsed.error();
    const json& row = parsed.value();
    if (!row.is_object()) {
      return reader.error(std::string("expected a JSON object, got ") + row.type_name());
    }
    auto arrival = arrival_ns(reader, row);
    if (!arrival) return arrival.error();
    auto prompt = token_count(reader, row, "input_length");
    if (!prompt) return prompt.error();
    auto output = token_count(reader, row, "output_length");
    if (!output) return output.error();
    RequestSpec spec;
    spec.id = default_request_id(static_cast<int64_t>(rows.size()));
    spec.line = reader.line_number();
    spec.arrival = arrival.value();
    spec.prompt_tokens = prompt.value();
    spec.output_tokens = output.value();
    if (Status s = segments(reader, row, spec.prompt_tokens, options.block_tokens, spec.prompt); !s) {
      return s.error();
    }
    if (const auto it = row.find("priority"); it != row.end()) {  // optional: vLLM's priority
      const json& p = *it;
      if (!p.is_number_integer() ||
          (p.is_number_unsigned() ? p.get<uint64_t>() > uint64_t{INT32_MAX}
                                  : p.get<int64_t>() < INT32_MIN || p.get<int64_t>() > INT32_MAX)) {
        return reader.error("priority: expected a 32-bit integer, got " + shown(p));
      }
      spec.priority = static_cast<int32_t>(p.get<int64_t>());
    }
    rows.push_back(std::move(spec));
  }
  if (!reader.status().ok()) return reader.status().error();
  if (rows.empty()) return Error{options.path + ": empty trace (no rows)"};
  return rows;
}

}  // namespace servesim
