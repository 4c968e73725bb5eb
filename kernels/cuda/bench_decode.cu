// bench_decode: times CudaModelRunner's decode steps and prefills on random bf16 weights and sets
// each beside its napkin math (bytes and FLOPs the step must move and do), the hardware floor
// (max of bytes / peak bandwidth and FLOPs / peak), and the roofline model's prediction.
// Usage: bench_decode HARDWARE.toml MODEL.json...   (one table on stdout)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/hardware.h"
#include "backends/model.h"
#include "backends/roofline.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/cuda_runner.h"

namespace servesim {
namespace {

constexpr int32_t kBlockSize = 16;

// B sequences of `new_tokens` new tokens each, ending at context `ctx`; sequence b owns blocks
// b * per_seq .. (b + 1) * per_seq - 1.
CudaModelRunner::Input make_batch(int32_t batch, int32_t ctx, int32_t new_tokens) {
  CudaModelRunner::Input in;
  const int32_t per_seq = (ctx + kBlockSize - 1) / kBlockSize;
  in.max_blocks_per_seq = per_seq;
  in.cu_seqlens.push_back(0);
  for (int32_t b = 0; b < batch; ++b) {
    for (int32_t pos = ctx - new_tokens; pos < ctx; ++pos) {
      in.input_ids.push_back((b * 7919 + pos) % 1000);
      in.positions.push_back(pos);
      in.slot_mapping.push_back((b * per_seq + pos / kBlockSize) * kBlockSize + pos % kBlockSize);
    }
    in.cu_seqlens.push_back(static_cast<int32_t>(in.input_ids.size()));
    in.context_lens.push_back(ctx);
    for (int32_t k = 0; k < per_seq; ++k) in.block_tables.push_back(b * per_seq + k);
    in.sample.push_back(1);
  }
  return in;
}

// Median wall time of one forward, in seconds.
double time_forward(CudaModelRunner& runner, const CudaModelRunner::Input& in, int reps) {
  for (int i = 0; i < 2; ++i) runner.forward(in, false);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    runner.forward(in, false);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void bench_model(const HardwareSpec& hw, const ModelSpec& m) {
  const double kv_tok = m.kv_bytes_per_token(DType::kBf16);
  const double weights = m.weight_bytes(DType::kBf16);
  size_t free_bytes = 0, total_bytes = 0;
  SERVESIM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double kv_budget = static_cast<double>(free_bytes) - weights - 8e9;  // activations etc.
  const int64_t want_tokens = 256 * 4096;
  const int64_t tokens = std::min<int64_t>(want_tokens, static_cast<int64_t>(kv_budget / kv_tok));
  const int32_t num_blocks = static_cast<int32_t>(tokens / kBlockSize);
  CudaModelRunner runner(m, 1234, num_blocks, kBlockSize);
  const RooflineModel roofline(hw, m, RooflineOptions{});

  struct Case { const char* kind; int32_t batch, ctx, new_tokens; };
  std::vector<Case> cases;
  for (int32_t b : {1, 8, 64, 256})
    for (int32_t c : {128, 1024, 4096}) cases.push_back({"decode", b, c, 1});
  for (int32_t p : {512, 4096}) cases.push_back({"prefill", 1, p, p});

  for (const Case& c : cases) {
    if (int64_t{c.batch} * c.ctx > tokens) {
      std::printf("%-14s %-8s %5d %6d  skipped: KV needs %.1f GB\n", m.name.c_str(), c.kind,
                  c.batch, c.ctx, double(c.batch) * c.ctx * kv_tok / 1e9);
      continue;
    }
    const auto in = make_batch(c.batch, c.ctx, c.new_tokens);
    const double s = time_forward(runner, in, c.new_tokens > 1 ? 5 : 20);
    const double new_tok = double(c.batch) * c.new_tokens;
    // Weights once, the KV read over the context, plus K and V written; attention FLOPs:
    // q.k and p.v over each query's causal context.
    const double bytes = weights + double(c.batch) * c.ctx * kv_tok;
    const double avg_ctx = c.new_tokens > 1 ? (c.ctx + 1) / 2.0 : c.ctx;
    const double flops = 2 * m.active_params() * new_tok +
                         4.0 * m.num_layers * m.num_heads * m.head_dim * new_tok * avg_ctx;
    const double floor = std::max(bytes / hw.memory_bandwidth, flops / hw.fp16_flops);
    std::vector<RooflineModel::Item> items(
        c.batch, RooflineModel::Item{c.new_tokens, c.ctx - c.new_tokens, true});
    const double predicted = roofline.price(items.data(), items.size()).total();
    std::printf("%-14s %-8s %5d %6d %9.3f %9.1f %8.1f %9.3f %9.3f\n", m.name.c_str(), c.kind,
                c.batch, c.ctx, s * 1e3, bytes / s / 1e9, flops / s / 1e12, floor * 1e3,
                predicted * 1e3);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace servesim

int main(int argc, char** argv) {
  using namespace servesim;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s HARDWARE.toml MODEL.json...\n", argv[0]);
    return 2;
  }
  if (!cuda_device_available()) {
    std::printf("skipped: no CUDA device\n");
    return 0;
  }
  auto hw = load_hardware(argv[1]);
  if (!hw.ok()) {
    std::fprintf(stderr, "%s\n", hw.error().message.c_str());
    return 1;
  }
  std::printf("%-14s %-8s %5s %6s %9s %9s %8s %9s %9s\n", "model", "step", "batch", "ctx",
              "ms", "GB/s", "TFLOP/s", "floor_ms", "roofl_ms");
  for (int i = 2; i < argc; ++i) {
    auto m = load_model(argv[i]);
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.error().message.c_str());
      return 1;
    }
    bench_model(hw.value(), m.value());
  }
  return 0;
}
