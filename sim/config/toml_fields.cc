#include "sim/config/toml_fields.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <cmath>
#include <limits>
#include <utility>

namespace servesim {

Status check_readable_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return Error{path + ": cannot open file (" +
                 (err == ENOENT || err == ENOTDIR ? std::string("no such file")
                                                  : std::string(std::strerror(err))) +
                 ")"};
  }
  if (S_ISDIR(st.st_mode)) return Error{path + ": cannot open file (it is a directory)"};
  if (!S_ISREG(st.st_mode)) {
    return Error{path + ": cannot open file (it is not a regular file: a device, a pipe or a socket)"};
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return Error{path + ": cannot open file (" + std::string(std::strerror(errno)) + ")"};
  }
  return Ok{};
}

Result<std::string> read_text_file(const std::string& path, size_t max_bytes) {
  if (Status s = check_readable_file(path); !s.ok()) return s.error();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open file"};
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    const auto n = static_cast<size_t>(in.gcount());
    if (text.size() + n > max_bytes) {  // checked while reading: the file may grow meanwhile
      return Error{path + ": is more than " + std::to_string(max_bytes) +
                   " bytes; the most this reads is " + std::to_string(max_bytes)};
    }
    text.append(buf, n);
  }
  if (in.bad()) return Error{path + ": cannot read file"};
  return text;
}

Result<toml::table> parse_toml(std::string_view text, const std::string& path) {
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& e) {
    return error_at(path, e.source().begin, "",
                    "malformed TOML: " + std::string(e.description()));
  }
#else
  toml::parse_result parsed = toml::parse(text, std::string_view(path));
  if (!parsed) {
    return error_at(path, parsed.error().source().begin, "",
                    "malformed TOML: " + std::string(parsed.error().description()));
  }
  return std::move(parsed).table();
#endif
}
namespace {

// The earlier of a key's and its value's positions: the key for `a = 1`, the header's `[` for `[a]`.
toml::source_position position_of(const toml::key& key, const toml::node& node) {
  const toml::source_position k = key.source().begin;
  const toml::source_position n = node.source().begin;
  if (!n) return k;
  if (!k) return n;
  return n.line < k.line || (n.line == k.line && n.column < k.column) ? n : k;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string int_expectation(int64_t min, int64_t max, bool too_large) {
  const bool storage_limit =
      max == std::numeric_limits<int32_t>::max() || max == std::numeric_limits<int64_t>::max();
  if (too_large && storage_limit) return "an integer <= " + std::to_string(max);
  if (storage_limit) return "an integer >= " + std::to_string(min);
  return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string number_expectation(double min, bool min_inclusive, double max, bool too_large) {
  if (too_large) return "a number <= " + format_number(max);
  return std::string("a number ") + (min_inclusive ? ">= " : "> ") + format_number(min);
}

}  // namespace

std::string format_where(const std::string& path, const toml::source_position& pos) {
  if (pos.line == 0) return path;
  return path + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

Error error_at(const std::string& path, const toml::source_position& pos, std::string_view key,
               std::string_view message) {
  std::string text = format_where(path, pos) + ": ";
  if (!key.empty()) text.append(key).append(": ");
  text.append(message);
  return Error{std::move(text)};
}

std::string plain_value(const toml::node& node) {
  if (const auto* s = node.as_string()) return s->get();
  return describe_value(node);
}

std::string describe_value(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::integer:
      return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point: {
      const double x = node.as_floating_point()->get();
      if (!std::isfinite(x)) return format_number(x);
      char buf[32];
      const auto res = std::to_chars(buf, buf + sizeof buf, x);
      std::string s(buf, res.ptr);
      // Keep a float looking like a float: 3.0, not 3, where an integer was expected.
      if (s.find_first_of(".e") == std::string::npos) s += ".0";
      return s;
    }
    case toml::node_type::string:
      return servesim::quoted(node.as_string()->get());
    case toml::node_type::boolean:
      return node.as_boolean()->get() ? "true" : "false";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

TableFields::TableFields(const toml::table& table, const std::string& path, std::string name)
    : table_(table), path_(path), name_(std::move(name)) {}

std::string TableFields::key_name(std::string_view key) const {
  return name_.empty() ? std::string(key) : name_ + "." + std::string(key);
}

int32_t TableFields::line() const { return static_cast<int32_t>(table_.source().begin.line); }

Error TableFields::error(std::string_view message) const {
  return error_at(path_, table_.source().begin, name_, message);
}

Error TableFields::error_at_key(std::string_view key, std::string_view message) const {
  const toml::node* node = table_.get(key);
  const toml::source_position pos = node ? node->source().begin : table_.source().begin;
  return error_at(path_, pos, key_name(key), message);
}

Error TableFields::expected(std::string_view key, std::string_view what) const {
  const toml::node* node = table_.get(key);
  std::string message = "expected " + std::string(what);
  if (node) message += ", got " + describe_value(*node);
  return error_at_key(key, message);
}

Status TableFields::check_known(std::initializer_list<std::string_view> known,
                                std::string_view context) const {
  const toml::key* first = nullptr;
  toml::source_position first_pos{};
  for (auto&& [key, node] : table_) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key.str() == k;
    if (ok) continue;
    const toml::source_position pos = position_of(key, node);
    // toml::table iterates in key order; report the unknown key that comes first in the file.
    if (!first || pos.line < first_pos.line ||
        (pos.line == first_pos.line && pos.column < first_pos.column)) {
      first = &key;
      first_pos = pos;
    }
  }
  if (!first) return Ok{};
  std::string message = "unknown key";
  if (!context.empty()) message.append(" ").append(context);
  message += " (known: ";
  bool comma = false;
  for (std::string_view k : known) {
    if (comma) message += ", ";
    message.append(k);
    comma = true;
  }
  message += ")";
  return error_at(path_, first_pos, key_name(first->str()), message);
}

Status TableFields::require(std::string_view key) const {
  if (has(key)) return Ok{};
  return error("missing required key '" + std::string(key) + "'");
}

Result<std::optional<int64_t>> TableFields::integer(std::string_view key, int64_t min,
                                                    int64_t max) const {
  const toml::node* node = table_.get(key);
  if (!node) return std::optional<int64_t>{};
  if (!node->is_integer()) return expected(key, int_expectation(min, max, false));
  const int64_t v = node->as_integer()->get();
  if (v < min || v > max) return expected(key, int_expectation(min, max, v > max));
  return std::optional<int64_t>{v};
}

Result<std::optional<double>> TableFields::number(std::string_view key, double min,
                                                  bool min_inclusive, double max) const {
  const toml::node* node = table_.get(key);
  if (!node) return std::optional<double>{};
  double v;
  if (node->is_integer()) {
    v = static_cast<double>(node->as_integer()->get());
  } else if (node->is_floating_point()) {
    v = node->as_floating_point()->get();
  } else {
    return expected(key, number_expectation(min, min_inclusive, max, false));
  }
  const bool too_small = min_inclusive ? !(v >= min) : !(v > min);  // also catches nan
  if (too_small || !std::isfinite(v)) {
    return expected(key, number_expectation(min, min_inclusive, max, false));
  }
  if (v > max) return expected(key, number_expectation(min, min_inclusive, max, true));
  return std::optional<double>{v};
}

Result<std::optional<std::string>> TableFields::string(std::string_view key) const {
  const toml::node* node = table_.get(key);
  if (!node) return std::optional<std::string>{};
  if (!node->is_string() || node->as_string()->get().empty()) {
    return expected(key, "a non-empty string");
  }
  return std::optional<std::string>{node->as_string()->get()};
}

Result<const toml::table*> TableFields::subtable(std::string_view key) const {
  const toml::node* node = table_.get(key);
  if (!node) return static_cast<const toml::table*>(nullptr);
  if (!node->is_table()) return expected(key, "a table ([" + key_name(key) + "])");
  return node->as_table();
}

}  // namespace servesim
