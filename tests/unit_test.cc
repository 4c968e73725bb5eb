#include "backends/unit.h"

#include <gtest/gtest.h>

#include "backends/registry.h"

namespace servesim {
namespace {

TEST(UnitBackend, EveryIterationCostsOneUnitWhateverItHolds) {
  UnitBackend unit;
  Sequence a, b;
  Batch small, big;
  small.items.push_back({&a, 1, 10});
  big.items.push_back({&a, 4096, 0});
  big.items.push_back({&b, 1, 100000});
  EXPECT_EQ(unit.run(small).duration, kNsPerSecond);
  EXPECT_EQ(unit.run(big).duration, kNsPerSecond);
  EXPECT_EQ(unit.run(big).predicted, -1);
  EXPECT_EQ(unit.kv_blocks(16), -1);  // unlimited unless the run sets kv.blocks
  EXPECT_TRUE(unit.counts_steps());
}

TEST(BackendRegistry, FindsUnitAndRooflineAndExplainsTheOthers) {
  ASSERT_TRUE(find_backend("unit").ok());
  ASSERT_TRUE(find_backend("roofline").ok());
  ASSERT_TRUE(find_backend("cpu").ok());
  Result<const BackendInfo*> cuda = find_backend("cuda");
#ifdef SERVESIM_HAVE_CUDA
  EXPECT_TRUE(cuda.ok());
#else
  ASSERT_FALSE(cuda.ok());
  EXPECT_NE(cuda.error().message.find("not built"), std::string::npos);
#endif
  Result<const BackendInfo*> typo = find_backend("unti");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().message.find("known: roofline, cpu"), std::string::npos);
  EXPECT_NE(typo.error().message.find("unit"), std::string::npos);
}

}  // namespace
}  // namespace servesim
