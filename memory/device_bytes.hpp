// Byte copies and fills on a device, in order on a stream: on the host
// they happen now (host work runs in order in the calling thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gradcomm/types.h"

namespace gradcomm::memory {

// Fills `bytes` at `ptr` with zeros. Nothing for zero bytes (an empty gradient may have no address).
void zero_bytes(void* ptr, size_t bytes, const gcommDevice_t& device, gcommStream_t stream);

// Copies host <-> device memory or device to device (`kind`). Nothing for zero bytes.
void copy_bytes(void* dst, const void* src, size_t bytes, const gcommDevice_t& device, gcommStream_t stream,
                cudaMemcpyKind kind);

}  // namespace gradcomm::memory
