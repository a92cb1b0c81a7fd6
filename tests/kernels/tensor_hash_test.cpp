// The divergence check's tensor hash (kernels/hash/): the GPU kernel's XXH64
// (xxh64_math.hpp), run here on the CPU, gives the library's value for every length
// around the stripe and chunk sizes and every misalignment; the chunked hash's
// definition (chunks, the combining pass, its seed); and, on a GPU, the kernel's
// chunk hashes equal the host's.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/hash/tensor_hash.hpp"
#include "kernels/hash/xxh64_math.hpp"
#include "support/gpu.hpp"

namespace gradcomm::kernels::hash {
namespace {

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

TEST(Xxh64, MatchesTheSpecificationsValueForNoBytes) {
  EXPECT_EQ(xxh64(nullptr, 0, 0), 0xEF46DB3751D8E999ull);
  uint64_t library = 0;
  host::chunk_hashes("", 0, &library);  // no chunks: nothing written
  EXPECT_EQ(library, 0u);
}

// One chunk's hash is the library's XXH64 with seed 0; the combining pass is the
// library's with the byte count as seed: the kernel's copy against both.
TEST(Xxh64, TheKernelsCopyGivesTheLibrarysValueAtEveryLengthAndAlignment) {
  const std::vector<unsigned char> bytes = random_bytes(kChunkBytes + 64, 7);
  for (size_t offset : {0, 1, 3, 5, 8}) {
    for (size_t len : {1, 3, 4, 7, 8, 9, 15, 31, 32, 33, 63, 64, 65, 100, 1000, 4097, 65535, 65536}) {
      if (offset + len > bytes.size() || len > kChunkBytes) continue;
      uint64_t library = 0;
      host::chunk_hashes(bytes.data() + offset, len, &library);
      EXPECT_EQ(xxh64(bytes.data() + offset, len, 0), library) << "offset " << offset << ", length " << len;
    }
  }
  for (size_t words : {1, 2, 3, 4, 5, 9}) {
    std::vector<uint64_t> chunk_hashes(words);
    std::memcpy(chunk_hashes.data(), bytes.data() + 11, words * sizeof(uint64_t));
    const size_t span = (words - 1) * kChunkBytes + 17;  // a span of that many chunks
    EXPECT_EQ(xxh64(chunk_hashes.data(), words * sizeof(uint64_t), span), combine(chunk_hashes.data(), span))
        << words << " chunks";
  }
}

TEST(TensorHash, IsTheCombinedHashOfItsChunks) {
  const std::vector<unsigned char> bytes = random_bytes(3 * kChunkBytes + 1000, 11);
  EXPECT_EQ(chunks_of(0), 0u);
  EXPECT_EQ(chunks_of(1), 1u);
  EXPECT_EQ(chunks_of(kChunkBytes), 1u);
  EXPECT_EQ(chunks_of(kChunkBytes + 1), 2u);
  const size_t n = bytes.size();
  std::vector<uint64_t> chunks(chunks_of(n));
  for (size_t c = 0; c < chunks.size(); ++c)
    chunks[c] = xxh64(bytes.data() + c * kChunkBytes, std::min(kChunkBytes, n - c * kChunkBytes), 0);
  EXPECT_EQ(host::tensor_hash(bytes.data(), n), xxh64(chunks.data(), chunks.size() * 8, n));
  // One bit anywhere changes it; so does the length (the seed), even over zeros.
  std::vector<unsigned char> flipped = bytes;
  flipped[2 * kChunkBytes + 5] ^= 0x10;
  EXPECT_NE(host::tensor_hash(flipped.data(), n), host::tensor_hash(bytes.data(), n));
  const std::vector<unsigned char> zeros(2 * kChunkBytes, 0);
  EXPECT_NE(host::tensor_hash(zeros.data(), kChunkBytes), host::tensor_hash(zeros.data(), 2 * kChunkBytes));
  EXPECT_EQ(host::tensor_hash(nullptr, 0), xxh64(nullptr, 0, 0));
}

TEST(TensorHashGpu, TheKernelsChunkHashesAreTheHosts) {
  GCOMM_SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{0}, size_t{1}, size_t{33}, kChunkBytes, 5 * kChunkBytes + 3}) {
    const std::vector<unsigned char> bytes = random_bytes(n + 1, static_cast<uint32_t>(n));
    unsigned char* d = nullptr;
    uint64_t* out = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), n + 1), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), (chunks_of(n) + 1) * 8), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d, bytes.data(), n + 1, cudaMemcpyHostToDevice), cudaSuccess);
    cuda::chunk_hashes(d + 1, n, out, nullptr);  // misaligned by one byte
    std::vector<uint64_t> got(chunks_of(n)), want(chunks_of(n));
    ASSERT_EQ(cudaMemcpy(got.data(), out, got.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    host::chunk_hashes(bytes.data() + 1, n, want.data());
    EXPECT_EQ(got, want) << n << " bytes";
    cudaFree(d);
    cudaFree(out);
  }
}

}  // namespace
}  // namespace gradcomm::kernels::hash
