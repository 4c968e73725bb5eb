// Reading JSON without surprises: nlohmann's parser reports malformed text, and numbers it cannot
// hold (1e400), by exceptions; parse_json turns every one of them into a value, and refuses nesting
// deeper than kMaxJsonDepth before parsing (a deep document would overflow the stack of whatever
// walks it recursively). json_excerpt quotes a value in a message without walking into it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace servesim {

inline constexpr int kMaxJsonDepth = 100;  // arrays and objects nested in one another

struct JsonParseFailure {
  size_t byte = 0;      // 1-based offset in the text where reading stopped
  std::string message;  // what went wrong, as "parse error ...: ..." without nlohmann's tag
};

// Parses `text` into `out`. Returns the failure, or nullopt when `out` holds the document.
std::optional<JsonParseFailure> parse_json(std::string_view text, nlohmann::json& out);

// 1-based line and column of byte offset `byte` (1-based) in `text`.
std::pair<size_t, size_t> json_line_col(std::string_view text, size_t byte);

// A value for a message: a scalar as JSON (cut to about 40 characters), an array or an object by
// its size ("an array of 3 values", "an object of 2 keys"). Never recursive.
std::string json_excerpt(const nlohmann::json& v);

}  // namespace servesim
