// `sim report --html FILE`: one self-contained HTML page about one run, several runs compared, or a
// sweep, with its charts drawn in the browser by Chart.js, which is built into `sim` and inlined in
// the page, so the file opens offline and can be mailed or attached to a ticket as it is.
//
// Why Chart.js (3.9.1, Debian's libjs-chart.js): one 200 KB file with no dependencies; canvas
// rendering that stays fast with thousands of points; line, scatter and bar charts and log axes
// out of the box; and it is packaged by Debian, so the build needs no network. Vega would need
// several packages and a spec compiler; d3 in Debian is v3, and is a toolkit for drawing charts by
// hand, not a chart library.
//
// The page carries its data as one JSON blob, reduced so that its size depends on the number of
// charts, not on the run's length (html_report_data.h): a run of a million requests gives a page of
// well under 5 MB. Each page also checks itself once drawn (html_report.js): every chart must have
// drawn marks and no script error may have happened; the result is in <pre id="servesim-selfcheck">
// for a headless browser to read (tests/html_report_browser_test.py).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/reports/bootstrap.h"
#include "sim/io/output_file.h"
#include "sim/result.h"

namespace servesim {

// Every field has a default, so designated initializers may name only some (-Wextra is quiet).
struct HtmlReportOptions {
  std::string db_path = "sim.db";
  std::vector<int64_t> run_ids{};     // empty: the latest run (unless sweep_id is given)
  std::optional<int64_t> sweep_id{};  // a sweep's page instead of runs; 0: the latest sweep
  std::string out_path{};             // the HTML file to write (by the overload without an OutputFile)
  // With it, a runs page adds a table per run: the bootstrap over its requests (analysis/reports/bootstrap.h).
  std::optional<BootstrapOptions> bootstrap{};
};

// Writes the report to `file` (sim/io/output_file.h: whole or not at all; options.out_path is not used)
// and a line saying so to `log`. Errors (nothing written): file.check()'s, before the database is
// read (no path, a folder that does not exist or cannot be written, the database itself or another
// SQLite file); no database at db_path, or not a servesim one; no runs; a run id that does not
// exist (naming the ids that do); no such sweep; both runs and a sweep asked for; a failed write
// (file.write_failed()).
Status write_html_report(const HtmlReportOptions& options, OutputFile& file, std::ostream& log);
// The same to options.out_path (as --html), which may not be the database at options.db_path.
Status write_html_report(const HtmlReportOptions& options, std::ostream& log);

}  // namespace servesim
