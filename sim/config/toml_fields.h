// Typed reading of a parsed TOML table, with the messages the workload loader owes its users.
//
// Every Error made here is one line: `PATH:LINE:COL: KEY: what was expected, got WHAT`, where KEY is the
// dotted name of the value ("request[2].output_tokens", "generate.arrival.rate") and WHAT is the value
// as the user wrote it. A TableFields is a view of one table together with the file path and the name
// the table has in messages; it owns nothing, so the table and the path string must outlive it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "sim/format_number.h"
#include "sim/result.h"

namespace servesim {

// The most bytes read_text_file reads by default: far above any configuration, workload or model
// file, and far below a machine's memory.
inline constexpr size_t kMaxTextFileBytes = 64 << 20;

// Ok if `path` names a regular file this process may read; else `PATH: cannot open file (no such
// file | it is a directory | it is not a regular file: a device, a pipe or a socket | permission
// denied ...)`. Every reader of a user's file checks this first, so that /dev/zero or a FIFO is
// refused instead of read forever.
Status check_readable_file(const std::string& path);

// The whole text of a regular file of at most `max_bytes` bytes; errors: check_readable_file's,
// `PATH: is N bytes; the most this reads is M`, `PATH: cannot read file`.
Result<std::string> read_text_file(const std::string& path, size_t max_bytes = kMaxTextFileBytes);

// Parses TOML text; values keep `path` and their positions for messages. A syntax error is
// `PATH:LINE:COL: malformed TOML: ...`.
Result<toml::table> parse_toml(std::string_view text, const std::string& path);

// "PATH:LINE:COL", or just "PATH" when the position is unknown (line 0).
std::string format_where(const std::string& path, const toml::source_position& pos);

// "PATH:LINE:COL: KEY: message"; the "KEY: " part is left out when key is empty.
Error error_at(const std::string& path, const toml::source_position& pos, std::string_view key,
               std::string_view message);

// A value as the user wrote it, for the "got ..." part of a message: -3, 2.5, 3.0, "abc", true,
// a table, an array, a date.
std::string describe_value(const toml::node& node);

// A value as a table cell or a point's label: a string without quotes, anything else as
// describe_value writes it.
std::string plain_value(const toml::node& node);


class TableFields {
 public:
  // `name` is the table's name in messages ("request[2]", "generate.arrival").
  TableFields(const toml::table& table, const std::string& path, std::string name);

  const toml::table& table() const { return table_; }
  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  // The dotted name of one of its keys: "name.key".
  std::string key_name(std::string_view key) const;
  // The source line of the table itself (its [header], or where it was first defined).
  int32_t line() const;

  bool has(std::string_view key) const { return table_.contains(key); }

  // An error at the table's own position: "PATH:LINE:COL: NAME: message".
  Error error(std::string_view message) const;
  // An error at the value of `key`: "PATH:LINE:COL: NAME.KEY: message". REQUIRES: has(key).
  Error error_at_key(std::string_view key, std::string_view message) const;
  // error_at_key(key, "expected EXPECTED, got VALUE"). REQUIRES: has(key).
  Error expected(std::string_view key, std::string_view what) const;

  // Ok if every key of the table is in `known`; else an error at the first unknown key in file order:
  // "NAME.KEY: unknown key (known: a, b, c)" (with `context`, e.g. "for dist = \"normal\"", after
  // "unknown key").
  Status check_known(std::initializer_list<std::string_view> known,
                     std::string_view context = {}) const;
  // Ok if `key` is present, else "NAME: missing required key 'KEY'" at the table's position.
  Status require(std::string_view key) const;

  // Each reader: nullopt when the key is absent, an Error when it is present but of the wrong type or
  // out of range, else the value.
  // An integer in [min, max]. When max is INT32_MAX or INT64_MAX (a storage limit rather than a rule)
  // the message says ">= min" unless the value is too large.
  Result<std::optional<int64_t>> integer(std::string_view key, int64_t min, int64_t max) const;
  // A finite number (integer or float) > min (or >= min when min_inclusive) and <= max.
  Result<std::optional<double>> number(std::string_view key, double min, bool min_inclusive,
                                       double max) const;
  // A non-empty string.
  Result<std::optional<std::string>> string(std::string_view key) const;
  // A sub-table: nullptr when absent, an Error when `key` holds something else.
  Result<const toml::table*> subtable(std::string_view key) const;

 private:
  const toml::table& table_;
  const std::string& path_;
  std::string name_;
};

}  // namespace servesim
