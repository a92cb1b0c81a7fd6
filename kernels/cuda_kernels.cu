// CUDA kernels: one multi-tensor-apply kernel (templated on the element op), the
// deterministic L2 norm, and the loss-scale update. Every kernel uses the
// functors of functors.hpp, which the host twins run too.
//
// Multi-tensor apply: the tensor list travels in the kernel parameters (CUDA
// 12.1+ allows 32 KiB; a Batch<N> holds up to N tensors), each tensor cut in
// chunks of kChunkElements; block b works on chunks b, b + gridDim.x, ... and
// finds its tensor by binary search over the batch's chunk prefix. Longer lists
// take ceil(n / N) launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/cuda_check.hpp"
#include "kernels/backend.hpp"
#include "kernels/block_sum.cuh"
#include "kernels/functors.hpp"

namespace gradcomm::kernels::cuda {

namespace {

constexpr int kThreads = 256;
// Elements per thread per loop pass: 16 bytes of f16/bf16, 32 of f32, loaded as
// 16-byte vectors. At 8 the in-place unscale reached 85-87% of the H100's copy
// bandwidth (bench/results/2026-11-22-h100-89c61a9); 16, meant to double the bytes
// in flight, made it slower (GPT-2 medium: unscale 1106 -> 1204 us, the unpack
// epilogue 1266 -> 1538 us; 2026-11-27-h100-0edc4a0, copy baseline unchanged).
constexpr int kVec = 8;
// Every launch copies its whole parameter block, so the block's size is host time
// spent per launch. On the H100 (bench/results/2026-11-27-h100-0edc4a0) GPT-2
// medium's 54 per-bucket unpack launches, each with the 32 KiB block, cost 745 us
// more host time than one fused launch (14 us each, where a launch usually takes a
// few): the likely cause of the copying step's regression since 55b4189 (inferred,
// not yet measured with the fix). A list of up to kSmallBatch tensors (most
// buckets') travels in a 2 KiB block; longer lists in kLargeBatch ones.
constexpr int kSmallBatch = 64;
constexpr int kLargeBatch = 900;
constexpr unsigned kMaxBlocks = 65535;

struct TensorArg {
  void* a;
  void* b;
  unsigned long long n;
  unsigned int first_chunk;  // within the batch
  unsigned int index;        // Pair::index: its flag in found_per_tensor
};

template <int N>
struct Batch {
  static constexpr int kCapacity = N;
  TensorArg t[N];
  int count;
  unsigned int total_chunks;
  unsigned long long chunk_base;  // first chunk of this batch in the whole list (norm partials)
};
static_assert(sizeof(Batch<kLargeBatch>) <= 32000, "a Batch must fit CUDA's kernel parameter space");
static_assert(sizeof(Batch<kSmallBatch>) <= 4096, "the small Batch is the short-launch one");

template <class T>
struct alignas(16) Vec {
  T v[kVec];
};

template <int N>
__device__ __forceinline__ int find_tensor(const Batch<N>& batch, unsigned int chunk) {
  int lo = 0, hi = batch.count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (batch.t[mid].first_chunk <= chunk)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The scale every block computes from its inputs (device scalars are read once per block).
struct ScaleSource {
  float scale;
  const float* device_scale;
  const float* norm;  // clip: scale = clip_factor(*norm, max_norm)
  float max_norm;
  __device__ float value() const {
    if (norm != nullptr) return clip_factor(*norm, max_norm);
    return device_scale != nullptr ? scale * *device_scale : scale;
  }
};

template <class Op, int N>
__global__ void __launch_bounds__(kThreads)
    apply_kernel(const __grid_constant__ Batch<N> batch, ScaleSource source, float* found_inf,
                 float* found_per_tensor) {
  using TA = typename Op::TA;
  using TB = typename Op::TB;
  const Op op{source.value()};
  bool nonfinite = false;
  for (unsigned int c = blockIdx.x; c < batch.total_chunks; c += gridDim.x) {
    const TensorArg& t = batch.t[find_tensor(batch, c)];
    const bool before = nonfinite;
    nonfinite = false;
    size_t begin = static_cast<size_t>(c - t.first_chunk) * kChunkElements;
    size_t end = begin + kChunkElements < t.n ? begin + kChunkElements : t.n;
    bool aligned = reinterpret_cast<uintptr_t>(t.a) % 16 == 0 && reinterpret_cast<uintptr_t>(t.b) % 16 == 0;
    size_t vec_end = aligned ? begin + (end - begin) / kVec * kVec : begin;
    for (size_t i = begin + threadIdx.x * kVec; i < vec_end; i += kThreads * kVec) {
      Vec<TA> va{};
      Vec<TB> vb{};
      if (Op::kReadA) va = *reinterpret_cast<const Vec<TA>*>(static_cast<TA*>(t.a) + i);
      if (Op::kReadB) vb = *reinterpret_cast<const Vec<TB>*>(static_cast<TB*>(t.b) + i);
#pragma unroll
      for (int j = 0; j < kVec; ++j) nonfinite |= op(va.v[j], vb.v[j]);
      if (Op::kWriteA) *reinterpret_cast<Vec<TA>*>(static_cast<TA*>(t.a) + i) = va;
      if (Op::kWriteB) *reinterpret_cast<Vec<TB>*>(static_cast<TB*>(t.b) + i) = vb;
    }
    for (size_t i = vec_end + threadIdx.x; i < end; i += kThreads)
      nonfinite |= apply_at(op, static_cast<TA*>(t.a), static_cast<TB*>(t.b), i);
    // This chunk's tensor: the same value from every writer (a benign race).
    if (nonfinite && found_per_tensor != nullptr) found_per_tensor[t.index] = 1.0f;
    nonfinite = nonfinite || before;
  }
  // Every writer stores the same value: a benign race, as in PyTorch.
  if (nonfinite && found_inf != nullptr) *found_inf = 1.0f;
}

// Splits a tensor list into batches of up to N tensors (empty tensors are
// skipped: they have no chunk) and calls launch(batch) for each.
template <int N, class Launch>
void for_each_batch(const Pair* pairs, size_t n, Launch&& launch) {
  Batch<N> batch{};
  unsigned long long base = 0;
  auto flush = [&] {
    if (batch.count == 0) return;
    batch.chunk_base = base;
    launch(batch);
    base += batch.total_chunks;
    batch.count = 0;
    batch.total_chunks = 0;
  };
  for (size_t k = 0; k < n; ++k) {
    if (pairs[k].n == 0) continue;
    size_t chunks = chunks_of(pairs[k].n);
    if (batch.count == N || batch.total_chunks + chunks > 0x7fffffffu) flush();
    batch.t[batch.count] = TensorArg{pairs[k].a, pairs[k].b, pairs[k].n, batch.total_chunks, pairs[k].index};
    batch.total_chunks += static_cast<unsigned int>(chunks);
    ++batch.count;
  }
  flush();
}

unsigned grid_for(unsigned int chunks) {
  return std::min<unsigned>(chunks, kMaxBlocks);
}

template <class Op>
void launch_apply(const Pair* pairs, size_t n, const ScaleSource& source, float* found_inf,
                  cudaStream_t stream, float* found_per_tensor = nullptr) {
  auto launch = [&](const auto& batch) {
    constexpr int kN = std::decay_t<decltype(batch)>::kCapacity;
    apply_kernel<Op, kN>
        <<<grid_for(batch.total_chunks), kThreads, 0, stream>>>(batch, source, found_inf, found_per_tensor);
    GCOMM_CUDA_CHECK(cudaGetLastError());
  };
  if (n <= kSmallBatch)
    for_each_batch<kSmallBatch>(pairs, n, launch);
  else
    for_each_batch<kLargeBatch>(pairs, n, launch);
}

template <class A, class B>
void dispatch_pair(const OpSpec& spec, const Pair* pairs, size_t n, const ScaleSource& source,
                   cudaStream_t stream) {
  switch (spec.kind) {
    case OpKind::kPack:
      if (spec.found_per_tensor != nullptr)
        launch_apply<PackOp<A, B, B, true>>(pairs, n, source, spec.found_inf, stream, spec.found_per_tensor);
      else
        launch_apply<PackOp<A, B>>(pairs, n, source, nullptr, stream);
      break;
    case OpKind::kUnpack:
      if (spec.accumulate)
        launch_apply<UnpackOp<A, B, true>>(pairs, n, source, spec.found_inf, stream);
      else
        launch_apply<UnpackOp<A, B, false>>(pairs, n, source, spec.found_inf, stream);
      break;
    case OpKind::kCheck:
      if constexpr (std::is_same<A, B>::value)
        launch_apply<CheckOp<A>>(pairs, n, source, spec.found_inf, stream);
      break;
    case OpKind::kUnscale:
    case OpKind::kClip:
      if constexpr (std::is_same<A, B>::value)
        launch_apply<UnscaleOp<A>>(pairs, n, source, spec.kind == OpKind::kClip ? nullptr : spec.found_inf,
                                   stream);
      break;
  }
}

// ---- L2 norm -------------------------------------------------------------------
// Pass 1: each block sums the squares of one chunk in double, in a fixed tree,
// into partial[chunk]. Pass 2: one warp per tensor sums its chunks in order.
// Pass 3: one block sums the tensors in a fixed tree. Same bits every run.

template <class T>
__global__ void __launch_bounds__(kThreads)
    chunk_squares_kernel(const __grid_constant__ Batch<kLargeBatch> batch, double* partial) {
  __shared__ double shared[kThreads];
  for (unsigned int c = blockIdx.x; c < batch.total_chunks; c += gridDim.x) {
    const TensorArg& t = batch.t[find_tensor(batch, c)];
    size_t begin = static_cast<size_t>(c - t.first_chunk) * kChunkElements;
    size_t end = begin + kChunkElements < t.n ? begin + kChunkElements : t.n;
    const T* x = static_cast<const T*>(t.a);
    double sum = 0.0;
    for (size_t i = begin + threadIdx.x; i < end; i += kThreads) {
      double v = to_float(x[i]);
      sum += v * v;
    }
    double total = block_sum<kThreads>(sum, shared);
    if (threadIdx.x == 0) partial[batch.chunk_base + c] = total;
  }
}

// tensor_chunks[k] = number of chunks of tensor k (0 for empty ones), first[k] its first partial.
__global__ void tensor_sums_kernel(const double* partial, const unsigned long long* first,
                                   const unsigned int* chunks, int n, double* tensor_sq, float* per_tensor) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= n) return;
  double sum = 0.0;
  for (unsigned int c = lane; c < chunks[warp]; c += 32) sum += partial[first[warp] + c];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) {
    tensor_sq[warp] = sum;
    if (per_tensor != nullptr) per_tensor[warp] = static_cast<float>(sqrt(sum));
  }
}

__global__ void __launch_bounds__(kThreads)
    global_sum_kernel(const double* tensor_sq, int n, float* global_norm, double* sum_of_squares) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  for (int k = threadIdx.x; k < n; k += kThreads) sum += tensor_sq[k];
  double total = block_sum<kThreads>(sum, shared);
  if (threadIdx.x == 0) {
    *global_norm = static_cast<float>(sqrt(total));
    if (sum_of_squares != nullptr) *sum_of_squares = total;
  }
}

// A handful of ranks' sums of squares, added in order by one thread (as the host twin).
__global__ void copy_unless_flagged_kernel(float* dst, const float* src, size_t count, const float* skip) {
  if (skip != nullptr && *skip > 0.0f) return;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__global__ void norm_of_sums_kernel(const double* squares, unsigned int n, float* norm) {
  double total = 0.0;
  for (unsigned int k = 0; k < n; ++k) total += squares[k];
  *norm = static_cast<float>(sqrt(total));
}

__global__ void update_scale_kernel(ScalerState* state, ScalerParams params) {
  kernels::update_scale(*state, params);
}

}  // namespace

void apply(const OpSpec& spec, const Pair* pairs, size_t n, gcommStream_t stream) {
  ScaleSource source{spec.scale, spec.device_scale, spec.kind == OpKind::kClip ? spec.norm : nullptr,
                     spec.max_norm};
  auto s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_dtype(spec.a_dtype, [&](auto a) {
    dispatch_dtype(spec.b_dtype,
                   [&](auto b) { dispatch_pair<decltype(a), decltype(b)>(spec, pairs, n, source, s); });
  });
}

void l2_norm(const gcommTensor_t* tensors, size_t n, float* global_norm, float* per_tensor, double* workspace,
             gcommStream_t stream, double* sum_of_squares) {
  auto s = reinterpret_cast<cudaStream_t>(stream);
  // Layout: [partials of every chunk][squared norm of every tensor]. Chunk
  // offsets are the same prefix the batches use, so empty tensors get 0 chunks.
  std::vector<unsigned long long> first(n);
  std::vector<unsigned int> chunks(n);
  unsigned long long total_chunks = 0;
  for (size_t k = 0; k < n; ++k) {
    first[k] = total_chunks;
    chunks[k] = static_cast<unsigned int>(chunks_of(tensors[k].count));
    total_chunks += chunks[k];
  }
  double* partial = workspace;
  double* tensor_sq = workspace + total_chunks;
  // Per dtype group, in list order: batches of one dtype at a time keep one
  // instantiation per kernel; the chunk base of each batch indexes `partial`.
  size_t k = 0;
  while (k < n) {
    size_t j = k;
    while (j < n && tensors[j].dtype == tensors[k].dtype) ++j;
    std::vector<Pair> pairs;
    pairs.reserve(j - k);
    for (size_t i = k; i < j; ++i) pairs.push_back(Pair{tensors[i].data, tensors[i].data, tensors[i].count});
    unsigned long long group_base = first[k];
    dispatch_dtype(tensors[k].dtype, [&](auto tag) {
      using T = decltype(tag);
      for_each_batch<kLargeBatch>(pairs.data(), pairs.size(), [&](const Batch<kLargeBatch>& batch) {
        Batch<kLargeBatch> shifted = batch;
        shifted.chunk_base += group_base;
        chunk_squares_kernel<T><<<grid_for(batch.total_chunks), kThreads, 0, s>>>(shifted, partial);
        GCOMM_CUDA_CHECK(cudaGetLastError());
      });
    });
    k = j;
  }
  // The per-tensor chunk tables live in the workspace's tail, filled by a
  // stream-ordered copy (pageable sources are staged before the call returns).
  size_t table_bytes = n * (sizeof(unsigned long long) + sizeof(unsigned int));
  unsigned long long* d_first = reinterpret_cast<unsigned long long*>(tensor_sq + n);
  unsigned int* d_chunks = reinterpret_cast<unsigned int*>(d_first + n);
  std::vector<unsigned char> table(table_bytes);
  std::copy_n(reinterpret_cast<const unsigned char*>(first.data()), n * sizeof(unsigned long long),
              table.data());
  std::copy_n(reinterpret_cast<const unsigned char*>(chunks.data()), n * sizeof(unsigned int),
              table.data() + n * sizeof(unsigned long long));
  if (n > 0) {
    GCOMM_CUDA_CHECK(cudaMemcpyAsync(d_first, table.data(), table_bytes, cudaMemcpyHostToDevice, s));
    int warps_per_block = kThreads / 32;
    int blocks = static_cast<int>((n + warps_per_block - 1) / warps_per_block);
    tensor_sums_kernel<<<blocks, kThreads, 0, s>>>(partial, d_first, d_chunks, static_cast<int>(n), tensor_sq,
                                                   per_tensor);
    GCOMM_CUDA_CHECK(cudaGetLastError());
  }
  global_sum_kernel<<<1, kThreads, 0, s>>>(tensor_sq, static_cast<int>(n), global_norm, sum_of_squares);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void norm_of_sums(const double* squares, size_t n, float* norm, gcommStream_t stream) {
  norm_of_sums_kernel<<<1, 1, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      squares, static_cast<unsigned int>(n), norm);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void copy_unless_flagged(float* dst, const float* src, size_t count, const float* skip,
                         gcommStream_t stream) {
  const unsigned grid =
      static_cast<unsigned>(std::min<size_t>((count + kThreads * 4 - 1) / (kThreads * 4), 4096));
  copy_unless_flagged_kernel<<<grid, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(dst, src, count,
                                                                                            skip);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void update_scale(ScalerState* state, const ScalerParams& params, gcommStream_t stream) {
  update_scale_kernel<<<1, 1, 0, reinterpret_cast<cudaStream_t>(stream)>>>(state, params);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gradcomm::kernels::cuda
