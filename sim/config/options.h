// Typed, checked reading of a TOML table of options: the run configuration and each policy's
// [policy] table. Errors name where the value came from (file:line:col for values read from a file,
// "command line" for --set and flags), the full key, what was expected and what was found. The first
// error wins; later reads return their defaults, so callers read everything and check ok() once:
//
//   OptionReader r(table, "policy");
//   double max_wait = r.seconds("max_wait", 0.0);
//   std::string release = r.choice("release", "each", {"each", "batch"});
//   r.reject_unknown();
//   if (!r.ok()) return r.error();
#pragma once

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "sim/result.h"

namespace servesim {

// "file:line:col" of a node read from a file, or "command line" for one inserted by the program.
std::string where(const toml::node& node);

class OptionReader {
 public:
  // prefix: the dotted path of the table ("policy", "kv"; "" for the top level), for messages.
  OptionReader(const toml::table& table, std::string prefix);

  // An integer in [lo, hi].
  int64_t integer(std::string_view key, int64_t def, int64_t lo, int64_t hi);
  // A number (integer or float) in [lo, hi]; inf allowed when hi is inf.
  double number(std::string_view key, double def, double lo, double hi);
  // true or false.
  bool boolean(std::string_view key, bool def);
  // A non-empty string.
  std::string string(std::string_view key, std::string def);
  // One of the given strings.
  std::string choice(std::string_view key, std::string def, std::initializer_list<std::string_view> allowed);
  // A sub-table; nullptr if absent (an error if present but not a table).
  const toml::table* table(std::string_view key);
  // Marks a key as known without reading it.
  void allow(std::string_view key) { known_.insert(std::string(key)); }
  // True if the table sets `key`.
  bool has(std::string_view key) const { return table_.contains(key); }
  // Fails on `key`, if the table sets it, with "where: prefix.key: <why>".
  void refuse(std::string_view key, std::string_view why);

  // Every key of the table that no read above asked for is an error listing the known keys.
  void reject_unknown();

  bool ok() const { return error_.message.empty(); }
  const Error& error() const { return error_; }
  void fail(const toml::node& at, std::string_view key, std::string_view expected);

 private:
  const toml::node* find(std::string_view key);
  std::string full(std::string_view key) const;

  const toml::table& table_;
  std::string prefix_;
  std::set<std::string> known_;
  Error error_;
};

}  // namespace servesim
