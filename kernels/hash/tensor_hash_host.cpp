#include <vector>

#include "kernels/hash/tensor_hash.hpp"

// xxHash from Debian's libxxhash-dev, inlined: nothing to load at run time.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace gradcomm::kernels::hash {

uint64_t combine(const uint64_t* chunk_hashes, size_t bytes) {
  return XXH64(chunk_hashes, chunks_of(bytes) * sizeof(uint64_t), static_cast<XXH64_hash_t>(bytes));
}

namespace host {

void chunk_hashes(const void* data, size_t bytes, uint64_t* out) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t c = 0, n = chunks_of(bytes); c < n; ++c) {
    const size_t begin = c * kChunkBytes;
    out[c] = XXH64(p + begin, bytes - begin < kChunkBytes ? bytes - begin : kChunkBytes, 0);
  }
}

uint64_t tensor_hash(const void* data, size_t bytes) {
  std::vector<uint64_t> chunks(chunks_of(bytes));
  chunk_hashes(data, bytes, chunks.data());
  return combine(chunks.data(), bytes);
}

}  // namespace host
}  // namespace gradcomm::kernels::hash
