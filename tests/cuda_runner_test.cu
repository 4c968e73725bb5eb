// CudaModelRunner against CpuModelRunner on the tiny Llama of data/models/tiny.json with seeded
// random weights: logits agree within bf16's error, and greedy tokens agree (teacher-forced with
// the CPU's tokens) wherever the CPU's top two logits are not a near tie.
#include "kernels/cuda/cuda_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backends/model.h"
#include "kernels/model_runner.h"
#include "kernels/weights.h"
#include "tests/engine_harness.h"

namespace servesim {
namespace {

using namespace servesim::testing;

constexpr int32_t kBlockSize = 4;

struct Chunk {
  Seq* seq;
  int32_t num_tokens;
};

// The step's flat input: each chunk's next tokens; marks them computed.
CpuModelRunner::Input make_input(std::vector<Chunk> chunks, int32_t& next_block) {
  CpuModelRunner::Input in;
  in.cu_seqlens.push_back(0);
  for (Chunk& c : chunks) {
    while (static_cast<int32_t>(c.seq->blocks.size()) * kBlockSize < c.seq->computed + c.num_tokens)
      c.seq->blocks.push_back(next_block++);
    in.max_blocks_per_seq = std::max(in.max_blocks_per_seq,
                                     static_cast<int32_t>(c.seq->blocks.size()));
  }
  for (Chunk& c : chunks) {
    for (int32_t pos = c.seq->computed; pos < c.seq->computed + c.num_tokens; ++pos) {
      in.input_ids.push_back(c.seq->tokens.at(static_cast<size_t>(pos)));
      in.positions.push_back(pos);
      in.slot_mapping.push_back(c.seq->blocks[static_cast<size_t>(pos / kBlockSize)] * kBlockSize +
                                pos % kBlockSize);
    }
    in.cu_seqlens.push_back(static_cast<int32_t>(in.input_ids.size()));
    in.context_lens.push_back(c.seq->computed + c.num_tokens);
    std::vector<int32_t> row = c.seq->blocks;
    row.resize(static_cast<size_t>(in.max_blocks_per_seq), -1);
    in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
    in.sample.push_back(1);
    c.seq->computed += c.num_tokens;
  }
  return in;
}

// Logits agree within 3% of the largest logit's magnitude (at least 1).
void expect_logits_close(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  ASSERT_EQ(gpu.size(), cpu.size());
  double scale = 1;
  for (float v : cpu) scale = std::max(scale, std::fabs(double{v}));
  for (size_t i = 0; i < gpu.size(); ++i)
    ASSERT_NEAR(gpu[i], cpu[i], 3e-2 * scale) << "index " << i;
}

// The gap between the best and second-best logit of row r.
double top2_margin(const std::vector<float>& logits, size_t r, size_t vocab) {
  std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
  std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
  return row[0] - row[1];
}

class CudaRunnerTest : public ::testing::Test {
 protected:
  CudaRunnerTest() : model_(tiny_model()), weights_(random_weights(model_, 42)) {}
  ModelSpec model_;
  ModelWeights weights_;
};

TEST_F(CudaRunnerTest, MixedBatchLogitsMatchCpu) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  CpuModelRunner cpu(model_, weights_, 64, kBlockSize);
  CudaModelRunner gpu(model_, weights_, 64, kBlockSize);
  Seq a{random_tokens(11, 1), {}, 0}, b{random_tokens(6, 2), {}, 0};
  int32_t next_block = 0;
  // Step 1: all of b and the first 7 of a. Step 2: the rest of a (a chunk) and b's decode.
  auto in1 = make_input({{&a, 7}, {&b, 6}}, next_block);
  expect_logits_close(gpu.forward(in1).logits, cpu.forward(in1).logits);
  b.tokens.push_back(5);
  auto in2 = make_input({{&a, 4}, {&b, 1}}, next_block);
  const auto want = cpu.forward(in2);
  const auto got = gpu.forward(in2);
  expect_logits_close(got.logits, want.logits);
  const auto again = gpu.forward(in2, false);  // rewrites the same K and V
  EXPECT_TRUE(again.logits.empty());
  EXPECT_EQ(again.next_tokens, got.next_tokens);
}

TEST_F(CudaRunnerTest, GreedyDecodeMatchesCpuOverLongContext) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  const int32_t num_blocks = 200;  // 800 slots: the decodes read two attention partitions
  CpuModelRunner cpu(model_, weights_, num_blocks, kBlockSize);
  CudaModelRunner gpu(model_, weights_, num_blocks, kBlockSize);
  const size_t vocab = static_cast<size_t>(model_.vocab_size);
  Seq s_cpu{random_tokens(600, 3), {}, 0};
  Seq s_gpu = s_cpu;
  int32_t blocks_cpu = 0, blocks_gpu = 0;
  auto want = cpu.forward(make_input({{&s_cpu, 600}}, blocks_cpu));
  auto got = gpu.forward(make_input({{&s_gpu, 600}}, blocks_gpu));
  for (int step = 0; step < 8; ++step) {
    expect_logits_close(got.logits, want.logits);
    if (top2_margin(want.logits, 0, vocab) > 0.05)
      EXPECT_EQ(got.next_tokens.at(0), want.next_tokens.at(0)) << "step " << step;
    s_cpu.tokens.push_back(want.next_tokens.at(0));  // both continue with the CPU's token
    s_gpu.tokens.push_back(want.next_tokens.at(0));
    want = cpu.forward(make_input({{&s_cpu, 1}}, blocks_cpu));
    got = gpu.forward(make_input({{&s_gpu, 1}}, blocks_gpu));
  }
}

// Decode steps replayed from CUDA graphs (batches padded to the buckets 1, 4 and 16) give the
// eager steps' tokens and logits. Both runners see the same prefill, then decode in lockstep
// with the eager runner's tokens.
TEST_F(CudaRunnerTest, DecodeGraphsMatchEager) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  for (int32_t batch : {1, 3, 9}) {
    SCOPED_TRACE(batch);
    const int32_t num_blocks = 256;
    CudaModelRunner eager(model_, weights_, num_blocks, kBlockSize, /*use_cuda_graphs=*/false);
    CudaModelRunner graph(model_, weights_, num_blocks, kBlockSize, /*use_cuda_graphs=*/true);
    std::vector<Seq> seqs_e, seqs_g;
    for (int32_t i = 0; i < batch; ++i)
      seqs_e.push_back({random_tokens(static_cast<size_t>(5 + 3 * i), 100 + i), {}, 0});
    seqs_g = seqs_e;
    int32_t blocks_e = 0, blocks_g = 0;
    auto chunks = [](std::vector<Seq>& seqs, bool prefill) {
      std::vector<Chunk> c;
      for (Seq& s : seqs)
        c.push_back({&s, prefill ? static_cast<int32_t>(s.tokens.size()) : 1});
      return c;
    };
    auto want = eager.forward(make_input(chunks(seqs_e, true), blocks_e));
    auto got = graph.forward(make_input(chunks(seqs_g, true), blocks_g));
    EXPECT_EQ(graph.num_cuda_graphs(), 0);  // a prefill runs eagerly
    for (int step = 0; step < 4; ++step) {
      ASSERT_EQ(got.next_tokens.size(), static_cast<size_t>(batch));
      ASSERT_EQ(got.logits.size(), want.logits.size());
      double scale = 1;
      for (float v : want.logits) scale = std::max(scale, std::fabs(double{v}));
      for (size_t i = 0; i < want.logits.size(); ++i)
        ASSERT_NEAR(got.logits[i], want.logits[i], 1e-3 * scale) << "step " << step << " at " << i;
      for (size_t r = 0; r < static_cast<size_t>(batch); ++r)  // unless a near tie
        if (top2_margin(want.logits, r, static_cast<size_t>(model_.vocab_size)) > 1e-2)
          EXPECT_EQ(got.next_tokens[r], want.next_tokens[r]) << "step " << step << " row " << r;
      for (int32_t i = 0; i < batch; ++i) {
        const int32_t token = want.next_tokens.at(static_cast<size_t>(i));
        seqs_e[static_cast<size_t>(i)].tokens.push_back(token);
        seqs_g[static_cast<size_t>(i)].tokens.push_back(token);
      }
      want = eager.forward(make_input(chunks(seqs_e, false), blocks_e));
      got = graph.forward(make_input(chunks(seqs_g, false), blocks_g));
      EXPECT_EQ(graph.num_cuda_graphs(), 1) << "step " << step;
      EXPECT_EQ(eager.num_cuda_graphs(), 0);
    }
  }
}

}  // namespace
}  // namespace servesim
