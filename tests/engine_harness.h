// Shared by the CPU and CUDA model-runner tests: the tiny model, random token ids, and a sequence as
// the scheduler sees it.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backends/model.h"

namespace servesim::testing {

inline ModelSpec tiny_model() {
  auto m = load_model(SERVESIM_PROJECT_DIR "/data/models/tiny.json");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.value();
}

inline std::vector<int32_t> random_tokens(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 256);
  return t;
}

// A sequence as the scheduler sees it: its tokens, its block table, and how many are cached.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int32_t computed = 0;
};

}  // namespace servesim::testing
