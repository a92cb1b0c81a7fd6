// CUDA paths of kernels/powersgd/low_rank.hpp. Every operation covers all the
// matrices of a bucket in one launch (up to kBatch matrices per launch, their
// descriptors in the kernel parameters). r is a runtime value; the kernels are
// instantiated for r rounded up to 4, 8, 16 or 32 so the per-thread sums stay in
// registers. Products accumulate in f32 (the host twin in f64: the tests bound
// the difference). cuBLAS is not used: its batched GEMMs want equal shapes (or a
// pointer array per call) and a bucket mixes shapes; a grouped GEMM would be the
// candidate to measure against.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
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
constexpr int kWarps = kThreads / 32;

// p = m q: one block per row, its threads striding over the row with kMqLoads
// loads in flight each, every thread keeping r sums; the warps' sums are added
// in warp order (deterministic). A bucket's launch may hold one or two matrices
// of ~1000 rows: a warp per row left most of the GPU idle, waiting on memory.
// ADD_ERROR: m += e first, element by element as it is read (every element is
// read by exactly one thread, once), so error feedback costs no pass of its own;
// the updated row is stored after the products, so no store sits between the
// loads of q.
template <int R, bool ADD_ERROR>
__global__ void __launch_bounds__(kThreads) mq_kernel(const __grid_constant__ Batch b, int r) {
  const MatArg& a = b.a[blockIdx.y];
  const bool add_error = ADD_ERROR && a.e != nullptr;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __shared__ float warp_sums[kWarps][R];
  for (unsigned i = blockIdx.x; i < a.rows; i += gridDim.x) {
    float acc[R];
#pragma unroll
    for (int c = 0; c < R; ++c) acc[c] = 0.0f;
    float* row = a.m + static_cast<size_t>(i) * a.cols;
    const float* error_row = add_error ? a.e + static_cast<size_t>(i) * a.cols : nullptr;
    for (unsigned j0 = threadIdx.x; j0 < a.cols; j0 += kThreads * kMqLoads) {
      float v[kMqLoads];
#pragma unroll
      for (int u = 0; u < kMqLoads; ++u) {
        const unsigned j = j0 + kThreads * u;
        v[u] = j < a.cols ? row[j] : 0.0f;
        if (add_error && j < a.cols) v[u] += error_row[j];
      }
#pragma unroll
      for (int u = 0; u < kMqLoads; ++u) {
        const unsigned j = j0 + kThreads * u;
        if (j >= a.cols) break;
        const float* q = a.q + static_cast<size_t>(j) * r;
#pragma unroll
        for (int c = 0; c < R; ++c)
          if (c < r) acc[c] += v[u] * q[c];
      }
      if (add_error)
#pragma unroll
        for (int u = 0; u < kMqLoads; ++u) {
          const unsigned j = j0 + kThreads * u;
          if (j >= a.cols) break;
          row[j] = v[u];
        }
    }
#pragma unroll
    for (int c = 0; c < R; ++c) {
      if (c >= r) break;
      float s = acc[c];
      for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
      if (lane == 0) warp_sums[warp][c] = s;
    }
    __syncthreads();
    if (threadIdx.x < static_cast<unsigned>(r)) {
      float s = 0.0f;
      for (int w = 0; w < kWarps; ++w) s += warp_sums[w][threadIdx.x];
      a.p[static_cast<size_t>(i) * r + threadIdx.x] = s;
    }
    __syncthreads();  // warp_sums is rewritten by the next row
  }
}

// q = m^T p. A block covers 32 columns with kMtpGroups groups of 32 threads: lane
// = the column (a warp reads 128 contiguous bytes of a row), group g = rows g,
// g + kMtpGroups, ... of each kMtpTile-row tile of p staged in shared memory; the
// groups' sums are added in group order. Splitting the rows keeps tall matrices
// busy (the 50257 x 1024 embedding: 32 blocks, not the 4 that one thread per
// column of a 256-column block gave, each walking every row). A matrix alone in
// its launch (a bucket of one or two) still left most SMs idle, each block
// walking its rows tile after tile: gridDim.z > 1 splits the rows further over
// a thread-block cluster (sm_90), whose first block adds the splits' sums, read
// from their shared memory, in split order. Deterministic either way.
constexpr int kMtpGroups = kThreads / 32;
constexpr int kMtpTile = 64;               // rows of p staged at a time: 8 loads in flight per thread
constexpr unsigned kMtpMaxSplits = 8;      // a portable cluster size
constexpr unsigned kMtpTilesPerSplit = 4;  // fewer tiles per block: the sums cost more than they save

template <int R>
__global__ void __launch_bounds__(kThreads)
    mtp_kernel(const __grid_constant__ Batch b, int r, const float* skip) {
  if (skip != nullptr && *skip > 0.0f) return;  // a non-finite step keeps the warm-start q (all blocks alike)
  const MatArg& a = b.a[blockIdx.y];
  const unsigned tiles = (a.rows + kMtpTile - 1) / kMtpTile;
  const unsigned tiles_per_split = (tiles + gridDim.z - 1) / gridDim.z;
  const unsigned row_begin = min(a.rows, blockIdx.z * tiles_per_split * kMtpTile);
  const unsigned row_end = min(a.rows, (blockIdx.z + 1) * tiles_per_split * kMtpTile);
  __shared__ float tile[kMtpTile * kMaxRank];
  __shared__ float sums[kMtpGroups][R][32];  // lane last: no bank conflicts
  const unsigned lane = threadIdx.x % 32, group = threadIdx.x / 32;
  for (unsigned j0 = blockIdx.x * 32; j0 < a.cols; j0 += gridDim.x * 32) {
    const unsigned j = j0 + lane;
    float acc[R];
#pragma unroll
    for (int c = 0; c < R; ++c) acc[c] = 0.0f;
    for (unsigned i0 = row_begin; i0 < row_end; i0 += kMtpTile) {
      const unsigned rows = min(static_cast<unsigned>(kMtpTile), row_end - i0);
      __syncthreads();
      for (unsigned t = threadIdx.x; t < rows * r; t += blockDim.x)
        tile[t] = a.p[static_cast<size_t>(i0) * r + t];
      __syncthreads();
      if (j < a.cols) {
        // A group's rows of the tile loaded before any is used (latency, as in
        // mq_kernel); each group adds its rows in increasing order.
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
    if (group == 0)  // this block's total, in group order, into sums[0]
      for (int c = 0; c < r; ++c) {
        float s = 0.0f;
        for (int g = 0; g < kMtpGroups; ++g) s += sums[g][c][lane];
        sums[0][c][lane] = s;
      }
    if (gridDim.z == 1) {
      if (group == 0 && j < a.cols)
        for (int c = 0; c < r; ++c) a.q[static_cast<size_t>(j) * r + c] = sums[0][c][lane];
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
      cluster.sync();  // every split's total written
      if (blockIdx.z == 0 && group == 0 && j < a.cols)
        for (int c = 0; c < r; ++c) {
          float s = 0.0f;
          for (unsigned k = 0; k < gridDim.z; ++k)
            s += cluster.map_shared_rank(&sums[0][0][0], k)[c * 32 + lane];
          a.q[static_cast<size_t>(j) * r + c] = s;
        }
      cluster.sync();  // read before any split rewrites its sums
#else
      __trap();  // the host splits only where this kernel was built for sm_90 or later
#endif
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

// Whether mtp_kernel may split rows over a cluster: the current device launches
// clusters (sm_90+) and the kernel was built for it (not JIT-compiled from an
// older architecture's PTX, where the cluster path is compiled out). Cached per
// device: a bucket's launches ask every step.
bool clusters_usable() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};  // 0 unknown, 1 no, 2 yes
  int device = 0;
  GCOMM_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kDevices) return false;
  int state = known[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int can_launch = 0;
    GCOMM_CUDA_CHECK(cudaDeviceGetAttribute(&can_launch, cudaDevAttrClusterLaunch, device));
    cudaFuncAttributes attributes{};
    GCOMM_CUDA_CHECK(cudaFuncGetAttributes(&attributes, mtp_kernel<4>));
    state = can_launch != 0 && attributes.binaryVersion >= 90 ? 2 : 1;
    known[device].store(state, std::memory_order_relaxed);
  }
  return state == 2;
}

// p = m q, with m += e fused into the same pass when ADD_ERROR.
template <bool ADD_ERROR>
void launch_mq(const LowRankMatrix* mats, size_t n, int r, gcommStream_t stream) {
  for_each_batch(mats, n, [&](const Batch& b) {
    dim3 grid(blocks_for(b.max_rows, 1), b.count);
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
  const bool clusters = clusters_usable();
  for_each_batch(mats, n, [&](const Batch& b) {
    const size_t tiles = (b.max_rows + kMtpTile - 1) / kMtpTile;
    const unsigned splits = clusters
                                ? static_cast<unsigned>(std::clamp<size_t>(
                                      (tiles + kMtpTilesPerSplit - 1) / kMtpTilesPerSplit, 1, kMtpMaxSplits))
                                : 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(blocks_for(b.max_cols, 32), b.count, splits);
    config.blockDim = dim3(kThreads);
    config.stream = as_stream(stream);
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 1;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = splits;
    config.attrs = &cluster;
    config.numAttrs = splits > 1 ? 1 : 0;
    with_rank(r, [&](auto R) {
      GCOMM_CUDA_CHECK(cudaLaunchKernelEx(&config, mtp_kernel<decltype(R)::value>, b, r, skip));
    });
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
