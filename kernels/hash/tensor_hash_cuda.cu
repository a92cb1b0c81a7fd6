#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"
#include "kernels/hash/tensor_hash.hpp"
#include "kernels/hash/xxh64_math.hpp"

namespace gradcomm::kernels::hash {
namespace {

// A thread a chunk: XXH64 reads its chunk front to back.
__global__ void chunk_hashes_kernel(const unsigned char* data, size_t bytes, size_t chunks, uint64_t* out) {
  const size_t c = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (c >= chunks) return;
  const size_t begin = c * kChunkBytes;
  const size_t len = bytes - begin < kChunkBytes ? bytes - begin : kChunkBytes;
  out[c] = xxh64(data + begin, len, 0);
}

}  // namespace

namespace cuda {
void chunk_hashes(const void* data, size_t bytes, uint64_t* out, gcommStream_t stream) {
  const size_t chunks = chunks_of(bytes);
  if (chunks == 0) return;
  constexpr unsigned kThreads = 128;
  const auto blocks = static_cast<unsigned>((chunks + kThreads - 1) / kThreads);
  chunk_hashes_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const unsigned char*>(data), bytes, chunks, out);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}
}  // namespace cuda

}  // namespace gradcomm::kernels::hash
