// The block manager with a hybrid layout (sim/kv_groups.h), worked by hand: blocks that leave a
// sliding window (or a finished chunk) are freed when the request is next allocated for, the
// admission check caps windowed groups, and freeing returns every group's blocks.
#include <gtest/gtest.h>

#include "sim/kv_cache.h"
#include "sim/request.h"

namespace servesim {
namespace {

KvGroups sliding(int64_t window) {
  KvGroups g;
  g.windowed = 1;
  g.window = window;
  return g;
}

TEST(KvCacheHybrid, SlidingWindowBlocksAreFreedAsTheyLeaveTheWindow) {
  BlockManager kv(4, 100, false, FreeOrder::kHashlessFirst, sliding(8));
  ASSERT_TRUE(kv.hybrid());
  Sequence seq;
  seq.prompt_tokens = 20;
  // The prompt's 20 tokens: 5 blocks in the full group, 5 in the sliding one.
  ASSERT_TRUE(kv.allocate(seq, 20));
  EXPECT_EQ(kv.num_used(), 10);
  seq.num_computed = 20;
  seq.num_output = 1;
  // The next token: 20 computed, the window (8) keeps tokens 13..20, so tokens 0..12 are skipped:
  // 3 whole blocks freed (null); then one more block in each group for token 21.
  ASSERT_TRUE(kv.allocate(seq, 21));
  EXPECT_EQ(seq.window_nulls, 3);
  EXPECT_EQ(seq.window_blocks, 6);
  EXPECT_EQ(kv.num_used(), 6 + 3);
  EXPECT_EQ(kv.num_free(), 100 - 9);
  kv.free(seq);
  EXPECT_EQ(kv.num_used(), 0);
  EXPECT_EQ(kv.num_free(), 100);
}

TEST(KvCacheHybrid, ChunkedGroupsFreeWholeChunks) {
  KvGroups g;
  g.windowed = 2;
  g.chunked = true;
  g.window = 8;
  BlockManager kv(4, 100, false, FreeOrder::kHashlessFirst, g);
  Sequence seq;
  seq.prompt_tokens = 20;
  ASSERT_TRUE(kv.allocate(seq, 20));
  EXPECT_EQ(kv.num_used(), 5 + 2 * 5);
  seq.num_computed = 20;
  seq.num_output = 1;
  // 20 computed: the chunk in progress starts at 16, so 16 tokens (4 blocks) are skipped in both
  // chunked groups.
  ASSERT_TRUE(kv.allocate(seq, 21));
  EXPECT_EQ(kv.num_used(), 6 + 2 * (6 - 4));
}

TEST(KvCacheHybrid, AdmissionCapsWindowedGroupsAndAllocationDoesNot) {
  KvGroups g = sliding(8);
  g.extra_full = 1;  // two full-attention groups
  g.set_admission_cap(4, 8, 0);  // 8 - 1 + 8 in-flight tokens: 4 blocks, + 1
  EXPECT_EQ(g.admission_cap, 5);
  BlockManager kv(4, 26, false, FreeOrder::kHashlessFirst, g);
  Sequence seq;
  seq.prompt_tokens = 40;
  // Admission: 10 + 10 full blocks and min(10, 5) sliding ones: 25 of the 26 free.
  EXPECT_TRUE(kv.can_allocate(seq, 40));
  // Its first chunk of 8 tokens: 2 + 2 + 2 blocks.
  ASSERT_TRUE(kv.allocate(seq, 8));
  EXPECT_EQ(kv.num_used(), 6);
  // A state group (Mamba, "none" mode): one block per request, held until it is freed.
  KvGroups m;
  m.state = 3;
  BlockManager mamba(16, 10, false, FreeOrder::kHashlessFirst, m);
  Sequence a;
  a.prompt_tokens = 10;
  ASSERT_TRUE(mamba.allocate(a, 10));
  EXPECT_EQ(mamba.num_used(), 1 + 3);
  a.num_computed = 10;
  ASSERT_TRUE(mamba.allocate(a, 11));
  EXPECT_EQ(mamba.num_used(), 4);
  mamba.free(a);
  EXPECT_EQ(mamba.num_used(), 0);
}

}  // namespace
}  // namespace servesim
