#include "sim/config/options.h"

#include "sim/config/toml_fields.h"

#include <cmath>
#include <sstream>

namespace servesim {

std::string where(const toml::node& node) {
  const toml::source_region& src = node.source();
  if (src.begin.line == 0) return "command line";
  std::ostringstream out;
  if (src.path) out << *src.path << ':';
  out << src.begin.line << ':' << src.begin.column;
  return out.str();
}

OptionReader::OptionReader(const toml::table& table, std::string prefix)
    : table_(table), prefix_(std::move(prefix)) {}

std::string OptionReader::full(std::string_view key) const {
  return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
}

void OptionReader::fail(const toml::node& at, std::string_view key, std::string_view expected) {
  if (!ok()) return;
  error_.message = where(at) + ": " + full(key) + ": expected " + std::string(expected) + ", got " +
                   describe_value(at);
}

const toml::node* OptionReader::find(std::string_view key) {
  known_.insert(std::string(key));
  return ok() ? table_.get(key) : nullptr;
}

int64_t OptionReader::integer(std::string_view key, int64_t def, int64_t lo, int64_t hi) {
  const toml::node* n = find(key);
  if (n == nullptr) return def;
  std::ostringstream want;
  want << "an integer";
  if (hi == INT64_MAX) want << " >= " << lo;
  else want << " in [" << lo << ", " << hi << "]";
  const auto* v = n->as_integer();
  if (v == nullptr || v->get() < lo || v->get() > hi) {
    fail(*n, key, want.str());
    return def;
  }
  return v->get();
}

double OptionReader::number(std::string_view key, double def, double lo, double hi) {
  const toml::node* n = find(key);
  if (n == nullptr) return def;
  double x = 0;
  if (const auto* i = n->as_integer()) x = static_cast<double>(i->get());
  else if (const auto* f = n->as_floating_point()) x = f->get();
  else x = std::nan("");
  if (std::isnan(x) || x < lo || x > hi) {
    std::ostringstream want;
    want << "a number";
    if (std::isinf(hi)) want << " >= " << lo << (hi > 0 ? " (or inf)" : "");
    else want << " in [" << lo << ", " << hi << "]";
    fail(*n, key, want.str());
    return def;
  }
  return x;
}

bool OptionReader::boolean(std::string_view key, bool def) {
  const toml::node* n = find(key);
  if (n == nullptr) return def;
  const auto* b = n->as_boolean();
  if (b == nullptr) {
    fail(*n, key, "true or false");
    return def;
  }
  return b->get();
}

void OptionReader::refuse(std::string_view key, std::string_view why) {
  const toml::node* n = find(key);
  if (n == nullptr || !ok()) return;
  error_.message = where(*n) + ": " + full(key) + ": " + std::string(why);
}

std::string OptionReader::string(std::string_view key, std::string def) {
  const toml::node* n = find(key);
  if (n == nullptr) return def;
  const auto* s = n->as_string();
  if (s == nullptr || s->get().empty()) {
    fail(*n, key, "a non-empty string");
    return def;
  }
  return s->get();
}

std::string OptionReader::choice(std::string_view key, std::string def,
                                 std::initializer_list<std::string_view> allowed) {
  const toml::node* n = find(key);
  if (n == nullptr) return def;
  std::string list;
  for (std::string_view a : allowed) list += (list.empty() ? "" : " | ") + ("'" + std::string(a) + "'");
  const auto* s = n->as_string();
  if (s != nullptr) {
    for (std::string_view a : allowed) {
      if (s->get() == a) return s->get();
    }
  }
  fail(*n, key, "one of " + list);
  return def;
}

const toml::table* OptionReader::table(std::string_view key) {
  const toml::node* n = find(key);
  if (n == nullptr) return nullptr;
  if (!n->is_table()) {
    fail(*n, key, "a table");
    return nullptr;
  }
  return n->as_table();
}

void OptionReader::reject_unknown() {
  if (!ok()) return;
  for (const auto& [k, v] : table_) {
    if (known_.count(std::string(k.str())) != 0) continue;
    std::string list;
    for (const std::string& s : known_) list += (list.empty() ? "" : ", ") + s;
    error_.message = where(v) + ": " + full(k.str()) + ": unknown key (known: " + list + ")";
    return;
  }
}

}  // namespace servesim
