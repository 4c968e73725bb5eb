// Greedy sampling on the device: the argmax of each row (cpu::argmax's twin).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace servesim::cuda {

// out[r] = the index of the largest value of x[r, :], the lowest such index on ties.
// x: [rows, cols] float32; out: [rows] int32. REQUIRES: cols > 0.
void argmax(const float* x, int64_t rows, int64_t cols, int32_t* out, cudaStream_t stream);

}  // namespace servesim::cuda
