// A disk that fills up, for tests: an SQLite VFS that forwards every call to the default one but
// lets the files it opens grow by at most a quota of bytes in all, then fails the write that would
// pass it with SQLITE_FULL, as a full file system does (a file that shrinks, or is deleted, gives
// its bytes back). While a FullDisk lives it is SQLite's default VFS, so every connection opened
// meanwhile (the runs', the writer's) writes through it.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include <gtest/gtest.h>

namespace servesim::testing {

class FullDisk {
 public:
  // `quota`: the bytes the files may grow by before the disk is full.
  explicit FullDisk(int64_t quota) {
    std::lock_guard<std::mutex> lock(mutex());
    state().left = quota;
    state().refused = 0;
    state().sizes.clear();
    state().real = sqlite3_vfs_find(nullptr);
    vfs_ = *state().real;
    vfs_.zName = "servesim-full-disk";
    vfs_.szOsFile = static_cast<int>(sizeof(File)) + state().real->szOsFile;
    vfs_.xOpen = &open;
    vfs_.xDelete = &remove;
    EXPECT_EQ(sqlite3_vfs_register(&vfs_, 1), SQLITE_OK);
  }
  ~FullDisk() {
    sqlite3_vfs_register(state().real, 1);
    sqlite3_vfs_unregister(&vfs_);
  }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;

  // Frees room: the files may grow by `bytes` more.
  void free(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex());
    state().left += bytes;
  }
  // How many writes were refused.
  int64_t refused() const { return state().refused.load(); }

 private:
  struct State {
    sqlite3_vfs* real = nullptr;
    int64_t left = 0;
    std::atomic<int64_t> refused{0};
    std::unordered_map<std::string, int64_t> sizes;  // each file's size as this VFS saw it
  };
  struct File {
    sqlite3_file base;
    sqlite3_file* real;
    std::string name;
  };
  static State& state() {
    static State s;
    return s;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<File*>(f)->real; }
  static const sqlite3_io_methods& methods(sqlite3_file* f) { return *real(f)->pMethods; }
  static File* self(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

  // Takes the growth of file `f` to `end` bytes from the quota; false when it does not fit.
  static bool grow(sqlite3_file* f, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex());
    int64_t& size = state().sizes[self(f)->name];
    if (end <= size) return true;
    if (end - size > state().left) {
      ++state().refused;
      return false;
    }
    state().left -= end - size;
    size = end;
    return true;
  }
  static void shrink(sqlite3_file* f, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex());
    int64_t& size = state().sizes[self(f)->name];
    if (end < size) {
      state().left += size - end;
      size = end;
    }
  }

  static const sqlite3_io_methods* io() {
    static const sqlite3_io_methods m = {
        3,
        [](sqlite3_file* f) {
          const int rc = methods(f).xClose(real(f));
          self(f)->name.~basic_string();
          return rc;
        },
        [](sqlite3_file* f, void* p, int n, sqlite3_int64 o) { return methods(f).xRead(real(f), p, n, o); },
        [](sqlite3_file* f, const void* p, int n, sqlite3_int64 o) {
          if (!grow(f, o + n)) return SQLITE_FULL;
          return methods(f).xWrite(real(f), p, n, o);
        },
        [](sqlite3_file* f, sqlite3_int64 n) {
          shrink(f, n);
          return methods(f).xTruncate(real(f), n);
        },
        [](sqlite3_file* f, int flags) { return methods(f).xSync(real(f), flags); },
        [](sqlite3_file* f, sqlite3_int64* n) { return methods(f).xFileSize(real(f), n); },
        [](sqlite3_file* f, int l) { return methods(f).xLock(real(f), l); },
        [](sqlite3_file* f, int l) { return methods(f).xUnlock(real(f), l); },
        [](sqlite3_file* f, int* r) { return methods(f).xCheckReservedLock(real(f), r); },
        [](sqlite3_file* f, int op, void* a) {
          // A size hint or chunk growth would grow the file past the quota unseen: not offered.
          if (op == SQLITE_FCNTL_SIZE_HINT || op == SQLITE_FCNTL_CHUNK_SIZE) return SQLITE_NOTFOUND;
          return methods(f).xFileControl(real(f), op, a);
        },
        [](sqlite3_file* f) { return methods(f).xSectorSize(real(f)); },
        [](sqlite3_file* f) { return methods(f).xDeviceCharacteristics(real(f)); },
        [](sqlite3_file* f, int r, int s, int e, void volatile** p) { return methods(f).xShmMap(real(f), r, s, e, p); },
        [](sqlite3_file* f, int o, int n, int flags) { return methods(f).xShmLock(real(f), o, n, flags); },
        [](sqlite3_file* f) { methods(f).xShmBarrier(real(f)); },
        [](sqlite3_file* f, int d) { return methods(f).xShmUnmap(real(f), d); },
        [](sqlite3_file* f, sqlite3_int64 o, int n, void** p) { return methods(f).xFetch(real(f), o, n, p); },
        [](sqlite3_file* f, sqlite3_int64 o, void* p) { return methods(f).xUnfetch(real(f), o, p); },
    };
    return &m;
  }

  static int open(sqlite3_vfs* /*vfs*/, const char* name, sqlite3_file* file, int flags, int* out_flags) {
    File* f = reinterpret_cast<File*>(file);
    f->real = reinterpret_cast<sqlite3_file*>(f + 1);
    new (&f->name) std::string(name != nullptr ? name : "");
    const int rc = state().real->xOpen(state().real, name, f->real, flags, out_flags);
    if (f->real->pMethods == nullptr) {
      f->name.~basic_string();
      f->base.pMethods = nullptr;
      return rc;
    }
    f->base.pMethods = io();
    // A file that exists already counts at its size.
    sqlite3_int64 size = 0;
    if (f->real->pMethods->xFileSize(f->real, &size) == SQLITE_OK) {
      std::lock_guard<std::mutex> lock(mutex());
      state().sizes[f->name] = size;
    }
    return rc;
  }
  static int remove(sqlite3_vfs* /*vfs*/, const char* name, int sync) {
    {
      std::lock_guard<std::mutex> lock(mutex());
      auto it = state().sizes.find(name);
      if (it != state().sizes.end()) {
        state().left += it->second;
        state().sizes.erase(it);
      }
    }
    return state().real->xDelete(state().real, name, sync);
  }

  sqlite3_vfs vfs_{};
};

}  // namespace servesim::testing
