// The out-of-memory error: everything a user needs to decide what to change,
// in one message.
#include <sstream>

#include "common/device.hpp"
#include "common/error.hpp"
#include "memory/caching_allocator.hpp"

namespace gradcomm {
namespace memory {

void CachingAllocator::fail_oom(size_t bytes, size_t rounded, const std::string& cause) {
  ++stats_.ooms;
  const uint64_t allocated = stats_.allocated_bytes.all().current;
  const uint64_t reserved = stats_.reserved_bytes.all().current;
  std::ostringstream os;
  os << "out of memory: cannot allocate " << bytes << " bytes (" << format_bytes(bytes) << ", block "
     << format_bytes(rounded) << ") of " << upstream_.kind_name() << " on " << describe_device(device_)
     << "; this allocator has " << allocated << " bytes (" << format_bytes(allocated) << ") allocated and "
     << reserved << " bytes (" << format_bytes(reserved)
     << ") reserved after emptying its cache and retrying";
  if (auto info = upstream_.memory_info()) {
    os << "; the device has " << info->free_bytes << " bytes (" << format_bytes(info->free_bytes)
       << ") free of " << format_bytes(info->total_bytes);
  } else {
    os << "; free bytes of the upstream unknown";
  }
  os << "; cause: " << cause << ". ";
  const bool limit = options_.pool_limit != kUnlimited && limit_blocks(rounded);
  if (limit) {
    os << "To allow it, raise gcommAllocatorConfig_t.pool_limit (now " << options_.pool_limit << " bytes, "
       << format_bytes(options_.pool_limit) << ") or free blocks first.";
  } else {
    os << "Free memory held elsewhere (other allocators or processes on the device), allocate less, or "
          "free blocks first";
    if (reserved > allocated + allocated / 4)
      os << "; reserved is well above allocated, so the cache is fragmented: set "
            "gcommAllocatorConfig_t.max_split_size (e.g. 64 MiB)";
    os << ".";
  }
  fail(gcommOutOfMemory, os.str());
}

}  // namespace memory
}  // namespace gradcomm
