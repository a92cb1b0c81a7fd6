// The tensor hash of the divergence check (comm/divergence/): a span of bytes is
// cut into 64 KiB chunks (the last one shorter), each chunk is hashed with XXH64
// (seed 0), and the chunks' hashes, as little-endian 64-bit words, are hashed again
// with XXH64 seeded with the span's byte count. The chunks let a GPU hash a span
// in parallel (a thread a chunk) and the host give the same value; the combining
// pass is the host's on both (a few words per MiB).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gradcomm/types.h"

namespace gradcomm::kernels::hash {

constexpr size_t kChunkBytes = size_t{64} << 10;

constexpr size_t chunks_of(size_t bytes) {
  return bytes / kChunkBytes + (bytes % kChunkBytes != 0 ? 1 : 0);
}

// The span's hash from its chunks' hashes (chunks_of(bytes) of them).
uint64_t combine(const uint64_t* chunk_hashes, size_t bytes);

namespace host {
// out[c] = XXH64 of chunk c of [data, data + bytes), for c < chunks_of(bytes).
void chunk_hashes(const void* data, size_t bytes, uint64_t* out);
// The tensor hash of a host span.
uint64_t tensor_hash(const void* data, size_t bytes);
}  // namespace host

namespace cuda {
// The same chunk hashes of a device span, into device memory `out`, on `stream`.
void chunk_hashes(const void* data, size_t bytes, uint64_t* out, gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels::hash
