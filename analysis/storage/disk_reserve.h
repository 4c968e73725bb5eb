// Room kept on a database's file system for a run's last words. A full disk stops a run's rows in
// the middle, and then the same full disk refuses the few pages that would record that the run
// failed and why: the row would say `running` forever. So a writer keeps a file of kBytes beside
// the database while it has it open ("<db>-reserve-<host>-<pid>-<n>", as SQLite keeps its -wal
// and -shm files there), gives it back when a write fails for want of room, and writes the
// failure into the room it leaves. The file is removed when the writer closes; one that a killed
// process left behind is removed by the next writer on the same host.
#pragma once

#include <cstdint>
#include <string>

namespace servesim {

class DiskReserve {
 public:
  static constexpr int64_t kBytes = 1 << 20;

  // Makes the reserve beside `db_path` (nothing when there is no room for it: it only helps).
  explicit DiskReserve(const std::string& db_path);
  ~DiskReserve();
  DiskReserve(const DiskReserve&) = delete;
  DiskReserve& operator=(const DiskReserve&) = delete;

  // Removes the file, giving its room to the file system; false when there was none to give.
  bool release();
  // Whether the file is there (made, and not yet released).
  bool held() const { return !path_.empty(); }

 private:
  std::string path_;  // "" when none is held
};

}  // namespace servesim
