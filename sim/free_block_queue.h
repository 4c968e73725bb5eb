// The KV block manager's queue of freed blocks waiting for reuse (sim/kv_cache.h), least recently
// freed first: vLLM's FreeKVCacheBlockQueue. Blocks join at the tail when freed, leave at the head
// when taken for reuse (a cached one is evicted then), and leave from anywhere when a new sequence
// claims a cached one.
//
// vLLM links the blocks into a doubly linked list. Here the queue is a ring of entries with the
// removed ones left as holes; what an entry stands for is the caller's (sim/kv_cache.h: one block,
// or a range of a sequence's blocks freed together, which the caller takes from one by one, so that
// freeing a sequence is one entry and not one per block). Entries are appended at the tail and
// taken off the head, walking memory forward instead of following links; a claim leaves a hole,
// which the head steps over. push_back returns an entry's index, which remove takes; the ring is
// compacted, moving the indices, when the taken entries and the holes outnumber the others (so each
// entry moves O(1) times on average), and the caller is told of every move.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace servesim {

// Entry: a plain struct with an int32_t `block`, never -1, which the queue sets to -1 in a hole.
template <typename Entry>
class FreeBlockQueue {
 public:
  // Appends an entry at the tail; returns its index. REQUIRES: e.block != -1.
  int64_t push_back(const Entry& e) {
    assert(e.block != kHole);
    ring_.push_back(e);
    return static_cast<int64_t>(ring_.size() - 1);
  }

  // The entry at the head, past any holes. REQUIRES: an entry that is not a hole is queued.
  Entry& front() {
    for (; ring_[head_].block == kHole; ++head_) --holes_;
    return ring_[head_];
  }
  // Drops the entry at the head. REQUIRES: front() was called since the last change.
  void pop_front() {
    assert(ring_[head_].block != kHole);
    ++head_;
  }

  // Takes out the entry at `index` (push_back's, or the latest move's). REQUIRES: it is queued.
  void remove(int64_t index) {
    Entry& e = ring_[static_cast<size_t>(index)];
    assert(static_cast<size_t>(index) >= head_ && e.block != kHole);
    e.block = kHole;
    ++holes_;
  }

  // Compacts the ring when it should (see above), calling moved(entry, new_index) for every
  // queued entry, in order. Call it where no index is held across it.
  template <typename Moved>
  void maybe_compact(Moved moved) {
    const size_t kept = ring_.size() - head_ - holes_;
    if (ring_.size() < kCompactAfter || ring_.size() < 2 * kept + kCompactAfter / 2) return;
    size_t out = 0;
    for (size_t i = head_; i < ring_.size(); ++i) {
      if (ring_[i].block == kHole) continue;
      ring_[out] = ring_[i];
      moved(ring_[out], static_cast<int64_t>(out));
      ++out;
    }
    ring_.resize(out);
    head_ = 0;
    holes_ = 0;
  }

 private:
  static constexpr int32_t kHole = -1;
  static constexpr size_t kCompactAfter = 8192;

  std::vector<Entry> ring_;  // from head_ on: the queue in order, holes included
  size_t head_ = 0;
  size_t holes_ = 0;  // holes from head_ on
};

}  // namespace servesim
