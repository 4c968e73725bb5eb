#include "sim/kv_cache.h"

#include <gtest/gtest.h>

namespace servesim {
namespace {

TEST(BlockManager, AllocatesWholeBlocksAsTokensGrow) {
  BlockManager kv(16, 4);
  Sequence s;
  EXPECT_TRUE(kv.allocate(s, 1));
  EXPECT_EQ(s.block_table.size(), 1u);
  EXPECT_TRUE(kv.allocate(s, 16));  // still one block
  EXPECT_EQ(kv.num_used(), 1);
  EXPECT_TRUE(kv.allocate(s, 17));
  EXPECT_EQ(kv.num_used(), 2);
  EXPECT_EQ(kv.num_free(), 2);
}

TEST(BlockManager, RefusesWithoutPartialAllocation) {
  BlockManager kv(16, 3);
  Sequence a, b;
  ASSERT_TRUE(kv.allocate(a, 32));
  EXPECT_FALSE(kv.can_allocate(b, 33));
  EXPECT_FALSE(kv.allocate(b, 33));
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(kv.num_used(), 2);
  EXPECT_TRUE(kv.allocate(b, 16));
  EXPECT_EQ(kv.num_free(), 0);
}

TEST(BlockManager, FreeReturnsEveryBlockAndIdsAreReused) {
  BlockManager kv(4, 2);
  Sequence a, b;
  ASSERT_TRUE(kv.allocate(a, 8));
  kv.free(a);
  EXPECT_EQ(kv.num_used(), 0);
  EXPECT_TRUE(a.block_table.empty());
  ASSERT_TRUE(kv.allocate(b, 8));
  for (int32_t id : b.block_table) EXPECT_LT(id, 2);  // no fresh ids past the cache's size
  kv.free(b);
  kv.free(b);  // freeing twice is harmless
  EXPECT_EQ(kv.num_used(), 0);
}

TEST(BlockManager, UnlimitedNeverRefusesAndPreallocatesNothing) {
  BlockManager kv(16, BlockManager::kUnlimited);
  EXPECT_TRUE(kv.unlimited());
  Sequence s;
  EXPECT_TRUE(kv.allocate(s, 16 * 100000));
  EXPECT_EQ(kv.num_used(), 100000);
  EXPECT_TRUE(kv.fits_at_all(int64_t{1} << 30));
  kv.free(s);
  EXPECT_EQ(kv.num_used(), 0);
}

TEST(BlockManager, FitsAtAllComparesWithTheWholeCache) {
  BlockManager kv(16, 2);
  EXPECT_TRUE(kv.fits_at_all(32));
  EXPECT_FALSE(kv.fits_at_all(33));
  EXPECT_EQ(kv.blocks_for(0), 0);
  EXPECT_EQ(kv.blocks_for(1), 1);
}

}  // namespace
}  // namespace servesim
