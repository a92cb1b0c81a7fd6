// PowerSGD's CUDA kernels: one launch per operation for a whole bucket (more
// only past kBatchMatrices matrices). Every kernel takes its table (Batch) in the
// kernel parameters and cuts its work in units, one block each; a block finds
// its matrix by binary search over the units' prefix. The rank is a template
// parameter rounded up to a power of two (columns past the real rank are zero
// padding), so accumulators live in registers.
//
// cuBLAS: the products are tall-skinny (r <= 32) and many per bucket; cuBLAS
// would need a grouped/batched GEMM of mixed shapes plus separate error-feedback
// and decompress passes over M, which is where the time goes (M is read 3 times
// and written twice per step here, against 5 + 3 for matmul + add + sub). It is
// worth a comparison only for r = 32, where the products start to be bound by
// FMA throughput rather than memory; see bench/kernels/powersgd_bench.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "kernels/powersgd/powersgd_backend.hpp"
#include "kernels/powersgd/powersgd_math.hpp"

namespace gradcomm::kernels::powersgd::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kMaxGrid = 1u << 16;
constexpr unsigned kOrthGrid = 1024;  // orthogonalize hands out units by ticket: any grid works
constexpr unsigned kFull = 0xffffffffu;

unsigned grid_for(unsigned units, unsigned cap = kMaxGrid) { return std::min(units, cap); }

template <class F>
void dispatch_rank(int r, F&& f) {
  switch (padded_rank(r)) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    default: f(std::integral_constant<int, 32>{}); break;
  }
}

// The last matrix whose first unit is <= unit (first_unit, or aux2 for
// orthogonalize's apply units). Matrices without units of that kind carry the
// next one's prefix, so the search never stops on them.
template <bool APPLY>
__device__ __forceinline__ int find_matrix(const Batch& b, unsigned unit) {
  int lo = 0, hi = static_cast<int>(b.count) - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    unsigned first = APPLY ? b.m[mid].aux2 : b.m[mid].first_unit;
    if (first <= unit) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// RP floats from 16-byte aligned shared memory (RP >= 4; 8 bytes for RP = 2).
template <int RP>
__device__ __forceinline__ void load_row(const float* s, float (&v)[RP]) {
  if constexpr (RP >= 4) {
#pragma unroll
    for (int c = 0; c < RP; c += 4) {
      float4 x = *reinterpret_cast<const float4*>(s + c);
      v[c] = x.x;
      v[c + 1] = x.y;
      v[c + 2] = x.z;
      v[c + 3] = x.w;
    }
  } else if constexpr (RP == 2) {
    float2 x = *reinterpret_cast<const float2*>(s);
    v[0] = x.x;
    v[1] = x.y;
  } else {
    v[0] = s[0];
  }
}

// Sums N values across the warp's 32 lanes, each lane ending with a share:
// for N >= 32 lane l holds the sums of elements l*N/32 .. l*N/32 + N/32 - 1 in
// v[0 ..]; for N < 32 every lane holds the sum of element lane >> (5 - log2 N) in
// v[0]. Half of the values travel at each step (N - N/32 shuffles instead of
// 5N); a fixed tree, so the same bits every run.
template <int N, int OFFSET>
__device__ __forceinline__ void reduce_scatter(float* v, int lane) {
  if constexpr (OFFSET > 0) {
    if constexpr (N > 1) {
      constexpr int H = N / 2;
      const bool upper = (lane & OFFSET) != 0;
#pragma unroll
      for (int i = 0; i < H; ++i) {
        float send = upper ? v[i] : v[i + H];
        float keep = upper ? v[i + H] : v[i];
        v[i] = keep + __shfl_xor_sync(kFull, send, OFFSET);
      }
      reduce_scatter<H, OFFSET / 2>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(kFull, v[0], OFFSET);
      reduce_scatter<1, OFFSET / 2>(v, lane);
    }
  }
}

// ---- init_q ----------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    init_q_kernel(const __grid_constant__ Batch b, int r, unsigned long long seed) {
  for (unsigned unit = blockIdx.x; unit < b.units; unit += gridDim.x) {
    const MatArg& a = b.m[find_matrix<false>(b, unit)];
    size_t count = static_cast<size_t>(a.cols) * r;
    size_t begin = static_cast<size_t>(unit - a.first_unit) * kInitChunk;
    size_t end = begin + kInitChunk < count ? begin + kInitChunk : count;
    for (size_t e = begin + threadIdx.x; e < end; e += kThreads) a.q_state[e] = normal_at(seed, a.ws, e);
  }
}

// ---- compensate_and_multiply_p: M += E, P = M·Q -----------------------------------
// A warp owns TR rows; its lanes walk the columns (coalesced), each keeping TR x
// RP partial sums, and the block stages Q 128 rows at a time in shared memory
// (row stride RP + 4 for RP >= 8: conflict-free 16-byte reads). The warp's sums
// are combined by reduce_scatter, so no shared memory is needed for them.

template <int RP>
__global__ void __launch_bounds__(kThreads)
    multiply_p_kernel(const __grid_constant__ Batch b, int r, float* found_nonfinite) {
  constexpr int TR = multiply_p_rows_per_warp(RP);
  constexpr int S = RP <= 4 ? RP : RP + 4;
  constexpr int U = 4;  // columns per lane per chunk
  constexpr int J = 32 * U;
  constexpr int N = TR * RP;
  __shared__ __align__(16) float qs[J * S];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  bool nonfinite = false;
  for (unsigned unit = blockIdx.x; unit < b.units; unit += gridDim.x) {
    const MatArg& a = b.m[find_matrix<false>(b, unit)];
    const size_t rows = a.rows, cols = a.cols;
    const size_t row0 = static_cast<size_t>(unit - a.first_unit) * (kWarps * TR) + warp * TR;
    float* __restrict__ grad = a.grad;
    const float* __restrict__ err = a.error;
    const float* __restrict__ q = a.q_state;
    float acc[N];
#pragma unroll
    for (int x = 0; x < N; ++x) acc[x] = 0.0f;
    for (size_t j0 = 0; j0 < cols; j0 += J) {
      __syncthreads();  // the previous chunk is consumed
      for (int idx = threadIdx.x; idx < J * RP; idx += kThreads) {
        int jj = idx / RP, c = idx % RP;
        size_t j = j0 + jj;
        qs[jj * S + c] = j < cols && c < r ? q[j * r + c] : 0.0f;
      }
      __syncthreads();
      float mv[U][TR];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          size_t i = row0 + t, j = j0 + u * 32 + lane;
          mv[u][t] = i < rows && j < cols ? grad[i * cols + j] : 0.0f;
        }
      if (err != nullptr) {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int t = 0; t < TR; ++t) {
            size_t i = row0 + t, j = j0 + u * 32 + lane;
            if (i < rows && j < cols) {
              mv[u][t] += err[i * cols + j];
              grad[i * cols + j] = mv[u][t];
            }
          }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float qv[RP];
        load_row<RP>(qs + (u * 32 + lane) * S, qv);
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          nonfinite |= !is_finite(mv[u][t]);
#pragma unroll
          for (int c = 0; c < RP; ++c) acc[t * RP + c] = fmaf(mv[u][t], qv[c], acc[t * RP + c]);
        }
      }
    }
    reduce_scatter<N, 16>(acc, lane);
    if constexpr (N >= 32) {
#pragma unroll
      for (int x = 0; x < N / 32; ++x) {
        int idx = lane * (N / 32) + x, t = idx / RP, c = idx % RP;
        size_t i = row0 + t;
        if (i < rows && c < r) a.p[i * r + c] = acc[x];
      }
    } else {
      constexpr int kLanesPerValue = 32 / N;
      int idx = lane / kLanesPerValue, t = idx / RP, c = idx % RP;
      size_t i = row0 + t;
      if (lane % kLanesPerValue == 0 && i < rows && c < r) a.p[i * r + c] = acc[0];
    }
  }
  if (nonfinite && found_nonfinite != nullptr) *found_nonfinite = 1.0f;  // a benign race: all write 1
}

// ---- multiply_q: Q = Mᵀ·P -----------------------------------------------------------
// A block owns 64 columns (2 per lane) and a slice of up to kQSliceRows rows;
// its warps split the rows, P's rows are staged 32 at a time and read as
// broadcasts. Warps are summed in shared memory in a fixed order. A matrix of
// more than one slice leaves partial tiles in the workspace; the last block of
// each tile (arrival counter) sums them in slice order and writes Q, then resets
// the counter. Same bits every run.

template <int RP>
__global__ void __launch_bounds__(kThreads)
    multiply_q_kernel(const __grid_constant__ Batch b, int r, unsigned* counters, float* partials) {
  constexpr int C = static_cast<int>(kQTileCols / 32);
  constexpr int RC = 32;
  constexpr int kRowsPerWarp = RC / kWarps;
  __shared__ __align__(16) float ps[RC * RP];
  __shared__ float red[kWarps * 32 * (RP + 1)];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (unsigned unit = blockIdx.x; unit < b.units; unit += gridDim.x) {
    const MatArg& a = b.m[find_matrix<false>(b, unit)];
    const size_t rows = a.rows, cols = a.cols;
    const unsigned slices = a.aux, local = unit - a.first_unit;
    const unsigned tile = local / slices, slice = local % slices;
    const size_t j_base = static_cast<size_t>(tile) * kQTileCols;
    const size_t i_begin = static_cast<size_t>(slice) * kQSliceRows;
    const size_t i_end = i_begin + kQSliceRows < rows ? i_begin + kQSliceRows : rows;
    const float* __restrict__ grad = a.grad;
    float acc[C * RP];
#pragma unroll
    for (int x = 0; x < C * RP; ++x) acc[x] = 0.0f;
    for (size_t i0 = i_begin; i0 < i_end; i0 += RC) {
      __syncthreads();
      for (int idx = threadIdx.x; idx < RC * RP; idx += kThreads) {
        int ii = idx / RP, c = idx % RP;
        size_t i = i0 + ii;
        ps[idx] = i < i_end && c < r ? a.p[i * r + c] : 0.0f;
      }
      __syncthreads();
      float mv[kRowsPerWarp][C];
#pragma unroll
      for (int s = 0; s < kRowsPerWarp; ++s)
#pragma unroll
        for (int c = 0; c < C; ++c) {
          size_t i = i0 + warp + s * kWarps, j = j_base + c * 32 + lane;
          mv[s][c] = i < i_end && j < cols ? grad[i * cols + j] : 0.0f;
        }
#pragma unroll
      for (int s = 0; s < kRowsPerWarp; ++s) {
        float pv[RP];
        load_row<RP>(ps + (warp + s * kWarps) * RP, pv);
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
          for (int k = 0; k < RP; ++k) acc[c * RP + k] = fmaf(mv[s][c], pv[k], acc[c * RP + k]);
      }
    }
    const bool split = slices > 1;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      __syncthreads();
#pragma unroll
      for (int k = 0; k < RP; ++k) red[(warp * 32 + lane) * (RP + 1) + k] = acc[c * RP + k];
      __syncthreads();
      for (int o = threadIdx.x; o < 32 * RP; o += kThreads) {
        int l = o / RP, k = o % RP;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) s += red[(w * 32 + l) * (RP + 1) + k];
        size_t j = j_base + c * 32 + l;
        if (split)
          partials[a.ws + ((static_cast<size_t>(tile) * slices + slice) * kQTileCols + c * 32 + l) * RP + k] = s;
        else if (j < cols && k < r)
          a.q[j * r + k] = s;
      }
    }
    if (!split) continue;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&counters[a.aux2 + tile], 1u) == slices - 1;
    __syncthreads();
    if (!last) continue;
    __threadfence();
    const float* tile_partials = partials + a.ws + static_cast<size_t>(tile) * slices * kQTileCols * RP;
    for (int o = threadIdx.x; o < static_cast<int>(kQTileCols) * RP; o += kThreads) {
      int jl = o / RP, k = o % RP;
      size_t j = j_base + jl;
      if (j >= cols || k >= r) continue;
      float s = 0.0f;
      for (unsigned sl = 0; sl < slices; ++sl) s += __ldcg(tile_partials + static_cast<size_t>(sl) * kQTileCols * RP + o);
      a.q[j * r + k] = s;
    }
    if (threadIdx.x == 0) counters[a.aux2 + tile] = 0;
  }
}

// ---- decompress: M̂ = scale·P·Qᵀ into M, E = M_old - M̂, Q_state <- Q ---------------
// A block owns 64 rows x 64 columns: each lane keeps the Q rows of its 2
// columns in registers, P's 64 rows are staged in shared memory (broadcast
// reads), and every element costs one read of M and E and one write of each.

template <int RP>
__global__ void __launch_bounds__(kThreads)
    decompress_kernel(const __grid_constant__ Batch b, int r, float scale, const float* skip) {
  constexpr int C = static_cast<int>(kDecompressCols / 32);
  constexpr int RT = static_cast<int>(kDecompressRows);
  constexpr int kRowsAtOnce = 4;
  __shared__ __align__(16) float ps[RT * RP];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool commit = skip == nullptr || *skip == 0.0f;
  for (unsigned unit = blockIdx.x; unit < b.units; unit += gridDim.x) {
    const MatArg& a = b.m[find_matrix<false>(b, unit)];
    const size_t rows = a.rows, cols = a.cols;
    const unsigned local = unit - a.first_unit;
    const unsigned row_tile = local / a.aux, col_tile = local % a.aux;
    const size_t i_begin = static_cast<size_t>(row_tile) * RT;
    const size_t j_base = static_cast<size_t>(col_tile) * kDecompressCols;
    float* __restrict__ grad = a.grad;
    float* __restrict__ err = commit ? a.error : nullptr;
    float qv[C][RP];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      size_t j = j_base + c * 32 + lane;
#pragma unroll
      for (int k = 0; k < RP; ++k) qv[c][k] = j < cols && k < r ? a.q[j * r + k] : 0.0f;
    }
    if (commit && row_tile == 0 && warp == 0 && a.q_state != a.q) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        size_t j = j_base + c * 32 + lane;
#pragma unroll
        for (int k = 0; k < RP; ++k)
          if (j < cols && k < r) a.q_state[j * r + k] = qv[c][k];
      }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < RT * RP; idx += kThreads) {
      int ii = idx / RP, c = idx % RP;
      size_t i = i_begin + ii;
      ps[idx] = i < rows && c < r ? a.p[i * r + c] : 0.0f;
    }
    __syncthreads();
    for (int ii0 = warp; ii0 < RT; ii0 += kWarps * kRowsAtOnce) {
      float old[kRowsAtOnce][C];  // M before, for E (not read without error feedback)
#pragma unroll
      for (int s = 0; s < kRowsAtOnce; ++s)
#pragma unroll
        for (int c = 0; c < C; ++c) {
          size_t i = i_begin + ii0 + s * kWarps, j = j_base + c * 32 + lane;
          old[s][c] = err != nullptr && i < rows && j < cols ? grad[i * cols + j] : 0.0f;
        }
#pragma unroll
      for (int s = 0; s < kRowsAtOnce; ++s) {
        float pv[RP];
        load_row<RP>(ps + (ii0 + s * kWarps) * RP, pv);
#pragma unroll
        for (int c = 0; c < C; ++c) {
          float dot = 0.0f;
#pragma unroll
          for (int k = 0; k < RP; ++k) dot = fmaf(pv[k], qv[c][k], dot);
          float approx = dot * scale;
          size_t i = i_begin + ii0 + s * kWarps, j = j_base + c * 32 + lane;
          if (i < rows && j < cols) {
            grad[i * cols + j] = approx;
            if (err != nullptr) err[i * cols + j] = old[s][c] - approx;
          }
        }
      }
    }
  }
}

// ---- orthogonalize ------------------------------------------------------------------
// Per panel (rows x r): G = PᵀP in double (slices of kOrthSliceRows rows), T from
// G (factor_block: the steps of factor_gram, each step's entries in parallel),
// then P <- P·T. One launch: blocks take units by ticket (an atomic counter), Gram
// units before apply units, so a block waiting for a panel's T only waits for
// blocks that already run: no deadlock whatever the scheduling. The last Gram
// block of a panel (arrival counter) sums the partial Grams in slice order,
// factors and publishes T; a panel of one slice is done by one block in one go.
// The last block to leave resets the counters.

struct OrthWorkspace {
  unsigned* ticket;
  unsigned* exited;
  unsigned* arrive;
  unsigned* ready;
  float* t;
  double* partials;
};

// Lanes in groups of RP: lane (g, k) holds element k of row base + g.
template <int RP>
__device__ void gram_rows(const float* p, size_t i_begin, size_t i_end, int r, double (*G)[RP + 1]) {
  constexpr int kGroups = 32 / RP;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane / RP, k = lane % RP;
  double acc[RP];
#pragma unroll
  for (int x = 0; x < RP; ++x) acc[x] = 0.0;
  for (size_t base = i_begin + static_cast<size_t>(warp) * kGroups; base < i_end; base += kWarps * kGroups) {
    size_t i = base + g;
    float x = i < i_end && k < r ? p[i * r + k] : 0.0f;
    double xd = x;
#pragma unroll
    for (int c = 0; c < RP; ++c) acc[c] = fma(xd, static_cast<double>(__shfl_sync(kFull, x, c, RP)), acc[c]);
  }
#pragma unroll
  for (int off = RP; off < 32; off *= 2)
#pragma unroll
    for (int c = 0; c < RP; ++c) acc[c] += __shfl_xor_sync(kFull, acc[c], off);
  for (int w = 0; w < kWarps; ++w) {  // warps in order: the same sum every run
    if (warp == w && g == 0)
#pragma unroll
      for (int c = 0; c < RP; ++c) G[k][c] = (w == 0 ? 0.0 : G[k][c]) + acc[c];
    __syncthreads();
  }
}

template <int RP>
__device__ void factor_block(double (*G)[RP + 1], double (*W)[RP + 1], double (*T)[RP + 1], double* c, int r,
                             double eps, float* tf) {
  for (int idx = threadIdx.x; idx < RP * RP; idx += kThreads) {
    int a = idx / RP, k = idx % RP;
    W[a][k] = G[a][k];
    T[a][k] = a == k ? 1.0 : 0.0;
  }
  __syncthreads();
  for (int j = 0; j < r; ++j) {
    const double d = W[j][j];
    const bool keep = keep_column(d, G[j][j], eps);
    const double s = keep ? 1.0 / sqrt(d) : 0.0;
    if (threadIdx.x < RP) {
      int k = threadIdx.x;
      if (keep && k > j && k < r) c[k] = W[j][k] * s;
      if (k <= j) T[k][j] = keep ? T[k][j] * s : 0.0;
    }
    __syncthreads();
    if (!keep) continue;
    for (int idx = threadIdx.x; idx < RP * RP; idx += kThreads) {
      int a = idx / RP, k = idx % RP;
      if (k <= j || k >= r) continue;
      if (a <= j)
        T[a][k] -= c[k] * T[a][j];
      else if (a < r)
        W[a][k] -= c[a] * c[k];
    }
    __syncthreads();
  }
  for (int idx = threadIdx.x; idx < RP * RP; idx += kThreads) {
    int a = idx / RP, k = idx % RP;
    tf[idx] = a < r && k < r ? static_cast<float>(T[a][k]) : 0.0f;
  }
  __syncthreads();
}

template <int RP>
__device__ void apply_rows(float* p, size_t i_begin, size_t i_end, int r, const float* tf) {
  constexpr int kGroups = 32 / RP;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane / RP, k = lane % RP;
  for (size_t base = i_begin + static_cast<size_t>(warp) * kGroups; base < i_end; base += kWarps * kGroups) {
    size_t i = base + g;
    bool in = i < i_end && k < r;
    float x = in ? p[i * r + k] : 0.0f;
    float out = 0.0f;
#pragma unroll
    for (int a = 0; a < RP; ++a) out = fmaf(__shfl_sync(kFull, x, a, RP), tf[a * RP + k], out);
    if (in) p[i * r + k] = out;
  }
}

template <int RP>
__global__ void __launch_bounds__(kThreads)
    orthogonalize_kernel(const __grid_constant__ Batch b, int r, double eps, OrthWorkspace ws) {
  __shared__ double G[RP][RP + 1], W[RP][RP + 1], T[RP][RP + 1];
  __shared__ double c[RP];
  __shared__ __align__(16) float tf[RP * RP];
  __shared__ unsigned unit_s;
  __shared__ bool last;
  for (;;) {
    __syncthreads();  // the previous unit is done with the shared state
    if (threadIdx.x == 0) unit_s = atomicAdd(ws.ticket, 1u);
    __syncthreads();
    const unsigned unit = unit_s;
    if (unit >= b.units) break;
    if (unit < b.first_units) {
      const int k = find_matrix<false>(b, unit);
      const MatArg& a = b.m[k];
      const unsigned slice = unit - a.first_unit;
      const size_t i_begin = static_cast<size_t>(slice) * kOrthSliceRows;
      const size_t i_end = i_begin + kOrthSliceRows < a.rows ? i_begin + kOrthSliceRows : a.rows;
      gram_rows<RP>(a.p, i_begin, i_end, r, G);
      if (a.aux == 1) {
        factor_block<RP>(G, W, T, c, r, eps, tf);
        apply_rows<RP>(a.p, i_begin, i_end, r, tf);
        continue;
      }
      double* part = ws.partials + a.ws + static_cast<size_t>(slice) * RP * RP;
      for (int idx = threadIdx.x; idx < RP * RP; idx += kThreads) part[idx] = G[idx / RP][idx % RP];
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) last = atomicAdd(&ws.arrive[k], 1u) == a.aux - 1;
      __syncthreads();
      if (!last) continue;
      __threadfence();
      for (int idx = threadIdx.x; idx < RP * RP; idx += kThreads) {
        double s = 0.0;
        for (unsigned sl = 0; sl < a.aux; ++sl) s += __ldcg(ws.partials + a.ws + static_cast<size_t>(sl) * RP * RP + idx);
        G[idx / RP][idx % RP] = s;
      }
      __syncthreads();
      factor_block<RP>(G, W, T, c, r, eps, tf);
      for (int idx = threadIdx.x; idx < RP * RP; idx += kThreads) ws.t[static_cast<size_t>(k) * RP * RP + idx] = tf[idx];
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) {
        ws.arrive[k] = 0;
        atomicExch(&ws.ready[k], 1u);
      }
    } else {
      const unsigned v = unit - b.first_units;
      const int k = find_matrix<true>(b, v);
      const MatArg& a = b.m[k];
      const size_t i_begin = static_cast<size_t>(v - a.aux2) * kOrthSliceRows;
      const size_t i_end = i_begin + kOrthSliceRows < a.rows ? i_begin + kOrthSliceRows : a.rows;
      if (threadIdx.x == 0)
        while (atomicAdd(&ws.ready[k], 0u) == 0u) __nanosleep(200);
      __syncthreads();
      __threadfence();
      for (int idx = threadIdx.x; idx < RP * RP; idx += kThreads)
        tf[idx] = __ldcg(ws.t + static_cast<size_t>(k) * RP * RP + idx);
      __syncthreads();
      apply_rows<RP>(a.p, i_begin, i_end, r, tf);
    }
  }
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(ws.exited, 1u) == gridDim.x - 1) {  // every other block has left
      for (unsigned k = 0; k < b.count; ++k) ws.ready[k] = 0;
      *ws.ticket = 0;
      *ws.exited = 0;
      __threadfence();
    }
  }
}

}  // namespace

void init_q(const Batch& b, int r, uint64_t seed, gcommStream_t stream) {
  if (b.units == 0) return;
  init_q_kernel<<<grid_for(b.units), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(b, r, seed);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void multiply_p(const Batch& b, int r, float* found_nonfinite, gcommStream_t stream) {
  if (b.units == 0) return;
  auto s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_rank(r, [&](auto rp) {
    multiply_p_kernel<decltype(rp)::value><<<grid_for(b.units), kThreads, 0, s>>>(b, r, found_nonfinite);
  });
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void orthogonalize(const Batch& b, int r, double eps, void* workspace, const WorkspaceLayout& layout,
                   gcommStream_t stream) {
  if (b.units == 0) return;
  char* base = static_cast<char*>(workspace);
  unsigned* counters = reinterpret_cast<unsigned*>(base + layout.orth_counters);
  OrthWorkspace ws{counters, counters + 1, counters + 2, counters + 2 + kBatchMatrices,
                   reinterpret_cast<float*>(base + layout.orth_t), reinterpret_cast<double*>(base + layout.orth_partials)};
  auto s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_rank(r, [&](auto rp) {
    orthogonalize_kernel<decltype(rp)::value><<<grid_for(b.units, kOrthGrid), kThreads, 0, s>>>(b, r, eps, ws);
  });
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void multiply_q(const Batch& b, int r, void* workspace, const WorkspaceLayout& layout, gcommStream_t stream) {
  if (b.units == 0) return;
  char* base = static_cast<char*>(workspace);
  unsigned* counters = reinterpret_cast<unsigned*>(base + layout.q_counters);
  float* partials = reinterpret_cast<float*>(base + layout.q_partials);
  auto s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_rank(r, [&](auto rp) {
    multiply_q_kernel<decltype(rp)::value><<<grid_for(b.units), kThreads, 0, s>>>(b, r, counters, partials);
  });
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void decompress(const Batch& b, int r, float scale, const float* skip, gcommStream_t stream) {
  if (b.units == 0) return;
  auto s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_rank(r, [&](auto rp) {
    decompress_kernel<decltype(rp)::value><<<grid_for(b.units), kThreads, 0, s>>>(b, r, scale, skip);
  });
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gradcomm::kernels::powersgd::cuda
