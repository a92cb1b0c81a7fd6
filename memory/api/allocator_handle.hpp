// The C handle gcommAllocator_t and the C++ allocator behind it, for the layers
// above whose C APIs take an allocator handle (e.g. a reducer drawing its
// buffers from the embedder's allocator).
#pragma once

#include "gradcomm/memory.h"
#include "memory/caching_allocator.hpp"

namespace gradcomm {
namespace memory {

// The live allocator behind a handle; throws gcommInvalidArgument for NULL or a
// destroyed handle.
CachingAllocator& allocator_from_handle(gcommAllocator_t handle);

}  // namespace memory
}  // namespace gradcomm
