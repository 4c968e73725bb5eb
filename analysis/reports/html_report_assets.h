// The files built into `sim` for `sim report --html`, so that a report opens offline: the source of
// each is generated at build time by analysis/reports/embed_assets.cmake (see analysis/CMakeLists.txt).
#pragma once

#include <string_view>

namespace servesim::assets {

// Chart.js 3.9.1, minified, from Debian's libjs-chart.js; and the path it was read from.
std::string_view chartjs();
std::string_view chartjs_path();

// analysis/reports/html_report.js: builds the charts from the page's data and checks that they drew.
std::string_view report_js();
std::string_view report_js_path();

}  // namespace servesim::assets
