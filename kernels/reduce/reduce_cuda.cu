// CUDA kernels of the local transport (the GPU twins of reduce_host.cpp).
#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda_check.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/reduce/reduce_math.hpp"

namespace gradcomm::kernels::reduce_cuda {

namespace {

constexpr int kThreads = 256;

struct Sends {
  const void* p[kMaxReduceInputs];
};

template <class T>
__device__ float reduce_at(const Sends& s, int n, size_t j, gcommRedOp_t op) {
  float acc = to_float(static_cast<const T*>(s.p[0])[j]);
  for (int q = 1; q < n; ++q) acc = combine(op, acc, to_float(static_cast<const T*>(s.p[q])[j]));
  return finish(op, acc, n);
}

template <class T>
__global__ void reduce_to_float_kernel(const __grid_constant__ Sends s, int n, size_t offset, size_t count,
                                       gcommRedOp_t op, float* out) {
  for (size_t i = blockIdx.x * size_t{kThreads} + threadIdx.x; i < count; i += size_t{gridDim.x} * kThreads)
    out[i] = reduce_at<T>(s, n, offset + i, op);
}

template <class T>
__global__ void reduce_to_typed_kernel(const __grid_constant__ Sends s, int n, size_t offset, size_t count,
                                       gcommRedOp_t op, T* out) {
  for (size_t i = blockIdx.x * size_t{kThreads} + threadIdx.x; i < count; i += size_t{gridDim.x} * kThreads)
    out[i] = from_float<T>(reduce_at<T>(s, n, offset + i, op));
}

template <class T>
__global__ void float_to_typed_kernel(const float* in, T* out, size_t count) {
  for (size_t i = blockIdx.x * size_t{kThreads} + threadIdx.x; i < count; i += size_t{gridDim.x} * kThreads)
    out[i] = from_float<T>(in[i]);
}

unsigned blocks_for(size_t count) {
  return static_cast<unsigned>(std::min<size_t>((count + kThreads - 1) / kThreads, 4096));
}

Sends pack_sends(const void* const* sends, int n) {
  Sends s{};
  for (int q = 0; q < n; ++q) s.p[q] = sends[q];
  return s;
}

}  // namespace

void reduce_to_float(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, float* out, gcommStream_t stream) {
  if (count == 0) return;
  Sends s = pack_sends(sends, n);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_to_float_kernel<T><<<blocks_for(count), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        s, n, offset, count, op, out);
  });
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void reduce_to_typed(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, void* out, gcommStream_t stream) {
  if (count == 0) return;
  Sends s = pack_sends(sends, n);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_to_typed_kernel<T><<<blocks_for(count), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        s, n, offset, count, op, static_cast<T*>(out));
  });
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype, gcommStream_t stream) {
  if (count == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    float_to_typed_kernel<T><<<blocks_for(count), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        in, static_cast<T*>(out), count);
  });
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gradcomm::kernels::reduce_cuda
