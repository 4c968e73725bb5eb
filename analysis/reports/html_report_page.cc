#include "analysis/reports/html_report_page.h"

#include <algorithm>
#include <cstdlib>

#include "analysis/reports/html_report_assets.h"

namespace servesim::html {
namespace {

// Plain CSS, no framework: cards in a grid two wide on a laptop screen, one on a phone.
constexpr std::string_view kStyle = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1400px; padding: 12px 20px;
       color: #222; background: #f6f7f9; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 17px; margin: 22px 0 8px; }
h3 { font-size: 14px; margin: 0 0 6px; display: flex; justify-content: space-between; }
.sub { color: #666; margin: 0 0 10px; }
.banner { padding: 8px 12px; border-radius: 6px; margin: 8px 0; white-space: pre-wrap; }
.warning { background: #fff4d6; border: 1px solid #e8c66a; }
.alert { background: #fde2e1; border: 1px solid #e08b86; font-weight: 600; }
.tables { display: grid; grid-template-columns: repeat(2, minmax(0, max-content)); grid-template-rows: auto 1fr; gap: 14px;
          align-items: start; }
.tables .card:nth-child(2) { grid-row: span 2; }  /* a runs page: run and latency left, metrics right */
.tables .card { min-width: 0; }
.tables .card:only-child { grid-column: 1 / -1; }
@media (max-width: 1000px) { .tables { grid-template-columns: minmax(0, 1fr); } }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 14px;
        align-items: start; }
.card { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 10px 12px; }
.chart { position: relative; height: 300px; }
.caption, .note, .footnote { color: #555; font-size: 12.5px; margin: 6px 0 0; }
.note { font-size: 14px; padding: 24px 8px; text-align: center; }
.answer { background: #e6f4ea; border: 1px solid #8cc79a; border-radius: 8px; padding: 10px 14px; margin: 10px 0; }
.answer .label { font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: #2d6a3e; }
.answer .text { font-size: 18px; font-weight: 600; overflow-wrap: anywhere; }
.answer .question { color: #444; font-size: 13px; margin-top: 2px; }
.tables .card.wide { grid-column: 1 / -1; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
td, th { padding: 3px 8px; border-bottom: 1px solid #eceff2; text-align: right; }
.wide table { font-size: 13px; }
.wide td, .wide th { padding: 3px 6px; }
td { white-space: nowrap; }
th { vertical-align: bottom; min-width: 3em; }
td:first-child, th:first-child, td.l, th.l { text-align: left; }
td:first-child { color: #444; }
td.long { white-space: normal; overflow-wrap: anywhere; min-width: 9em; max-width: 32em; }
.wide td.long { min-width: 14em; }
tr.best td { background: #e6f4ea; font-weight: 600; }
.scroll { overflow-x: auto; max-width: 100%; }
button + button { margin-left: 4px; }
button { font-size: 11px; border: 1px solid #ccd; background: #f4f5f8; border-radius: 4px; cursor: pointer; }
)css";

// A cell longer than this wraps within its column (a workload's path, an error, a verdict); shorter
// ones (a100-80gb, "miss: overloaded") stay on one line.
constexpr size_t kLongCell = 24;

// A header may break after _ and . (cost_per_million_output_tokens), so that it is no wider than
// its column's numbers.
std::string header_html(const std::string& h) {
  std::string out;
  for (const char c : escape_html(h)) {
    out += c;
    if (c == '_' || c == '.') out += "<wbr>";
  }
  return out;
}

// Whether a cell reads as a number ("-" for none, "12.5", "1,024", "+3.1%", "7 ms"), which is
// aligned right; other columns' text is aligned left.
bool numeric_cell(const std::string& c) {
  if (c.empty() || c == "-") return true;
  const char* p = c.c_str();
  char* end = nullptr;
  std::strtod(p + (c[0] == '+' ? 1 : 0), &end);
  return end != p && (*end == '\0' || *end == ' ' || *end == '%' || *end == ',');
}

// A column is text when most of its cells are (a column of numbers with a "yes" stays numbers;
// the first is always left, by the style sheet).
std::vector<bool> text_columns(const Table& t) {
  std::vector<int> words(t.header.size(), 0), numbers(t.header.size(), 0);
  for (const auto& row : t.rows) {
    for (size_t c = 1; c < row.size() && c < words.size(); ++c) {
      if (row[c].empty() || row[c] == "-") continue;
      ++(numeric_cell(row[c]) ? numbers[c] : words[c]);
    }
  }
  std::vector<bool> text(t.header.size(), false);
  for (size_t c = 1; c < text.size(); ++c) text[c] = words[c] > numbers[c];
  return text;
}

void append_table(std::string& out, const Table& t) {
  out += std::string("<div class=\"card") + (t.wide ? " wide" : "") + "\"><h3>" + escape_html(t.title) +
         "</h3><div class=\"scroll\"><table><tr>";
  const std::vector<bool> text = text_columns(t);
  for (size_t c = 0; c < t.header.size(); ++c) {
    out += (text[c] ? "<th class=\"l\">" : "<th>") + header_html(t.header[c]) + "</th>";
  }
  out += "</tr>\n";
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const bool best = std::find(t.highlight.begin(), t.highlight.end(), r) != t.highlight.end();
    out += best ? "<tr class=\"best\">" : "<tr>";
    for (size_t c = 0; c < t.rows[r].size(); ++c) {
      const std::string& cell = t.rows[r][c];
      const std::string value = escape_html(cell);
      const bool left = c < text.size() && text[c];
      if (cell.size() > kLongCell) {
        out += std::string("<td class=\"long") + (left ? " l" : "") + "\" title=\"" + value + "\">" + value + "</td>";
      } else {
        out += (left ? "<td class=\"l\">" : "<td>") + value + "</td>";
      }
    }
    out += "</tr>\n";
  }
  out += "</table></div>";
  if (!t.footnote.empty()) out += "<p class=\"footnote\">" + escape_html(t.footnote) + "</p>";
  out += "</div>\n";
}

// A card; a chart card's canvas names its chart by index in the data blob's `charts`.
void append_card(std::string& out, const Card& c, nlohmann::json& charts) {
  out += "<div class=\"card\"><h3><span>" + escape_html(c.title) + "</span>";
  if (!c.note.empty()) {
    out += "</h3><p class=\"note\">" + escape_html(c.note) + "</p></div>\n";
    return;
  }
  const std::string index = std::to_string(charts.size());
  std::string buttons;
  for (const char* axis : {"x", "y"}) {
    if (c.chart.value(axis == std::string("x") ? "logToggle" : "logToggleY", false)) {
      const bool log = axis == std::string("x") && c.chart.value("logX", false);  // log at first
      buttons += "<button data-log-toggle=\"" + index + "\" data-axis=\"" + axis + "\">" + (log ? "linear " : "log ") +
                 axis + "</button>";
    }
  }
  if (!buttons.empty()) out += "<span>" + buttons + "</span>";
  out += "</h3><div class=\"chart\"><canvas data-chart=\"" + index + "\" role=\"img\" aria-label=\"" +
         escape_html(c.title) + "\"></canvas></div>";
  if (!c.caption.empty()) out += "<p class=\"caption\">" + escape_html(c.caption) + "</p>";
  out += "</div>\n";
  charts.push_back(c.chart);
}

}  // namespace

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_safe_json(const nlohmann::json& j) {
  // Invalid UTF-8 in a stored name is replaced, not thrown: a report never fails on a label.
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

size_t chart_count(const Page& page) {
  size_t n = 0;
  for (const Section& s : page.sections) {
    for (const Card& c : s.cards) n += c.note.empty() ? 1 : 0;
  }
  return n;
}

std::string render_page(const Page& page) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"servesim " SERVESIM_VERSION "\">\n";
  out += "<title>" + escape_html(page.title) + "</title>\n<style>" + std::string(kStyle) + "</style>\n";
  // The report's script goes first: it collects errors from everything after it (Chart.js
  // included), and builds the charts once the whole document is parsed.
  out += "<script>\n" + std::string(assets::report_js()) + "\n</script>\n</head>\n<body>\n";
  out += "<h1>" + escape_html(page.title) + "</h1>\n";
  if (!page.subtitle.empty()) out += "<p class=\"sub\">" + escape_html(page.subtitle) + "</p>\n";
  if (!page.answer.empty()) {
    out += "<div class=\"answer\"><div class=\"label\">Answer</div><div class=\"text\">" +
           escape_html(page.answer) + "</div>";
    if (!page.answer_detail.empty()) out += "<div class=\"question\">" + escape_html(page.answer_detail) + "</div>";
    out += "</div>\n";
  }
  for (const Banner& b : page.banners) {
    out += std::string("<div class=\"banner ") + (b.alert ? "alert" : "warning") + "\">" +
           escape_html(b.text) + "</div>\n";
  }
  out += "<div class=\"tables\">\n";
  for (const Table& t : page.tables) append_table(out, t);
  out += "</div>\n";
  nlohmann::json charts = nlohmann::json::array();
  for (const Section& s : page.sections) {
    if (s.cards.empty()) continue;
    out += "<h2>" + escape_html(s.title) + "</h2>\n<div class=\"grid\">\n";
    for (const Card& c : s.cards) append_card(out, c, charts);
    out += "</div>\n";
  }
  out += "<pre id=\"servesim-selfcheck\" hidden></pre>\n";
  out += "<script type=\"application/json\" id=\"servesim-data\">" +
         script_safe_json(nlohmann::json{{"charts", std::move(charts)}}) + "</script>\n";
  // Chart.js 3.9.1 from Debian's libjs-chart.js, built into `sim` so the page needs no network.
  out += "<script>\n" + std::string(assets::chartjs()) + "\n</script>\n</body></html>\n";
  return out;
}

}  // namespace servesim::html
