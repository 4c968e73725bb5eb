#include "analysis/html_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "analysis/database.h"
#include "analysis/html_report_page.h"
#include "analysis/html_report_sections.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

std::string cannot_write(const std::string& path) { return "cannot write the report to " + path + ": "; }

// The folder the report goes to must exist and be writable: checked before the database is read,
// so that a typo in the path costs no time and writes nothing.
Status check_destination(const std::string& out_path) {
  if (out_path.empty()) return Error{"no output file given for the HTML report"};
  std::error_code ec;
  if (fs::is_directory(out_path, ec))
    return Error{cannot_write(out_path) + "it is a directory; give a file name"};
  fs::path dir = fs::path(out_path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::exists(dir, ec)) return Error{cannot_write(out_path) + "no directory " + dir.string()};
  if (!fs::is_directory(dir, ec)) return Error{cannot_write(out_path) + dir.string() + " is not a directory"};
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Error{cannot_write(out_path) + "directory " + dir.string() + " is not writable (" +
                 std::strerror(errno) + ")"};
  }
  return Ok{};
}

// Writes `text` to a new file beside `path` and renames it over `path`: readers see the old file or
// the whole new one, never a half-written page, and a failure leaves nothing behind.
Status write_atomically(const std::string& path, const std::string& text) {
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  int fd = -1;
  std::string temp;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temp = (dir / ("." + target.filename().string() + "." + std::to_string(::getpid()) + "-" +
                   std::to_string(attempt) + ".tmp"))
               .string();
    // O_EXCL: never write through a file (or link) that is already there; 0666 less the umask.
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    return Error{cannot_write(path) + "cannot create a file in directory " + dir.string() + " (" +
                 std::strerror(errno) + ")"};
  }
  const auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    return Error{cannot_write(path) + what + " (" + reason + ")"};
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("writing failed");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("writing failed");
  if (::close(fd) != 0) {
    fd = -1;
    return fail("writing failed");
  }
  fd = -1;
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail("renaming the finished file failed");
  return Ok{};
}

}  // namespace

Status write_html_report(const HtmlReportOptions& options, std::ostream& log) {
  if (options.sweep_id && !options.run_ids.empty()) return Error{"give --run or --sweep, not both"};
  if (Status s = check_destination(options.out_path); !s.ok()) return s;
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
  if (Status s = write_atomically(options.out_path, text); !s.ok()) return s;
  log << "Wrote " << options.out_path << " (" << (text.size() + 1023) / 1024 << " KiB, "
      << html::chart_count(page.value()) << " charts)\n";
  return Ok{};
}

}  // namespace servesim
