// Token embedding lookup on the device (cpu::embedding's twin).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace servesim::cuda {

// out[t, :] = table[ids[t], :]. ids: [T] int32 in [0, vocab); table: [vocab, hidden] bf16;
// out: [T, hidden] bf16. All pointers are device pointers. An id out of range is clamped to
// vocab - 1 on the device (the runner checks ids on the host first).
void embedding(const int32_t* ids, const __nv_bfloat16* table, int64_t num_tokens, int64_t vocab,
               int64_t hidden, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace servesim::cuda
