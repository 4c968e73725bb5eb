#include "sim/config/json_text.h"

namespace servesim {
namespace {

// The byte (1-based) where nesting first exceeds kMaxJsonDepth, or 0. Brackets inside strings do not
// count.
size_t too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i + 1;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return 0;
}

// nlohmann's what(): "[json.exception.parse_error.101] parse error at line 1, column 5: ..." ->
// "parse error at line 1, column 5: ...".
std::string untagged(const char* what) {
  std::string s = what;
  if (s.starts_with("[json.")) {
    if (const size_t end = s.find("] "); end != std::string::npos) s.erase(0, end + 2);
  }
  return s;
}

}  // namespace

std::optional<JsonParseFailure> parse_json(std::string_view text, nlohmann::json& out) {
  if (const size_t at = too_deep_at(text); at != 0) {
    return JsonParseFailure{at, "arrays and objects nested more than " +
                                    std::to_string(kMaxJsonDepth) + " levels deep"};
  }
  try {
    out = nlohmann::json::parse(text);
    return std::nullopt;
  } catch (const nlohmann::json::parse_error& e) {
    return JsonParseFailure{e.byte, untagged(e.what())};
  } catch (const nlohmann::json::exception& e) {  // out_of_range 406: a number beyond a double
    return JsonParseFailure{0, untagged(e.what())};
  }
}

std::pair<size_t, size_t> json_line_col(std::string_view text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

std::string json_excerpt(const nlohmann::json& v) {
  if (v.is_array()) {
    return v.empty() ? "an empty array" : "an array of " + std::to_string(v.size()) + " values";
  }
  if (v.is_object()) {
    return v.empty() ? "an empty object" : "an object of " + std::to_string(v.size()) + " keys";
  }
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

}  // namespace servesim
