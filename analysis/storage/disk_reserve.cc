#include "analysis/storage/disk_reserve.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "analysis/storage/database.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

// Removes the reserves of this host's processes that are gone: "<name>-reserve-<host>-<pid>-<n>".
void remove_abandoned(const fs::path& db, const std::string& host) {
  const std::string prefix = db.filename().string() + "-reserve-" + host + "-";
  std::error_code ec;
  const fs::path folder = db.has_parent_path() ? db.parent_path() : fs::path(".");
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

}  // namespace

DiskReserve::DiskReserve(const std::string& db_path) {
  static std::atomic<int64_t> made{0};
  const std::string host = this_host();
  remove_abandoned(db_path, host);
  const std::string path = db_path + "-reserve-" + host + "-" + std::to_string(::getpid()) + "-" +
                           std::to_string(made.fetch_add(1));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  // Blocks really taken (not a sparse file), so that removing the file gives them back.
  const bool taken = ::posix_fallocate(fd, 0, kBytes) == 0;
  ::close(fd);
  if (taken) {
    path_ = path;
  } else {
    ::unlink(path.c_str());
  }
}

DiskReserve::~DiskReserve() { release(); }

bool DiskReserve::release() {
  if (path_.empty()) return false;
  ::unlink(path_.c_str());
  path_.clear();
  return true;
}

}  // namespace servesim
