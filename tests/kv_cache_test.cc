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

namespace servesim {
namespace {

// A sequence whose prompt is `segments` (content id, tokens).
struct Prompted {
  std::vector<Segment> segments;
  Sequence seq;
  explicit Prompted(std::vector<Segment> s, int32_t output_id = 99) : segments(std::move(s)) {
    seq.prompt_segments = segments.data();
    seq.num_prompt_segments = static_cast<int32_t>(segments.size());
    for (const Segment& g : segments) seq.prompt_tokens += g.tokens;
    seq.output_id = static_cast<uint64_t>(output_id);
  }
};

TEST(PrefixCache, ReusesTheLongestRunOfCachedLeadingBlocks) {
  BlockManager kv(4, 16, /*prefix_caching=*/true);
  Prompted a({{1, 8}, {2, 4}});  // blocks: [1:0-4] [1:4-8] [2:0-4]
  ASSERT_EQ(kv.cached_prefix_tokens(a.seq), 0);
  ASSERT_TRUE(kv.allocate(a.seq, 12));
  EXPECT_EQ(kv.num_cached(), 3);
  Prompted b({{1, 8}, {3, 6}});  // shares the two blocks of content 1
  EXPECT_EQ(kv.cached_prefix_tokens(b.seq), 8);
  ASSERT_TRUE(kv.allocate(b.seq, 14, 8));
  EXPECT_EQ(b.seq.block_table[0], a.seq.block_table[0]);  // the same physical blocks, shared
  EXPECT_EQ(b.seq.block_table[1], a.seq.block_table[1]);
  EXPECT_EQ(kv.num_used(), 3 + 2);
  kv.free(a.seq);
  EXPECT_EQ(kv.num_used(), 4);  // b still holds the shared blocks
  kv.free(b.seq);
  EXPECT_EQ(kv.num_used(), 0);
  EXPECT_GE(kv.num_cached(), 3);  // freed blocks stay cached
}

TEST(PrefixCache, TheSameContentSplitDifferentlyIsNotTheSameBlock) {
  BlockManager kv(4, 16, true);
  Prompted a({{1, 8}});
  ASSERT_TRUE(kv.allocate(a.seq, 8));
  Prompted other({{5, 8}});
  EXPECT_EQ(kv.cached_prefix_tokens(other.seq), 0);
  Prompted longer({{1, 8}, {6, 1}});
  EXPECT_EQ(kv.cached_prefix_tokens(longer.seq), 8);
  Prompted same({{1, 8}});
  EXPECT_EQ(kv.cached_prefix_tokens(same.seq), 4);  // a full hit recomputes its last block
}

TEST(PrefixCache, OutputBlocksAreCachedForALaterTurnThatRepeatsThem) {
  BlockManager kv(4, 16, true);
  Prompted turn1({{1, 4}}, /*output_id=*/77);
  ASSERT_TRUE(kv.allocate(turn1.seq, 4));
  turn1.seq.num_output = 4;  // generated 4 tokens; their KV is computed up to token 8
  ASSERT_TRUE(kv.allocate(turn1.seq, 8));
  Prompted turn2({{1, 4}, {77, 4}, {9, 3}});
  EXPECT_EQ(kv.cached_prefix_tokens(turn2.seq), 8);
}

TEST(PrefixCache, UnreferencedCachedBlocksAreEvictedLeastRecentlyFreedFirst) {
  BlockManager kv(4, 4, true);
  Prompted x({{1, 8}}), y({{2, 8}});
  ASSERT_TRUE(kv.allocate(x.seq, 8));
  ASSERT_TRUE(kv.allocate(y.seq, 8));
  kv.free(x.seq);  // x's blocks queue first (tail first), then y's
  kv.free(y.seq);
  EXPECT_EQ(kv.num_free(), 4);
  Prompted z({{3, 8}});
  ASSERT_TRUE(kv.allocate(z.seq, 8));  // takes x's two blocks
  Prompted x2({{1, 8}, {4, 1}}), y2({{2, 8}, {4, 1}});
  EXPECT_EQ(kv.cached_prefix_tokens(x2.seq), 0);
  EXPECT_EQ(kv.cached_prefix_tokens(y2.seq), 8);
}

TEST(PrefixCache, ClaimingAnUnreferencedCachedBlockUsesFreeRoom) {
  BlockManager kv(4, 3, true);
  Prompted x({{1, 8}});
  ASSERT_TRUE(kv.allocate(x.seq, 8));
  kv.free(x.seq);
  Prompted y({{1, 8}, {2, 8}});  // 2 cached blocks (free, evictable) + 2 new: 4 > 3
  const int32_t cached = kv.cached_prefix_tokens(y.seq);
  ASSERT_EQ(cached, 8);
  EXPECT_FALSE(kv.can_allocate(y.seq, 16, cached));
  EXPECT_FALSE(kv.allocate(y.seq, 16, cached));
  EXPECT_TRUE(y.seq.block_table.empty());
  EXPECT_TRUE(kv.allocate(y.seq, 12, cached));  // 2 cached + 1 new fit
}

// vLLM 0.33's BlockPool.free_blocks: a freed block without a hash (a partial tail) is reused before
// any cached block, however late it was freed. With FreeOrder::kFifo (vLLM 0.11) it waits behind
// the cached blocks freed before it, and the next allocation evicts one of them.
TEST(PrefixCache, HashlessFreedBlocksAreReusedBeforeCachedOnes) {
  for (const FreeOrder order : {FreeOrder::kHashlessFirst, FreeOrder::kFifo}) {
    BlockManager kv(4, 3, true, order);
    Prompted x({{1, 8}}), w({{2, 1}});
    ASSERT_TRUE(kv.allocate(x.seq, 8));  // two full blocks, cached
    ASSERT_TRUE(kv.allocate(w.seq, 1));  // one partial block, no hash
    kv.free(x.seq);
    kv.free(w.seq);
    Prompted v({{3, 3}});
    ASSERT_TRUE(kv.allocate(v.seq, 3));  // one block
    Prompted x2({{1, 8}, {4, 1}});
    EXPECT_EQ(kv.cached_prefix_tokens(x2.seq), order == FreeOrder::kHashlessFirst ? 8 : 4);
  }
}

// Two blocks computed with the same content are both cached (vLLM's BlockHashToBlockMap keeps
// every copy): a lookup finds the first registered, and evicting one copy leaves the other.
TEST(PrefixCache, EveryCopyOfABlockStaysCachedUntilItIsEvicted) {
  BlockManager kv(4, 4, true);
  Prompted a({{1, 4}, {5, 1}}), b({{1, 4}, {6, 1}});
  ASSERT_TRUE(kv.allocate(a.seq, 4));  // a's copy of content 1, registered first
  ASSERT_TRUE(kv.allocate(b.seq, 4));  // b computed it too (no lookup): a second copy
  const int32_t a_copy = a.seq.block_table[0], b_copy = b.seq.block_table[0];
  EXPECT_NE(a_copy, b_copy);
  EXPECT_EQ(kv.num_cached(), 1);  // one content
  Prompted probe({{1, 4}, {2, 1}});
  ASSERT_EQ(kv.cached_prefix_tokens(probe.seq), 4);
  kv.free(a.seq);  // a's copy queues for eviction first
  kv.free(b.seq);
  Prompted f1({{7, 4}}), f2({{8, 4}}), evict({{9, 4}});
  ASSERT_TRUE(kv.allocate(f1.seq, 4));  // the two never-used blocks: nothing evicted
  ASSERT_TRUE(kv.allocate(f2.seq, 4));
  ASSERT_TRUE(kv.allocate(evict.seq, 4));  // evicts a's copy, the least recently freed
  EXPECT_EQ(evict.seq.block_table[0], a_copy);
  Prompted c({{1, 4}, {2, 1}});
  EXPECT_EQ(kv.cached_prefix_tokens(c.seq), 4);  // b's copy still serves the hit
  kv.free(f1.seq);
  kv.free(f2.seq);
  ASSERT_TRUE(kv.allocate(c.seq, 5, 4));
  EXPECT_EQ(c.seq.block_table[0], b_copy);
  kv.free(c.seq);
  kv.free(evict.seq);
  EXPECT_EQ(kv.num_used(), 0);
}

TEST(PrefixCache, OffWithoutPrefixCaching) {
  BlockManager kv(4, 16, false);
  Prompted a({{1, 8}}), b({{1, 8}, {2, 4}});
  ASSERT_TRUE(kv.allocate(a.seq, 8));
  EXPECT_EQ(kv.cached_prefix_tokens(b.seq), 0);
  EXPECT_EQ(kv.num_cached(), 0);
}

}  // namespace
}  // namespace servesim
