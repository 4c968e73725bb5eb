// The page of `sim report --html` as data, and its rendering into one self-contained HTML file.
//
// A Page is what the readers of the database (html_report_sections.h) produce: banners, tables of
// plain text, and sections of cards, each card a chart or, when the database lacks its data, a note
// in its place. Tables fit the page: a long cell (a workload's path, an error) wraps within its
// column, with its whole text as the cell's tooltip, and a table wider than its card scrolls inside
// the card. render_page() turns it into HTML: every text escaped, the charts' data embedded as
// one JSON blob, and the two scripts built into `sim` (html_report_assets.h) inlined, so the file
// opens offline in any browser. Nothing here reads the database.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::html {

struct Card {
  std::string title;
  std::string caption{};      // a line under the chart: what it shows, how its data was reduced
  std::string note{};         // when not empty: shown instead of a chart (what is missing, and why)
  nlohmann::json chart = {};  // the chart, in the form html_report.js reads (see the top of it)
};

struct Section {
  std::string title;
  std::vector<Card> cards{};
};

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as header
  std::string footnote{};
  bool wide = false;                 // the page's whole width (else half, beside another table)
  std::vector<size_t> highlight{};   // rows shown emphasized (a search's answer)
};

struct Banner {
  bool alert = false;  // true: the run failed or is unusable (red); false: a warning (yellow)
  std::string text;
};

struct Page {
  std::string title;
  std::string subtitle{};
  std::string answer{};         // a search's answer, shown first and large
  std::string answer_detail{};  // the question it answers
  std::vector<Banner> banners{};
  std::vector<Table> tables{};
  std::vector<Section> sections{};
};

// The page as one HTML document.
std::string render_page(const Page& page);

// `s` with & < > " ' replaced by character references: safe as element text and attribute value.
std::string escape_html(std::string_view s);

// `j` as JSON text that may sit inside a <script> element: every < > & (which JSON has only inside
// strings) written as \u003c \u003e \u0026, so no "</script" or "<!--" can appear in it.
std::string script_safe_json(const nlohmann::json& j);

// How many cards of the page are charts (the self-check's charts_expected).
size_t chart_count(const Page& page);

}  // namespace servesim::html
