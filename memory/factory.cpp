// Picks the upstream and the event source for a memory kind on a device.
#include "common/device.hpp"
#include "common/error.hpp"
#include "memory/caching_allocator.hpp"

namespace gradcomm {
namespace memory {

std::unique_ptr<CachingAllocator> make_caching_allocator(gcommDevice_t device, gcommMemoryKind_t kind,
                                                         const AllocatorOptions& options) {
  validate_options(options);
  if (kind == gcommMemoryDefault) kind = is_host(device) ? gcommMemoryHost : gcommMemoryDevice;
  switch (kind) {
    case gcommMemoryHost:
      // Plain host memory involves no CUDA call, whatever the device.
      return std::make_unique<CachingAllocator>(make_host_upstream(), std::make_unique<ImmediateEvents>(),
                                                options);
    case gcommMemoryDevice:
    case gcommMemoryPinnedHost:
      require(!is_host(device), kind == gcommMemoryDevice ? "gcommMemoryDevice" : "gcommMemoryPinnedHost",
              " needs a CUDA device, but the allocator's device is the host; use gcommMemoryHost");
      return std::make_unique<CachingAllocator>(kind == gcommMemoryDevice
                                                    ? make_cuda_device_upstream(device.ordinal)
                                                    : make_cuda_pinned_upstream(device.ordinal),
                                                make_cuda_event_source(device.ordinal), options);
    default:
      fail(gcommInvalidArgument, "memory kind ", static_cast<int>(kind), " is not a gcommMemoryKind_t (0..",
           gcommNumMemoryKinds - 1, ")");
  }
}

}  // namespace memory
}  // namespace gradcomm
