// Plain host memory. aligned_alloc needs the size to be a multiple of the
// alignment, so sizes are rounded up (the cache always asks for multiples of
// 512 anyway).
#include <cstdlib>

#include "common/error.hpp"
#include "memory/size_classes.hpp"
#include "memory/upstream/upstream.hpp"

namespace gradcomm {
namespace memory {
namespace {

constexpr size_t kHostAlignment = 256;

class HostUpstream final : public Upstream {
 public:
  void* allocate(size_t bytes) override {
    require(bytes > 0, "host upstream: cannot allocate 0 bytes");
    void* ptr = std::aligned_alloc(kHostAlignment, round_up(bytes, kHostAlignment));
    if (ptr == nullptr) fail(gcommOutOfMemory, "aligned_alloc(", kHostAlignment, ", ", bytes, ") failed");
    return ptr;
  }
  void deallocate(void* ptr, size_t) noexcept override { std::free(ptr); }
  gcommDevice_t device() const noexcept override { return gcommHostDevice(); }
  const char* kind_name() const noexcept override { return "host memory"; }
  bool deallocate_waits_for_device() const noexcept override { return true; }
};

}  // namespace

std::unique_ptr<Upstream> make_host_upstream() {
  return std::make_unique<HostUpstream>();
}

}  // namespace memory
}  // namespace gradcomm
