#include "reducer/step_scalars.hpp"

#include <cstring>
#include <vector>

#include "common/log.hpp"
#include "memory/device_bytes.hpp"

namespace gradcomm::reducer {

StepScalars::StepScalars(memory::CachingAllocator& allocator, SideStream& side, gcommDevice_t device,
                         size_t ranks, size_t grads)
    : allocator_(allocator), side_(side), ranks_(ranks), grads_(grads) {
  const size_t bytes = sizeof(Block) + ranks * sizeof(double) + grads * sizeof(float);
  std::vector<unsigned char> init(bytes, 0);  // zero bits are 0.0 in float and double
  Block host{0.0f, 1.0f, 0.0f, 0.0f};
  std::memcpy(init.data(), &host, sizeof host);
  block_ = static_cast<Block*>(allocator_.allocate(bytes, side_.stream()));
  try {
    memory::copy_bytes(block_, init.data(), bytes, device, side_.stream(), cudaMemcpyHostToDevice);
  } catch (...) {
    allocator_.deallocate(block_, side_.stream());
    throw;
  }
}

StepScalars::~StepScalars() {
  try {
    allocator_.deallocate(block_, side_.stream());
  } catch (const std::exception& e) {
    GCOMM_WARN("reducer destroy: freeing the step scalars: ", e.what());
  }
}

}  // namespace gradcomm::reducer
