// A hash table from block hashes to int32 values (the prefix tree's chunks by their first
// content's hash, sim/prefix_tree.h): open addressing (linear probing, backward-shift deletion) in
// one flat array, so that many entries cost no allocation each and a lookup touches one or two
// cache lines. Keys are block hashes, never 0 (0 marks an empty slot).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace servesim {

class BlockHashIndex {
 public:
  static constexpr int32_t kMissing = -1;

  size_t size() const { return size_; }

  // The value under `hash`, or kMissing.
  int32_t find(uint64_t hash) const {
    if (slots_.empty()) return kMissing;
    for (size_t i = home(hash);; i = (i + 1) & mask_) {
      if (slots_[i].key == hash) return slots_[i].block;
      if (slots_[i].key == 0) return kMissing;
    }
  }

  // Adds hash -> value unless the hash is present. Returns true if added. REQUIRES: hash != 0.
  bool insert(uint64_t hash, int32_t block) {
    assert(hash != 0);
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();  // load factor at most 3/4
    for (size_t i = home(hash);; i = (i + 1) & mask_) {
      if (slots_[i].key == hash) return false;
      if (slots_[i].key == 0) {
        slots_[i] = {hash, block};
        ++size_;
        return true;
      }
    }
  }

  // Points the present `hash` at another value. REQUIRES: find(hash) != kMissing.
  void assign(uint64_t hash, int32_t block) {
    assert(!slots_.empty());
    size_t i = home(hash);
    while (slots_[i].key != hash) {
      assert(slots_[i].key != 0);
      i = (i + 1) & mask_;
    }
    slots_[i].block = block;
  }

  // Removes `hash` if present.
  void erase(uint64_t hash) {
    if (slots_.empty()) return;
    size_t i = home(hash);
    while (slots_[i].key != hash) {
      if (slots_[i].key == 0) return;
      i = (i + 1) & mask_;
    }
    // Backward shift: pull later entries of the probe run into the hole, so lookups never stop
    // early at it.
    for (size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const size_t h = home(slots_[j].key);
      const bool movable = i <= j ? (h <= i || h > j) : (h <= i && h > j);
      if (movable) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = {};
    --size_;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t block = kMissing;
  };

  size_t home(uint64_t hash) const { return static_cast<size_t>(hash * 0x9e3779b97f4a7c15ULL >> shift_); }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t capacity = old.empty() ? 1024 : old.size() * 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != 0) insert(s.key, s.block);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace servesim
