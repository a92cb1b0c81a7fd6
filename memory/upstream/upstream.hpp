// The raw memory sources under the caching allocator (RMM's "memory resource"
// idea, reduced to what a stream-ordered cache needs). An upstream is bound to
// one device and is called only with the cache's lock held, so it need not be
// thread-safe itself.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "gradcomm/types.h"

namespace gradcomm {
namespace memory {

// What a device reports about its memory (cudaMemGetInfo), for OOM messages.
struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

class Upstream {
 public:
  virtual ~Upstream() = default;
  // Returns at least `bytes` (> 0) bytes, 256-byte aligned. Throws Error with
  // gcommOutOfMemory when the memory cannot be had (the cache then flushes and
  // retries), another status for any other failure.
  virtual void* allocate(size_t bytes) = 0;
  // Returns memory from allocate() with the same size. Never throws.
  virtual void deallocate(void* ptr, size_t bytes) noexcept = 0;
  // The device the memory belongs to (whose context the calls use).
  virtual gcommDevice_t device() const noexcept = 0;
  // E.g. "device memory", "pinned host memory", "host memory".
  virtual const char* kind_name() const noexcept = 0;
  // True when deallocate() itself waits for all device work (cudaFree does), or
  // when no device work can touch the memory (plain host memory): the cache may
  // then give back a free segment without waiting for the streams that freed it.
  virtual bool deallocate_waits_for_device() const noexcept { return false; }
  // Free/total memory of the device if it can be told cheaply, for OOM messages.
  virtual std::optional<MemoryInfo> memory_info() const noexcept { return std::nullopt; }
};

// Plain host memory from aligned_alloc (256-byte alignment).
std::unique_ptr<Upstream> make_host_upstream();
// cudaMalloc on CUDA device `ordinal`, every call under a DeviceGuard for it.
std::unique_ptr<Upstream> make_cuda_device_upstream(int ordinal);
// cudaHostAlloc (page-locked host memory) in CUDA device `ordinal`'s context.
std::unique_ptr<Upstream> make_cuda_pinned_upstream(int ordinal);

}  // namespace memory
}  // namespace gradcomm
