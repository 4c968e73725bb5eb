#include "sim/io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

namespace servesim {
namespace {

namespace fs = std::filesystem;

std::optional<struct stat> stat_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

// The path made absolute and resolved as far as it exists (symlinks, "." and ".."), for comparing
// spellings of a file that does not exist yet.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::path(path).lexically_normal() : p;
}

// The file a write replaces: the symlink's target when the path is one (so that the link stays).
fs::path target_of(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  return ec ? fs::path(path) : canonical;
}

fs::path folder_of(const fs::path& p) { return p.parent_path().empty() ? fs::path(".") : p.parent_path(); }

}  // namespace

bool is_sqlite_file(const std::string& path) {
  const std::optional<struct stat> st = stat_of(path);
  if (!st || !S_ISREG(st->st_mode)) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char header[16] = {};
  const ssize_t n = ::read(fd, header, sizeof header);
  ::close(fd);
  static constexpr char kMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f',
                                      'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
  return n == static_cast<ssize_t>(sizeof header) && std::memcmp(header, kMagic, sizeof kMagic) == 0;
}

bool same_file(const std::string& a, const std::string& b) {
  const std::optional<struct stat> sa = stat_of(a), sb = stat_of(b);
  if (sa && sb) return sa->st_dev == sb->st_dev && sa->st_ino == sb->st_ino;
  return resolved(a) == resolved(b);
}

OutputFile::OutputFile(std::string option, std::string path, std::vector<Protected> protect)
    : option_(std::move(option)), path_(std::move(path)), protect_(std::move(protect)) {}

Status OutputFile::check() const {
  const std::string named = option_ + " " + path_;
  const std::string cannot = "cannot write " + named + ": ";
  if (path_.empty()) return Error{option_ + ": no file given"};
  for (const Protected& p : protect_) {
    if (p.path.empty()) continue;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      if (!same_file(path_, p.path + suffix)) continue;
      return Error{named + ": that is the file of " + p.option + " " + p.path + suffix +
                   ", which this command reads or writes; give another file for " + option_};
    }
  }
  const std::optional<struct stat> st = stat_of(path_);
  if (st && S_ISDIR(st->st_mode)) return Error{cannot + "it is a directory; give a file name"};
  if (st && !S_ISREG(st->st_mode)) return Ok{};  // a device or a pipe: written in place
  if (is_sqlite_file(path_)) {
    return Error{named + ": that is a SQLite database; it is left as it is: give another file for " +
                 option_};
  }
  const fs::path dir = folder_of(target_of(path_));
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Error{cannot + "no directory " + dir.string()};
  if (!fs::is_directory(dir, ec)) return Error{cannot + dir.string() + " is not a directory"};
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Error{cannot + "directory " + dir.string() + " is not writable (" + std::strerror(errno) + ")"};
  }
  return Ok{};
}

Error OutputFile::failure(const std::string& reason) {
  write_failed_ = true;
  return Error{"writing " + path_ + " failed: " + reason};
}

Status OutputFile::write(std::string_view text) {
  write_failed_ = false;
  if (Status s = check(); !s.ok()) return s;
  const std::optional<struct stat> st = stat_of(path_);
  return st && !S_ISREG(st->st_mode) ? write_in_place(text) : write_by_rename(text);
}

namespace {

// Writes all of text to fd; false (errno set) when a write fails or writes nothing.
bool write_all(int fd, std::string_view text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status OutputFile::write_in_place(std::string_view text) {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return failure(std::strerror(errno));
  const bool written = write_all(fd, text);
  const int saved = errno;
  if (::close(fd) != 0 && written) return failure(std::strerror(errno));
  if (!written) return failure(std::strerror(saved));
  return Ok{};
}

Status OutputFile::write_by_rename(std::string_view text) {
  const fs::path target = target_of(path_);
  const fs::path dir = folder_of(target);
  const std::optional<struct stat> old = stat_of(target.string());
  int fd = -1;
  std::string temp;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temp = (dir / ("." + target.filename().string() + "." + std::to_string(::getpid()) + "-" +
                   std::to_string(attempt) + ".tmp"))
               .string();
    // O_EXCL: never write through a file (or a link) that is already there; 0666 less the umask.
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return failure("cannot create a file in " + dir.string() + " (" + std::strerror(errno) + ")");
  const auto fail = [&](const std::string& step) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    return failure(step.empty() ? reason : step + " (" + reason + ")");
  };
  if (old && ::fchmod(fd, old->st_mode & 07777) != 0) return fail("keeping the permissions");
  if (!write_all(fd, text)) return fail("");
  if (::fsync(fd) != 0) return fail("");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("");
  if (::rename(temp.c_str(), target.c_str()) != 0) return fail("renaming the finished file over it");
  return Ok{};
}

}  // namespace servesim
