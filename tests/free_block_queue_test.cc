#include "sim/free_block_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <random>
#include <vector>

namespace servesim {
namespace {

struct Entry {
  int32_t block;
};

// Random pushes, pops from the head and removals from anywhere against std::list, with enough
// churn that the ring is compacted many times; the indices the queue hands out (and moves) must
// always find the entry they were given for.
TEST(FreeBlockQueue, AgreesWithAListUnderChurn) {
  std::mt19937_64 rng(11);
  FreeBlockQueue<Entry> queue;
  std::list<int32_t> ref;
  std::vector<int64_t> at(5000, -1);  // per block: its index in the queue, or -1
  int32_t next = 0;
  const auto moved = [&](const Entry& e, int64_t index) {
    at[static_cast<size_t>(e.block)] = index;
  };
  for (int step = 0; step < 300000; ++step) {
    const uint64_t op = rng() % 10;
    if (op < 4 || ref.empty()) {  // free a block
      int32_t b = next;
      next = (next + 1) % 5000;
      if (at[static_cast<size_t>(b)] != -1) continue;
      at[static_cast<size_t>(b)] = queue.push_back({b});
      ref.push_back(b);
    } else if (op < 7) {  // take the least recently freed
      const int32_t b = queue.front().block;
      ASSERT_EQ(b, ref.front()) << step;
      queue.pop_front();
      ref.pop_front();
      at[static_cast<size_t>(b)] = -1;
    } else {  // claim one from anywhere
      auto it = ref.begin();
      std::advance(it, static_cast<long>(rng() % ref.size()));
      const int32_t b = *it;
      queue.remove(at[static_cast<size_t>(b)]);
      at[static_cast<size_t>(b)] = -1;
      ref.erase(it);
    }
    queue.maybe_compact(moved);
  }
  // What is left comes out in order.
  while (!ref.empty()) {
    ASSERT_EQ(queue.front().block, ref.front());
    queue.pop_front();
    ref.pop_front();
  }
}

}  // namespace
}  // namespace servesim
