// Small helpers for the tables that reports print: CSV quoting and columns aligned as text.
#pragma once

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

namespace servesim {

// A CSV field, quoted (RFC 4180) when it holds a comma, a quote or a newline.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Prints rows (the first is the header) with columns two spaces apart; column i is left-aligned
// when left(i), else right-aligned. Rows may be shorter than the header.
template <typename Left>
void print_aligned(std::ostream& out, const std::vector<std::vector<std::string>>& rows, Left left) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(width[i] - row[i].size(), ' ');
      line += (i ? "  " : "") + (left(i) ? row[i] + (i + 1 < row.size() ? pad : "") : pad + row[i]);
    }
    out << line << '\n';
  }
}

}  // namespace servesim
