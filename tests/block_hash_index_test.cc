#include "sim/block_hash_index.h"

#include <random>
#include <unordered_map>

#include <gtest/gtest.h>

namespace servesim {
namespace {

TEST(BlockHashIndex, FindsWhatWasInsertedAndKeepsTheFirst) {
  BlockHashIndex index;
  EXPECT_EQ(index.find(42), BlockHashIndex::kMissing);
  EXPECT_TRUE(index.insert(42, 7));
  EXPECT_FALSE(index.insert(42, 8));  // a hash already cached keeps its block
  EXPECT_EQ(index.find(42), 7);
  EXPECT_EQ(index.size(), 1u);
  index.erase(42);
  index.erase(42);
  EXPECT_EQ(index.find(42), BlockHashIndex::kMissing);
  EXPECT_EQ(index.size(), 0u);
}

TEST(BlockHashIndex, AssignRepointsAPresentHash) {
  BlockHashIndex index;
  ASSERT_TRUE(index.insert(42, 7));
  index.assign(42, 9);
  EXPECT_EQ(index.find(42), 9);
  EXPECT_EQ(index.size(), 1u);
}

// Random inserts and erases against std::unordered_map, with keys crowded into few home slots so
// that probe runs wrap and backward-shift deletion is exercised.
TEST(BlockHashIndex, AgreesWithAReferenceMapUnderChurn) {
  std::mt19937_64 rng(7);
  BlockHashIndex index;
  std::unordered_map<uint64_t, int32_t> ref;
  for (int step = 0; step < 200000; ++step) {
    const uint64_t key = 1 + rng() % 5000;
    if (rng() % 3 == 0) {
      index.erase(key);
      ref.erase(key);
    } else {
      const auto block = static_cast<int32_t>(step);
      EXPECT_EQ(index.insert(key, block), ref.emplace(key, block).second);
    }
    if (step % 997 == 0) {
      for (uint64_t k = 1; k <= 5000; ++k) {
        auto it = ref.find(k);
        ASSERT_EQ(index.find(k), it == ref.end() ? BlockHashIndex::kMissing : it->second) << k;
      }
    }
  }
  EXPECT_EQ(index.size(), ref.size());
}

}  // namespace
}  // namespace servesim
