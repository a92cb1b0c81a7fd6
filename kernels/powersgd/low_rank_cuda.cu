// CUDA paths of kernels/powersgd/low_rank.hpp. Every operation covers all the
// matrices of a bucket in one launch (up to kBatch matrices per launch, their
// descriptors in the kernel parameters). r is a runtime value; the kernels are
// instantiated for r rounded up to 4, 8, 16 or 32 so the per-thread sums stay in
// registers. Products accumulate in f32 (the host twin in f64: the tests bound
// the difference). cuBLAS is not used: its batched GEMMs want equal shapes (or a
// pointer array per call) and a bucket mixes shapes; a grouped GEMM would be the
// candidate to measure against.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "kernels/block_sum.cuh"
#include "kernels/powersgd/low_rank.hpp"

namespace gradcomm::kernels::powersgd::cuda {

namespace {

constexpr int kBatch = 64;
constexpr int kThreads = 256;

struct MatArg {
  float* m;
  float* e;
  float* p;
  float* q;
  unsigned rows;
  unsigned cols;
};

struct Batch {
  MatArg a[kBatch];
  int count;
  unsigned max_rows;
  unsigned max_cols;
  size_t max_elems;
};

template <class Launch>
void for_each_batch(const LowRankMatrix* mats, size_t n, Launch&& launch) {
  Batch b{};
  auto flush = [&] {
    if (b.count > 0) launch(b);
    b = Batch{};
  };
  for (size_t k = 0; k < n; ++k) {
    const LowRankMatrix& m = mats[k];
    b.a[b.count++] = MatArg{m.m, m.e, m.p, m.q, static_cast<unsigned>(m.rows), static_cast<unsigned>(m.cols)};
    b.max_rows = std::max(b.max_rows, static_cast<unsigned>(m.rows));
    b.max_cols = std::max(b.max_cols, static_cast<unsigned>(m.cols));
    b.max_elems = std::max(b.max_elems, m.rows * m.cols);
    if (b.count == kBatch) flush();
  }
  flush();
}

unsigned blocks_for(size_t work, size_t per_block) {
  return static_cast<unsigned>(std::min<size_t>((work + per_block - 1) / per_block, 4096));
}

__global__ void add_error_kernel(const __grid_constant__ Batch b) {
  const MatArg& a = b.a[blockIdx.y];
  if (a.e == nullptr) return;
  size_t total = static_cast<size_t>(a.rows) * a.cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    a.m[i] += a.e[i];
}

constexpr int kMqLoads = 8;

// p = m q: one warp per row; the lanes stride over the row, each keeping r sums.
// ADD_ERROR: m += e first, element by element as it is read (every element is
// read by exactly one thread, once), so error feedback costs no pass of its own.
template <int R, bool ADD_ERROR>
__global__ void __launch_bounds__(kThreads) mq_kernel(const __grid_constant__ Batch b, int r) {
  const MatArg& a = b.a[blockIdx.y];
  const bool add_error = ADD_ERROR && a.e != nullptr;
  const unsigned lane = threadIdx.x % 32;
  const unsigned warps = gridDim.x * (blockDim.x / 32);
  for (unsigned i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < a.rows; i += warps) {
    float acc[R];
#pragma unroll
    for (int c = 0; c < R; ++c) acc[c] = 0.0f;
    float* row = a.m + static_cast<size_t>(i) * a.cols;
    const float* error_row = add_error ? a.e + static_cast<size_t>(i) * a.cols : nullptr;
    // kMqLoads loads of the row in flight per lane before any is used: with one
    // matrix in a launch (a bucket's few) there are too few warps to hide the
    // memory latency one load at a time. The sums keep the column order.
    for (unsigned j0 = lane; j0 < a.cols; j0 += 32 * kMqLoads) {
      float v[kMqLoads];
#pragma unroll
      for (int u = 0; u < kMqLoads; ++u) {
        const unsigned j = j0 + 32 * u;
        v[u] = j < a.cols ? row[j] : 0.0f;
        if (add_error && j < a.cols) v[u] += error_row[j];
      }
#pragma unroll
      for (int u = 0; u < kMqLoads; ++u) {
        const unsigned j = j0 + 32 * u;
        if (j >= a.cols) break;
        if (add_error) row[j] = v[u];
        const float* q = a.q + static_cast<size_t>(j) * r;
#pragma unroll
        for (int c = 0; c < R; ++c)
          if (c < r) acc[c] += v[u] * q[c];
      }
    }
#pragma unroll
    for (int c = 0; c < R; ++c) {
      if (c >= r) break;
      float s = acc[c];
      for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
      if (lane == 0) a.p[static_cast<size_t>(i) * r + c] = s;
    }
  }
}

// q = m^T p. A block covers 32 columns with kMtpGroups groups of 32 threads: lane
// = the column (a warp reads 128 contiguous bytes of a row), group g = rows g,
// g + kMtpGroups, ... of each kMtpTile-row tile of p staged in shared memory. The groups'
// sums are added in group order at the end: deterministic. Splitting the rows
// keeps tall matrices busy (the 50257 x 1024 embedding: 32 blocks, not the 4 that
// one thread per column of a 256-column block gave, each walking every row).
constexpr int kMtpGroups = kThreads / 32;
constexpr int kMtpTile = 64;  // rows of p staged at a time: 8 loads in flight per thread

template <int R>
__global__ void __launch_bounds__(kThreads)
    mtp_kernel(const __grid_constant__ Batch b, int r, const float* skip) {
  if (skip != nullptr && *skip > 0.0f) return;  // a non-finite step keeps the warm-start q
  const MatArg& a = b.a[blockIdx.y];
  __shared__ float tile[kMtpTile * kMaxRank];
  __shared__ float sums[kMtpGroups][R][32];  // lane last: no bank conflicts
  const unsigned lane = threadIdx.x % 32, group = threadIdx.x / 32;
  for (unsigned j0 = blockIdx.x * 32; j0 < a.cols; j0 += gridDim.x * 32) {
    const unsigned j = j0 + lane;
    float acc[R];
#pragma unroll
    for (int c = 0; c < R; ++c) acc[c] = 0.0f;
    for (unsigned i0 = 0; i0 < a.rows; i0 += kMtpTile) {
      const unsigned rows = min(static_cast<unsigned>(kMtpTile), a.rows - i0);
      __syncthreads();
      for (unsigned t = threadIdx.x; t < rows * r; t += blockDim.x)
        tile[t] = a.p[static_cast<size_t>(i0) * r + t];
      __syncthreads();
      if (j < a.cols) {
        // A group's rows of the tile loaded before any is used (latency, as in
        // mq_kernel); each group still adds its rows in increasing order.
        constexpr int kLoads = kMtpTile / kMtpGroups;
        float v[kLoads];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
          const unsigned ii = group + u * kMtpGroups;
          v[u] = ii < rows ? a.m[static_cast<size_t>(i0 + ii) * a.cols + j] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
          const unsigned ii = group + u * kMtpGroups;
          if (ii >= rows) break;
#pragma unroll
          for (int c = 0; c < R; ++c)
            if (c < r) acc[c] += v[u] * tile[ii * r + c];
        }
      }
    }
#pragma unroll
    for (int c = 0; c < R; ++c) sums[group][c][lane] = acc[c];
    __syncthreads();
    if (group == 0 && j < a.cols)
      for (int c = 0; c < r; ++c) {
        float s = 0.0f;
        for (int g = 0; g < kMtpGroups; ++g) s += sums[g][c][lane];
        a.q[static_cast<size_t>(j) * r + c] = s;
      }
    __syncthreads();  // sums is rewritten by the next column block
  }
}

// Modified Gram-Schmidt, one block per matrix; each thread owns the same rows
// throughout, so only the sums need the block.
__device__ double column_dot(const MatArg& a, int r, int c, int d, double* shared) {
  double s = 0.0;
  for (unsigned i = threadIdx.x; i < a.rows; i += blockDim.x)
    s += static_cast<double>(a.p[static_cast<size_t>(i) * r + c]) * a.p[static_cast<size_t>(i) * r + d];
  return block_sum<kThreads>(s, shared);
}

__global__ void __launch_bounds__(kThreads)
    orthogonalize_kernel(const __grid_constant__ Batch b, int r, float eps) {
  const MatArg& a = b.a[blockIdx.x];
  __shared__ double shared[kThreads];
  double before[kMaxRank];
  for (int c = 0; c < r; ++c) before[c] = sqrt(column_dot(a, r, c, c, shared));
  for (int c = 0; c < r; ++c) {
    double norm = sqrt(column_dot(a, r, c, c, shared));
    float inv = keeps_column(norm, before[c], eps) ? static_cast<float>(1.0 / norm) : 0.0f;
    for (unsigned i = threadIdx.x; i < a.rows; i += blockDim.x) a.p[static_cast<size_t>(i) * r + c] *= inv;
    for (int d = c + 1; d < r; ++d) {
      float f = static_cast<float>(column_dot(a, r, c, d, shared));
      for (unsigned i = threadIdx.x; i < a.rows; i += blockDim.x)
        a.p[static_cast<size_t>(i) * r + d] -= f * a.p[static_cast<size_t>(i) * r + c];
    }
  }
}

// approx = scale * p q^T; e = m - approx; m = approx * out_scale, flagging Inf/NaN:
// one read and one or two writes.
template <int R>
__global__ void __launch_bounds__(kThreads)
    decompress_kernel(const __grid_constant__ Batch b, int r, float scale, const float* skip,
                      const float* out_scale, float* found_inf) {
  const MatArg& a = b.a[blockIdx.y];
  float* const e = skip != nullptr && *skip > 0.0f ? nullptr : a.e;  // a non-finite step keeps e
  const float os = out_scale != nullptr ? *out_scale : 1.0f;
  bool nonfinite = false;
  const size_t total = static_cast<size_t>(a.rows) * a.cols;
  for (size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = idx / a.cols, j = idx % a.cols;
    const float* p = a.p + i * r;
    const float* q = a.q + j * r;
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < R; ++c)
      if (c < r) s += p[c] * q[c];
    const float approx = s * scale;
    if (e != nullptr) e[idx] = a.m[idx] - approx;
    const float v = approx * os;
    a.m[idx] = v;
    nonfinite |= !is_finite(v);
  }
  // Every writer stores the same value: a benign race, as in the scaling kernels.
  if (nonfinite && found_inf != nullptr) *found_inf = 1.0f;
}

// Calls launch(std::integral_constant<int, R>{}) for the smallest R of 4, 8, 16,
// 32 that holds r: the kernels are instantiated for those four.
template <class Launch>
void with_rank(int r, Launch&& launch) {
  if (r <= 4)
    launch(std::integral_constant<int, 4>{});
  else if (r <= 8)
    launch(std::integral_constant<int, 8>{});
  else if (r <= 16)
    launch(std::integral_constant<int, 16>{});
  else
    launch(std::integral_constant<int, 32>{});
}

cudaStream_t as_stream(gcommStream_t s) {
  return static_cast<cudaStream_t>(s);
}

// p = m q, with m += e fused into the same pass when ADD_ERROR.
template <bool ADD_ERROR>
void launch_mq(const LowRankMatrix* mats, size_t n, int r, gcommStream_t stream) {
  for_each_batch(mats, n, [&](const Batch& b) {
    dim3 grid(blocks_for(b.max_rows, kThreads / 32), b.count);
    with_rank(r, [&](auto R) {
      mq_kernel<decltype(R)::value, ADD_ERROR><<<grid, kThreads, 0, as_stream(stream)>>>(b, r);
    });
    GCOMM_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

void add_error(const LowRankMatrix* mats, size_t n, gcommStream_t stream) {
  for_each_batch(mats, n, [&](const Batch& b) {
    dim3 grid(blocks_for(b.max_elems, kThreads * 4), b.count);
    add_error_kernel<<<grid, kThreads, 0, as_stream(stream)>>>(b);
    GCOMM_CUDA_CHECK(cudaGetLastError());
  });
}

void multiply_mq(const LowRankMatrix* mats, size_t n, int r, gcommStream_t stream) {
  launch_mq<false>(mats, n, r, stream);
}

void add_error_multiply_mq(const LowRankMatrix* mats, size_t n, int r, gcommStream_t stream) {
  launch_mq<true>(mats, n, r, stream);
}

void orthogonalize(const LowRankMatrix* mats, size_t n, int r, float eps, gcommStream_t stream) {
  for_each_batch(mats, n, [&](const Batch& b) {
    orthogonalize_kernel<<<b.count, kThreads, 0, as_stream(stream)>>>(b, r, eps);
    GCOMM_CUDA_CHECK(cudaGetLastError());
  });
}

void multiply_mtp(const LowRankMatrix* mats, size_t n, int r, const float* skip, gcommStream_t stream) {
  for_each_batch(mats, n, [&](const Batch& b) {
    dim3 grid(blocks_for(b.max_cols, 32), b.count);
    with_rank(r, [&](auto R) {
      mtp_kernel<decltype(R)::value><<<grid, kThreads, 0, as_stream(stream)>>>(b, r, skip);
    });
    GCOMM_CUDA_CHECK(cudaGetLastError());
  });
}

void decompress(const LowRankMatrix* mats, size_t n, int r, float scale, const float* skip,
                const DecompressOutput& out, gcommStream_t stream) {
  for_each_batch(mats, n, [&](const Batch& b) {
    dim3 grid(blocks_for(b.max_elems, kThreads * 4), b.count);
    with_rank(r, [&](auto R) {
      decompress_kernel<decltype(R)::value>
          <<<grid, kThreads, 0, as_stream(stream)>>>(b, r, scale, skip, out.out_scale, out.found_inf);
    });
    GCOMM_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace gradcomm::kernels::powersgd::cuda
