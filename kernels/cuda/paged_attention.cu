#include "kernels/cuda/paged_attention.cuh"

#include <cmath>

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// Loads the EPL contiguous elements of a head row that lane `lane` owns (zeros past head_dim).
template <int EPL>
__device__ void load_lane(const __nv_bfloat16* row, int lane, int hd, float (&x)[EPL]) {
  const int d = lane * EPL;
  if (d >= hd) {
    for (int e = 0; e < EPL; ++e) x[e] = 0.0f;
  } else if constexpr (EPL % 2 == 0) {  // d and the row start are even: 4-byte aligned pairs
    for (int e = 0; e < EPL; e += 2) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(row + d + e));
      x[e] = f.x;
      x[e + 1] = f.y;
    }
  } else {
    for (int e = 0; e < EPL; ++e) x[e] = __bfloat162float(row[d + e]);
  }
}

// Grid (token, head, partition). Writes the normalised output when there is one partition, else
// the partition's max score, sum of exponentials and unnormalised accumulator to the workspace.
template <int EPL>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* k_cache,
                     const __nv_bfloat16* v_cache, const int32_t* cu_seqlens_q, int num_seqs,
                     const int32_t* context_lens, const int32_t* block_tables,
                     int64_t max_blocks_per_seq, PagedAttentionShape shape, float* ws_m,
                     float* ws_l, float* ws_acc, __nv_bfloat16* out) {
  const int t = blockIdx.x, h = blockIdx.y, part = blockIdx.z, parts = gridDim.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hd = static_cast<int>(shape.head_dim), bs = static_cast<int>(shape.block_size);
  const int heads = static_cast<int>(shape.num_heads), kv_heads = static_cast<int>(shape.num_kv_heads);

  int lo = 0, hi = num_seqs - 1;  // the sequence s with cu[s] <= t < cu[s + 1]
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cu_seqlens_q[mid] <= t) lo = mid; else hi = mid - 1;
  }
  const int s = lo;
  const int q_len = cu_seqlens_q[s + 1] - cu_seqlens_q[s];
  const int pos = context_lens[s] - q_len + (t - cu_seqlens_q[s]);
  // Partition `part` covers kPartitionSize positions from its start, and the last one every
  // position to the query's own: with one partition (a batch that fills the device without
  // splitting) that is the whole context, not its first kPartitionSize positions.
  const int start = part * static_cast<int>(kPartitionSize);
  const int stop = part == parts - 1 ? pos + 1 : min(pos + 1, start + static_cast<int>(kPartitionSize));
  const int kvh = h / (heads / kv_heads);
  const int32_t* table = block_tables + s * max_blocks_per_seq;

  float qv[EPL];
  load_lane<EPL>(q + t * q_stride + h * hd, lane, hd, qv);
  const float scale = rsqrtf(static_cast<float>(hd));
  for (int e = 0; e < EPL; ++e) qv[e] *= scale;

  float m = -INFINITY, l = 0.0f, acc[EPL] = {};
  for (int c = start + warp; c < stop; c += kWarps) {
    const int64_t slot = static_cast<int64_t>(table[c / bs]) * bs + c % bs;
    const int64_t off = (slot * kv_heads + kvh) * hd;
    float kx[EPL], vx[EPL];
    load_lane<EPL>(k_cache + off, lane, hd, kx);
    float dot = 0.0f;
    for (int e = 0; e < EPL; ++e) dot += qv[e] * kx[e];
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    load_lane<EPL>(v_cache + off, lane, hd, vx);
    const float m_new = fmaxf(m, dot);
    const float corr = expf(m - m_new), p = expf(dot - m_new);
    l = l * corr + p;
    for (int e = 0; e < EPL; ++e) acc[e] = acc[e] * corr + p * vx[e];
    m = m_new;
  }

  __shared__ float sm_m[kWarps], sm_l[kWarps], sm_acc[kWarps][32 * EPL];
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
  for (int e = 0; e < EPL; ++e) sm_acc[warp][lane * EPL + e] = acc[e];
  __syncthreads();

  float big = -INFINITY;
  for (int w = 0; w < kWarps; ++w) big = fmaxf(big, sm_m[w]);
  float weight[kWarps], total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = sm_m[w] == -INFINITY ? 0.0f : expf(sm_m[w] - big);
    total += sm_l[w] * weight[w];
  }
  const int64_t row = static_cast<int64_t>(t) * heads + h;
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) a += sm_acc[w][d] * weight[w];
    if (parts == 1) {
      out[row * hd + d] = __float2bfloat16(a / total);
    } else {
      ws_acc[(row * parts + part) * hd + d] = a;
    }
  }
  if (parts > 1 && threadIdx.x == 0) {
    ws_m[row * parts + part] = big;
    ws_l[row * parts + part] = total;
  }
}

// Grid (token, head): merges the partitions' partial softmaxes.
__global__ void reduce_kernel(const float* ws_m, const float* ws_l, const float* ws_acc,
                              int parts, int hd, __nv_bfloat16* out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y;
  const float* m = ws_m + row * parts;
  const float* l = ws_l + row * parts;
  float big = -INFINITY;
  for (int p = 0; p < parts; ++p) big = fmaxf(big, m[p]);
  float total = 0.0f;
  for (int p = 0; p < parts; ++p)
    if (m[p] != -INFINITY) total += l[p] * expf(m[p] - big);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0.0f;
    for (int p = 0; p < parts; ++p)
      if (m[p] != -INFINITY) a += ws_acc[(row * parts + p) * hd + d] * expf(m[p] - big);
    out[row * hd + d] = __float2bfloat16(a / total);
  }
}

template <int EPL>
void launch(dim3 grid, cudaStream_t stream, const __nv_bfloat16* q, int64_t q_stride,
            const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache, const int32_t* cu,
            int num_seqs, const int32_t* context_lens, const int32_t* block_tables,
            int64_t max_blocks_per_seq, const PagedAttentionShape& shape, float* ws_m,
            float* ws_l, float* ws_acc, __nv_bfloat16* out) {
  attention_kernel<EPL><<<grid, kThreads, 0, stream>>>(q, q_stride, k_cache, v_cache, cu,
                                                       num_seqs, context_lens, block_tables,
                                                       max_blocks_per_seq, shape, ws_m, ws_l,
                                                       ws_acc, out);
}

}  // namespace

int paged_attention_partitions(int64_t num_tokens, int64_t num_heads, int64_t max_context_len) {
  // Enough (token, head) blocks already fill the device: splitting would only add traffic.
  if (num_tokens * num_heads >= 2048) return 1;
  const int64_t parts = (max_context_len + kPartitionSize - 1) / kPartitionSize;
  return static_cast<int>(parts < 1 ? 1 : parts);
}

size_t paged_attention_workspace_floats(int64_t num_tokens, const PagedAttentionShape& shape,
                                        int num_partitions) {
  if (num_partitions <= 1) return 0;
  return static_cast<size_t>(num_tokens * shape.num_heads * num_partitions *
                             (shape.head_dim + 2));
}

void paged_attention(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* k_cache,
                     const __nv_bfloat16* v_cache, const int32_t* cu_seqlens_q, int64_t num_seqs,
                     const int32_t* context_lens, const int32_t* block_tables,
                     int64_t max_blocks_per_seq, int64_t num_tokens,
                     const PagedAttentionShape& shape, int num_partitions, float* workspace,
                     __nv_bfloat16* out, cudaStream_t stream) {
  SERVESIM_CUDA_REQUIRE(shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0);
  SERVESIM_CUDA_REQUIRE(shape.head_dim > 0 && shape.head_dim <= 256 && shape.block_size > 0);
  SERVESIM_CUDA_REQUIRE(shape.head_dim <= 32 || shape.head_dim % 8 == 0);  // lanes own whole runs
  SERVESIM_CUDA_REQUIRE(q_stride >= shape.num_heads * shape.head_dim && num_partitions >= 1);
  SERVESIM_CUDA_REQUIRE(num_seqs > 0 || num_tokens == 0);
  SERVESIM_CUDA_REQUIRE(num_partitions == 1 || workspace != nullptr);
  if (num_tokens == 0) return;
  const dim3 grid(static_cast<unsigned>(num_tokens), static_cast<unsigned>(shape.num_heads),
                  static_cast<unsigned>(num_partitions));
  const size_t rows = static_cast<size_t>(num_tokens * shape.num_heads);
  float* ws_m = workspace;
  float* ws_l = workspace == nullptr ? nullptr : ws_m + rows * num_partitions;
  float* ws_acc = workspace == nullptr ? nullptr : ws_l + rows * num_partitions;
  const int n = static_cast<int>(num_seqs);
  if (shape.head_dim <= 32)
    launch<1>(grid, stream, q, q_stride, k_cache, v_cache, cu_seqlens_q, n, context_lens,
              block_tables, max_blocks_per_seq, shape, ws_m, ws_l, ws_acc, out);
  else if (shape.head_dim <= 64)
    launch<2>(grid, stream, q, q_stride, k_cache, v_cache, cu_seqlens_q, n, context_lens,
              block_tables, max_blocks_per_seq, shape, ws_m, ws_l, ws_acc, out);
  else if (shape.head_dim <= 128)
    launch<4>(grid, stream, q, q_stride, k_cache, v_cache, cu_seqlens_q, n, context_lens,
              block_tables, max_blocks_per_seq, shape, ws_m, ws_l, ws_acc, out);
  else
    launch<8>(grid, stream, q, q_stride, k_cache, v_cache, cu_seqlens_q, n, context_lens,
              block_tables, max_blocks_per_seq, shape, ws_m, ws_l, ws_acc, out);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
  if (num_partitions > 1) {
    reduce_kernel<<<dim3(grid.x, grid.y), 128, 0, stream>>>(
        ws_m, ws_l, ws_acc, num_partitions, static_cast<int>(shape.head_dim), out);
    SERVESIM_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace servesim::cuda
