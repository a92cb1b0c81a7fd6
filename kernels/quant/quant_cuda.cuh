// CUDA paths of kernels/quant/quant.hpp for a number format F, instantiated by
// the format's CUDA file into its Codec: one thread block per quantized block for
// the two quantizing kernels (the block's max |v| is a block-wide reduction), a
// grid-stride loop for decoding. The element math is quant_math.hpp's, so the bits
// are the host twins'.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda_check.hpp"
#include "common/error.hpp"
#include "kernels/quant/quant.hpp"
#include "kernels/quant/quant_math.hpp"

namespace gradcomm::kernels::quant::cuda {

namespace detail {

constexpr int kThreads = 256;

inline cudaStream_t as_stream(gcommStream_t s) {
  return static_cast<cudaStream_t>(s);
}

// Every thread gets the block's max |v| (NaN if any thread saw NaN), in a fixed tree.
__device__ inline float block_amax(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] = amax_merge(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}

__device__ inline float value_at(const float* x, const float* e, size_t n, size_t i) {
  if (i >= n) return 0.0f;
  return e != nullptr ? add_rn(x[i], e[i]) : x[i];
}

template <class F>
__global__ void quantize_kernel(const float* x, const float* e, Layout l, void* out, float* residual) {
  __shared__ float shared[kThreads];
  const size_t k = blockIdx.x;
  const size_t chunk = k / l.blocks_per_chunk, b = k % l.blocks_per_chunk;
  const size_t first = k * l.block;
  float amax = 0.0f;
  for (size_t j = threadIdx.x; j < l.block; j += blockDim.x)
    amax = amax_add(amax, value_at(x, e, l.n, first + j));
  amax = block_amax(amax, shared);
  const float scale = scale_of<F>(amax);
  const Encoder enc = encoder_for<F>(amax);
  uint8_t* codes = const_cast<uint8_t*>(codes_of(out, l, chunk, b));
  if (threadIdx.x == 0) const_cast<float*>(scales_of(out, l, chunk))[b] = scale;
  // A thread per byte of codes: a 4-bit code's byte holds two elements' codes.
  constexpr size_t per = kCodesPerByte<F>;
  for (size_t jb = threadIdx.x; jb < l.block / per; jb += blockDim.x) {
    float v[per];
    for (size_t p = 0; p < per; ++p) v[p] = value_at(x, e, l.n, first + jb * per + p);
    const uint8_t byte = encode_byte<F>(v, enc);
    codes[jb] = byte;
    for (size_t p = 0; p < per; ++p) {
      const size_t j = jb * per + p;
      if (residual != nullptr && first + j < l.n)
        residual[first + j] = add_rn(v[p], -decode<F>(code_at<F>(&byte, p), scale));
    }
  }
}

// sums: l.block floats of dynamic shared memory, after the reduction's kThreads.
template <class F>
__global__ void sum_requantize_kernel(const void* in, size_t ranks, Layout l, const float* e, void* out,
                                      float* residual) {
  extern __shared__ float dynamic[];
  float* shared = dynamic;
  float* sums = dynamic + kThreads;
  const size_t b = blockIdx.x;
  float amax = 0.0f;
  for (size_t j = threadIdx.x; j < l.block; j += blockDim.x) {
    float s = 0.0f;
    for (size_t r = 0; r < ranks; ++r)
      s = add_rn(s, decode<F>(code_at<F>(codes_of(in, l, r, b), j), scales_of(in, l, r)[b]));
    if (e != nullptr) s = add_rn(s, e[b * l.block + j]);
    sums[j] = s;
    amax = amax_add(amax, s);
  }
  amax = block_amax(amax, shared);
  const float scale = scale_of<F>(amax);
  const Encoder enc = encoder_for<F>(amax);
  uint8_t* codes = const_cast<uint8_t*>(codes_of(out, l, 0, b));
  if (threadIdx.x == 0) const_cast<float*>(scales_of(out, l, 0))[b] = scale;
  constexpr size_t per = kCodesPerByte<F>;
  for (size_t jb = threadIdx.x; jb < l.block / per; jb += blockDim.x) {
    const uint8_t byte = encode_byte<F>(sums + jb * per, enc);
    codes[jb] = byte;
    for (size_t p = 0; p < per; ++p) {
      const size_t j = jb * per + p;
      if (residual != nullptr)
        residual[b * l.block + j] = add_rn(sums[j], -decode<F>(code_at<F>(&byte, p), scale));
    }
  }
}

template <class F>
__global__ void dequantize_kernel(const void* in, Layout l, float* out) {
  const size_t per_chunk = l.chunk_elements();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < l.n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t chunk = i / per_chunk, within = i % per_chunk;
    const size_t b = within / l.block;
    out[i] = decode<F>(code_at<F>(codes_of(in, l, chunk, b), within % l.block), scales_of(in, l, chunk)[b]);
  }
}

inline unsigned threads_for(const Layout& l) {
  return static_cast<unsigned>(std::min<size_t>(l.block, kThreads));
}
}  // namespace detail

template <class F>
void quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
              gcommStream_t stream) {
  using namespace detail;
  const size_t blocks = l.chunks * l.blocks_per_chunk;
  if (blocks == 0) return;
  require(blocks <= 0x7fffffffu, "quantize: ", blocks, " blocks exceed one grid");
  quantize_kernel<F>
      <<<static_cast<unsigned>(blocks), threads_for(l), 0, as_stream(stream)>>>(x, e, l, out, residual);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

template <class F>
void sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out, float* residual,
                    gcommStream_t stream) {
  using namespace detail;
  if (l.blocks_per_chunk == 0) return;
  require(l.blocks_per_chunk <= 0x7fffffffu, "sum_requantize: ", l.blocks_per_chunk,
          " blocks exceed one grid");
  const size_t shared = (kThreads + l.block) * sizeof(float);  // at most (256 + 4096) * 4 bytes
  sum_requantize_kernel<F>
      <<<static_cast<unsigned>(l.blocks_per_chunk), threads_for(l), shared, as_stream(stream)>>>(
          in, ranks, l, e, out, residual);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

template <class F>
void dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream) {
  using namespace detail;
  if (l.n == 0) return;
  const unsigned grid =
      static_cast<unsigned>(std::min<size_t>((l.n + kThreads * 4 - 1) / (kThreads * 4), 4096));
  dequantize_kernel<F><<<grid, kThreads, 0, as_stream(stream)>>>(in, l, out);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gradcomm::kernels::quant::cuda
