// The CPU model runner on the tiny Llama of data/models/tiny.json with seeded random weights:
// paged, chunked, batched and recomputed runs all give what one dense run from scratch gives.
#include "kernels/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backends/model.h"
#include "kernels/cpu_ops.h"
#include "kernels/weights.h"
#include "tests/engine_harness.h"

namespace servesim {
namespace {

using namespace servesim::testing;

constexpr int32_t kNumBlocks = 64;
constexpr int32_t kBlockSize = 4;

// Hands out blocks from the back of `free`, so the order of `free` decides the layout.
struct BlockPool {
  std::vector<int32_t> free;
  int32_t block_size = kBlockSize;

  static BlockPool in_order(int32_t n, int32_t block_size = kBlockSize) {
    BlockPool p{{}, block_size};
    for (int32_t b = n - 1; b >= 0; --b) p.free.push_back(b);  // block 0 first
    return p;
  }
  void grow(Seq& s, int32_t len) {
    while (static_cast<int32_t>(s.blocks.size()) * block_size < len) {
      s.blocks.push_back(free.back());
      free.pop_back();
    }
  }
  void release(Seq& s) {
    free.insert(free.end(), s.blocks.rbegin(), s.blocks.rend());
    s.blocks.clear();
    s.computed = 0;
  }
};

struct Chunk {
  Seq* seq;
  int32_t num_tokens;  // the next tokens of seq to compute
  bool sample = true;
};

// Builds and runs one step over the chunks, then marks their tokens computed.
CpuModelRunner::Output step(CpuModelRunner& runner, BlockPool& pool,
                            const std::vector<Chunk>& chunks) {
  CpuModelRunner::Input in;
  in.cu_seqlens.push_back(0);
  for (const Chunk& c : chunks) {
    pool.grow(*c.seq, c.seq->computed + c.num_tokens);
    in.max_blocks_per_seq =
        std::max(in.max_blocks_per_seq, static_cast<int32_t>(c.seq->blocks.size()));
  }
  for (const Chunk& c : chunks) {
    for (int32_t pos = c.seq->computed; pos < c.seq->computed + c.num_tokens; ++pos) {
      in.input_ids.push_back(c.seq->tokens.at(static_cast<size_t>(pos)));
      in.positions.push_back(pos);
      in.slot_mapping.push_back(c.seq->blocks[static_cast<size_t>(pos / pool.block_size)] *
                                    pool.block_size + pos % pool.block_size);
    }
    in.cu_seqlens.push_back(static_cast<int32_t>(in.input_ids.size()));
    in.context_lens.push_back(c.seq->computed + c.num_tokens);
    std::vector<int32_t> row = c.seq->blocks;
    row.resize(static_cast<size_t>(in.max_blocks_per_seq), -1);
    in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
    in.sample.push_back(c.sample ? 1 : 0);
  }
  CpuModelRunner::Output out = runner.forward(in);
  for (const Chunk& c : chunks) c.seq->computed += c.num_tokens;
  return out;
}

// Prefills the whole sequence in a fresh runner and returns the last token's logits.
std::vector<float> from_scratch(const ModelSpec& m, const ModelWeights& w,
                                const std::vector<int32_t>& tokens) {
  CpuModelRunner runner(m, w, kNumBlocks, kBlockSize);
  BlockPool pool = BlockPool::in_order(kNumBlocks);
  Seq s{tokens, {}, 0};
  return step(runner, pool, {{&s, static_cast<int32_t>(tokens.size())}}).logits;
}

// Greedy generation with the paged cache: the prompt in one prefill, then one token per step.
// Returns the generated tokens; `logits` gets each step's logits.
std::vector<int32_t> decode(CpuModelRunner& runner, BlockPool& pool, Seq& s, int steps,
                            std::vector<std::vector<float>>* logits = nullptr) {
  std::vector<int32_t> generated;
  auto out = step(runner, pool, {{&s, static_cast<int32_t>(s.tokens.size()) - s.computed}});
  for (int i = 0;; ++i) {
    if (logits != nullptr) logits->push_back(out.logits);
    generated.push_back(out.next_tokens.at(0));
    s.tokens.push_back(out.next_tokens[0]);
    if (i + 1 == steps) break;
    out = step(runner, pool, {{&s, 1}});
  }
  return generated;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rel = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], rel * std::max(1.0, std::fabs(static_cast<double>(b[i]))))
        << "index " << i;
}

class ModelRunnerTest : public ::testing::Test {
 protected:
  ModelRunnerTest() : model_(tiny_model()), weights_(random_weights(model_, 42)) {}
  ModelSpec model_;
  ModelWeights weights_;
};

TEST_F(ModelRunnerTest, TinyModelLoads) {
  EXPECT_EQ(model_.architecture, "LlamaForCausalLM");
  EXPECT_EQ(model_.hidden_size, 64);
  EXPECT_EQ(model_.num_heads, 4);
  EXPECT_EQ(model_.num_kv_heads, 2);
  EXPECT_EQ(model_.head_dim, 16);
  EXPECT_EQ(model_.vocab_size, 256);
  EXPECT_EQ(model_.dtype, DType::kFp32);
  EXPECT_FALSE(model_.tie_word_embeddings);
}

// (a) Decoding with the paged cache gives the tokens of recomputing the whole sequence each step.
TEST_F(ModelRunnerTest, DecodeMatchesRecomputeFromScratch) {
  CpuModelRunner runner(model_, weights_, kNumBlocks, kBlockSize);
  BlockPool pool = BlockPool::in_order(kNumBlocks);
  Seq s{random_tokens(10, 1), {}, 0};
  std::vector<std::vector<float>> logits;
  const auto generated = decode(runner, pool, s, 10, &logits);

  std::vector<int32_t> tokens = random_tokens(10, 1);
  for (size_t i = 0; i < generated.size(); ++i) {
    const auto expected = from_scratch(model_, weights_, tokens);
    expect_close(logits[i], expected);
    const int32_t next = cpu::argmax(expected);
    EXPECT_EQ(generated[i], next) << "step " << i;
    tokens.push_back(next);
  }
}

// (b) A prompt prefilled in chunks gives the last-token logits of one prefill.
TEST_F(ModelRunnerTest, ChunkedPrefillMatchesOnePrefill) {
  const auto prompt = random_tokens(11, 2);
  const auto expected = from_scratch(model_, weights_, prompt);
  for (const auto& chunks : {std::vector<int32_t>{4, 4, 3}, std::vector<int32_t>{3, 5, 3},
                             std::vector<int32_t>{1, 1, 9}, std::vector<int32_t>{10, 1}}) {
    CpuModelRunner runner(model_, weights_, kNumBlocks, kBlockSize);
    BlockPool pool = BlockPool::in_order(kNumBlocks);
    Seq s{prompt, {}, 0};
    CpuModelRunner::Output out;
    for (int32_t n : chunks) out = step(runner, pool, {{&s, n}});
    expect_close(out.logits, expected);
    EXPECT_EQ(out.next_tokens[0], cpu::argmax(expected));
  }
}

// (c) One batch with a decode, a prefill chunk after cached context and a whole prefill gives what
// each gives alone; a sequence not sampled adds no output row.
TEST_F(ModelRunnerTest, MixedBatchMatchesEachAlone) {
  auto setup = [&](CpuModelRunner& runner, BlockPool& pool, Seq& a, Seq& b) {
    a = Seq{random_tokens(10, 3), {}, 0};
    b = Seq{random_tokens(11, 4), {}, 0};
    const auto out = step(runner, pool, {{&a, 10}});
    a.tokens.push_back(out.next_tokens[0]);
    step(runner, pool, {{&b, 4, false}});
  };
  for (bool sample_b : {false, true}) {
    SCOPED_TRACE(sample_b ? "chunk sampled" : "chunk not sampled");
    // Fresh state for each round: a decodes 1, b prefills 5 more, c prefills all 7.
    CpuModelRunner r(model_, weights_, kNumBlocks, kBlockSize);
    BlockPool p = BlockPool::in_order(kNumBlocks);
    Seq ma, mb, mc{random_tokens(7, 5), {}, 0};
    setup(r, p, ma, mb);
    const auto mixed = step(r, p, {{&ma, 1}, {&mb, 5, sample_b}, {&mc, 7}});
    ASSERT_EQ(mixed.next_tokens.size(), sample_b ? 3u : 2u);
    const size_t V = static_cast<size_t>(model_.vocab_size);
    std::vector<std::vector<float>> rows;
    for (size_t i = 0; i < mixed.next_tokens.size(); ++i)
      rows.emplace_back(mixed.logits.begin() + static_cast<std::ptrdiff_t>(i * V),
                        mixed.logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));

    // Each alone, in its own runner.
    CpuModelRunner ra(model_, weights_, kNumBlocks, kBlockSize), rb = ra, rc = ra;
    BlockPool pa = BlockPool::in_order(kNumBlocks), pb = pa, pc = pa;
    Seq sa, sb, sc{random_tokens(7, 5), {}, 0}, unused_a, unused_b;
    setup(ra, pa, sa, unused_b);
    setup(rb, pb, unused_a, sb);
    const auto alone_a = step(ra, pa, {{&sa, 1}});
    const auto alone_b = step(rb, pb, {{&sb, 5}});
    const auto alone_c = step(rc, pc, {{&sc, 7}});
    size_t row = 0;
    expect_close(rows[row], alone_a.logits);
    EXPECT_EQ(mixed.next_tokens[row++], alone_a.next_tokens[0]);
    if (sample_b) {
      expect_close(rows[row], alone_b.logits);
      EXPECT_EQ(mixed.next_tokens[row++], alone_b.next_tokens[0]);
    }
    expect_close(rows[row], alone_c.logits);
    EXPECT_EQ(mixed.next_tokens[row], alone_c.next_tokens[0]);
  }
}

// (d) A preempted request, its cache discarded (its blocks reused by another request) and
// recomputed into different blocks, continues with the tokens it would have produced.
TEST_F(ModelRunnerTest, RecomputeAfterPreemptionContinuesTheSameTokens) {
  const auto prompt = random_tokens(10, 6);
  CpuModelRunner ref_runner(model_, weights_, kNumBlocks, kBlockSize);
  BlockPool ref_pool = BlockPool::in_order(kNumBlocks);
  Seq ref{prompt, {}, 0};
  const auto expected = decode(ref_runner, ref_pool, ref, 12);

  CpuModelRunner runner(model_, weights_, kNumBlocks, kBlockSize);
  BlockPool pool = BlockPool::in_order(kNumBlocks);
  Seq s{prompt, {}, 0};
  auto generated = decode(runner, pool, s, 5);
  const std::vector<int32_t> old_blocks = s.blocks;
  pool.release(s);  // preempted: its blocks go back to the pool...
  Seq other{random_tokens(20, 7), {}, 0};
  step(runner, pool, {{&other, 20}});  // ...and another request overwrites them
  for (int32_t b : old_blocks)
    EXPECT_NE(std::find(other.blocks.begin(), other.blocks.end(), b), other.blocks.end());
  // Resumed: prompt and generated tokens prefilled again, into other blocks.
  const auto rest = decode(runner, pool, s, 7);
  for (int32_t b : s.blocks)
    EXPECT_EQ(std::find(old_blocks.begin(), old_blocks.end(), b), old_blocks.end());
  generated.insert(generated.end(), rest.begin(), rest.end());
  EXPECT_EQ(generated, expected);
}

// (e) Block tables in any order, and any block size, give the same results.
TEST_F(ModelRunnerTest, NonContiguousBlockTablesGiveTheSameResults) {
  const auto prompt = random_tokens(10, 8);
  std::vector<std::vector<float>> expected;
  {
    CpuModelRunner runner(model_, weights_, kNumBlocks, kBlockSize);
    BlockPool pool = BlockPool::in_order(kNumBlocks);
    Seq s{prompt, {}, 0};
    decode(runner, pool, s, 9, &expected);
  }
  BlockPool reversed{{}, kBlockSize};
  for (int32_t b = 0; b < kNumBlocks; ++b) reversed.free.push_back(b);  // highest block first
  BlockPool scattered = BlockPool::in_order(kNumBlocks);
  std::shuffle(scattered.free.begin(), scattered.free.end(), std::mt19937(9));
  for (BlockPool* pool : {&reversed, &scattered}) {
    CpuModelRunner runner(model_, weights_, kNumBlocks, kBlockSize);
    Seq s{prompt, {}, 0};
    std::vector<std::vector<float>> logits;
    decode(runner, *pool, s, 9, &logits);
    EXPECT_FALSE(std::is_sorted(s.blocks.begin(), s.blocks.end()));
    for (size_t i = 0; i < logits.size(); ++i) expect_close(logits[i], expected[i]);
  }
  for (int32_t block_size : {1, 3, 16}) {
    CpuModelRunner runner(model_, weights_, 256 / block_size, block_size);
    BlockPool pool = BlockPool::in_order(256 / block_size, block_size);
    Seq s{prompt, {}, 0};
    std::vector<std::vector<float>> logits;
    decode(runner, pool, s, 9, &logits);
    for (size_t i = 0; i < logits.size(); ++i) expect_close(logits[i], expected[i]);
  }
}

// A Qwen2-style variant (Q/K/V biases, tied embeddings) also decodes as it recomputes.
TEST_F(ModelRunnerTest, BiasAndTiedEmbeddingsDecodeMatchesRecompute) {
  ModelSpec m = model_;
  m.qkv_bias = true;
  m.tie_word_embeddings = true;
  const ModelWeights w = random_weights(m, 7);
  ASSERT_TRUE(w.lm_head.data.empty());
  CpuModelRunner runner(m, w, kNumBlocks, kBlockSize);
  BlockPool pool = BlockPool::in_order(kNumBlocks);
  Seq s{random_tokens(10, 10), {}, 0};
  std::vector<std::vector<float>> logits;
  const auto generated = decode(runner, pool, s, 8, &logits);
  std::vector<int32_t> tokens = random_tokens(10, 10);
  for (size_t i = 0; i < generated.size(); ++i) {
    const auto expected = from_scratch(m, w, tokens);
    expect_close(logits[i], expected);
    tokens.push_back(generated[i]);
  }
}

// The runner against a dense, cache-free forward written out as Hugging Face's LlamaModel does it
// (residual adds after each block, causal attention over contiguous K and V).
TEST_F(ModelRunnerTest, MatchesDenseForward) {
  ModelWeights w = weights_;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> near_one(0.5f, 1.5f);
  for (LayerWeights& l : w.layers) {
    for (float& x : l.input_layernorm.data) x = near_one(rng);
    for (float& x : l.post_attention_layernorm.data) x = near_one(rng);
  }
  for (float& x : w.norm.data) x = near_one(rng);
  const auto tokens = random_tokens(9, 12);
  const size_t n = tokens.size(), H = 64, I = 128, hd = 16, heads = 4, kvh = 2;
  const double eps = model_.rms_norm_eps;

  std::vector<float> r(n * H), h(n * H), q(n * heads * hd), k(n * kvh * hd), v(k.size());
  std::vector<float> attn(q.size()), o(n * H), gate(n * I), up(n * I), act(n * I);
  std::vector<int32_t> positions(n);
  for (size_t t = 0; t < n; ++t) positions[t] = static_cast<int32_t>(t);
  cpu::embedding(tokens, w.embed_tokens.data, 64, r);
  for (const LayerWeights& l : w.layers) {
    cpu::rms_norm(r, l.input_layernorm.data, eps, h);
    cpu::linear(h, l.q_proj.data, {}, 64, 64, q);
    cpu::linear(h, l.k_proj.data, {}, 64, 32, k);
    cpu::linear(h, l.v_proj.data, {}, 64, 32, v);
    cpu::rotary_embedding(positions, q, k, 4, 2, 16, model_.rope_theta);
    for (size_t t = 0; t < n; ++t)
      for (size_t hh = 0; hh < heads; ++hh) {
        const size_t g = hh / 2;
        std::vector<double> p(t + 1);
        double mx = -INFINITY, sum = 0;
        for (size_t c = 0; c <= t; ++c) {
          double d = 0;
          for (size_t i = 0; i < hd; ++i) d += q[(t * heads + hh) * hd + i] * k[(c * kvh + g) * hd + i];
          mx = std::max(mx, p[c] = d / 4.0);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (size_t i = 0; i < hd; ++i) {
          double acc = 0;
          for (size_t c = 0; c <= t; ++c) acc += p[c] / sum * v[(c * kvh + g) * hd + i];
          attn[(t * heads + hh) * hd + i] = static_cast<float>(acc);
        }
      }
    cpu::linear(attn, l.o_proj.data, {}, 64, 64, o);
    for (size_t i = 0; i < r.size(); ++i) r[i] += o[i];
    cpu::rms_norm(r, l.post_attention_layernorm.data, eps, h);
    cpu::linear(h, l.gate_proj.data, {}, 64, 128, gate);
    cpu::linear(h, l.up_proj.data, {}, 64, 128, up);
    for (size_t i = 0; i < act.size(); ++i) act[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    cpu::linear(act, l.down_proj.data, {}, 128, 64, o);
    for (size_t i = 0; i < r.size(); ++i) r[i] += o[i];
  }
  std::vector<float> last(r.end() - 64, r.end()), normed(64), expected(256);
  cpu::rms_norm(last, w.norm.data, eps, normed);
  cpu::linear(normed, w.lm_head.data, {}, 64, 256, expected);

  expect_close(from_scratch(model_, w, tokens), expected, 1e-4);
  // Chunked through the cache too.
  CpuModelRunner runner(model_, w, kNumBlocks, kBlockSize);
  BlockPool pool = BlockPool::in_order(kNumBlocks);
  Seq s{tokens, {}, 0};
  step(runner, pool, {{&s, 5}});
  expect_close(step(runner, pool, {{&s, 4}}).logits, expected, 1e-4);
}

}  // namespace
}  // namespace servesim
