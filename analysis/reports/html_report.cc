#include "analysis/reports/html_report.h"

#include <memory>

#include "analysis/storage/database.h"
#include "analysis/reports/html_report_page.h"
#include "analysis/reports/html_report_sections.h"
#include "sim/io/output_file.h"

namespace servesim {

Status write_html_report(const HtmlReportOptions& options, OutputFile& file, std::ostream& log) {
  if (options.sweep_id && !options.run_ids.empty()) return Error{"give --run or --sweep, not both"};
  // Before the database is read: a typo in the path costs no time and writes nothing.
  if (Status s = file.check(); !s.ok()) return s;
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(options.db_path);
  if (!opened.ok()) return opened.error();
  Database& db = *opened.value();

  Result<html::Page> page = Error{""};
  if (options.sweep_id) {
    page = html::sweep_page(db, options.sweep_id);
  } else {
    Result<std::vector<html::ReportRun>> runs = html::read_report_runs(db, options.run_ids);
    if (!runs.ok()) return runs.error();
    page = html::runs_page(db, runs.value());
    for (const html::ReportRun& r : runs.value()) {
      if (!options.bootstrap || !page.ok()) break;
      Result<BootstrapResult> b = read_bootstrap(db, r.id, r.unit(), *options.bootstrap);
      if (b.ok()) {
        page.value().tables.push_back(html::bootstrap_table(r, b.value()));
      } else {
        page.value().banners.push_back({false, "No bootstrap for " + r.label() + ": " + b.error().message});
      }
    }
  }
  if (!page.ok()) return page.error();
  const std::string text = html::render_page(page.value());
  if (Status s = file.write(text); !s.ok()) return s;
  log << "Wrote " << file.path() << " (" << (text.size() + 1023) / 1024 << " KiB, "
      << html::chart_count(page.value()) << " charts)\n";
  return Ok{};
}

Status write_html_report(const HtmlReportOptions& options, std::ostream& log) {
  OutputFile file("--html", options.out_path, {{"--db", options.db_path}});
  return write_html_report(options, file, log);
}

}  // namespace servesim
