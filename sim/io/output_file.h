// A file that a command writes besides its database: `sim report --html`'s page, the hardware file
// of `sim calibrate --out` and `sim probe --out`, `sim validate --write-simulated`'s vLLM result.
// Every such file goes through one OutputFile, which decides what may be overwritten and how the
// file is written:
//  - Before any work, check() refuses (bad input, exit 2) a path that is a file the command reads or
//    writes besides (its database, an input it was given: compared by device and inode, so that a
//    symlink, `./r.db`, `../dir/r.db` or a hard link is caught; by the resolved path while one of
//    them does not exist yet), the database's journal files, or any existing SQLite database (a file
//    that starts with "SQLite format 3\0"): a report is never worth a database.
//  - write() writes a regular file whole or not at all: a new file beside the target (in the folder
//    of the symlink's target, when the path is a symlink, so that the link stays), written, flushed
//    to disk, closed and renamed over the target, each step checked, the target's permissions kept.
//    A path that is not a regular file (a device such as /dev/null, a pipe, /dev/stdout) is written
//    in place. A failed write leaves the old file as it was and no temporary file behind.
//  - A failed write is the disk's fault, not the input's: write_failed() tells the command to exit 1
//    (kExitFailed) rather than 2, with the message "writing PATH failed: REASON", and not to print
//    "Wrote PATH".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/result.h"

namespace servesim {

class OutputFile {
 public:
  // A file the output must not replace: the option that named it ("--db") and its path.
  struct Protected {
    std::string option;
    std::string path;
  };

  // option: the command-line option that named the file ("--html"), for messages.
  OutputFile(std::string option, std::string path, std::vector<Protected> protect = {});

  const std::string& option() const { return option_; }
  const std::string& path() const { return path_; }

  // Ok if the file may be written. Errors (each naming the option and the path): no path; a
  // directory; a folder that does not exist, is not a folder or cannot be written; the same file
  // as a protected one (or as its -wal, -shm or -journal file); an existing SQLite database.
  Status check() const;

  // check(), then `text` as the whole content of the file (as described above). Errors: check()'s;
  // "writing PATH failed: REASON" when the disk refused (then write_failed() is true).
  Status write(std::string_view text);

  // Whether the last write() failed while writing (not at check()).
  bool write_failed() const { return write_failed_; }

 private:
  Status write_in_place(std::string_view text);
  Status write_by_rename(std::string_view text);
  Error failure(const std::string& reason);

  std::string option_, path_;
  std::vector<Protected> protect_;
  bool write_failed_ = false;
};

// Whether `path` is an existing regular file that starts with SQLite's header.
bool is_sqlite_file(const std::string& path);

// Whether a and b name the same file: the same device and inode when both exist, else the same
// path once made absolute and resolved as far as it exists.
bool same_file(const std::string& a, const std::string& b);

}  // namespace servesim
