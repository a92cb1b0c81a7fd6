// Devices: "is a usable GPU present", device validation, and the guard that
// switches to an object's device and restores the caller's.
#pragma once

#include <cstdint>
#include <string>

#include "gradcomm/types.h"

namespace gradcomm {

// Number of usable CUDA devices; 0 when there is no GPU or no driver (never an
// error, never a crash). Cached after the first call.
int cuda_device_count() noexcept;
inline bool gpu_available() noexcept {
  return cuda_device_count() > 0;
}
// Why there is no GPU ("" if there is one), e.g. "cudaErrorInsufficientDriver: ...".
std::string no_gpu_reason();

// Throws gcommInvalidArgument unless the descriptor names the host or a visible
// CUDA device. Returns the normalised descriptor (host ordinal = -1).
gcommDevice_t validate_device(const gcommDevice_t& device, const char* what = "device");
std::string describe_device(const gcommDevice_t& device);
inline bool is_host(const gcommDevice_t& device) {
  return device.kind == gcommDeviceHost;
}

// The same device: kind and ordinal.
inline bool same_device(const gcommDevice_t& a, const gcommDevice_t& b) {
  return a.kind == b.kind && a.ordinal == b.ordinal;
}

// Where a pointer's memory lives. Without a GPU every pointer is host memory.
enum class MemoryKind { kHost, kPinnedHost, kDevice, kManaged };
struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // CUDA ordinal for kDevice / kManaged / kPinnedHost (if known)
};
PointerInfo pointer_info(const void* ptr) noexcept;

// pointer_info plus the bounds of the allocation holding `ptr`, so that a list of
// tensors inside one allocation costs one driver query, not one per tensor (a
// query costs about 0.5 us: 5000 tensors would add 2.4 ms to every call).
// begin == end when the driver cannot tell (pageable host memory, no GPU).
struct PointerRange {
  PointerInfo info;
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool contains(uintptr_t p) const { return begin < end && p >= begin && p < end; }
};
PointerRange pointer_range(const void* ptr) noexcept;
const char* memory_kind_name(MemoryKind kind) noexcept;

// How many times pointer_info / pointer_range were asked (each is a driver query
// on a GPU machine, ~0.5 us): lets tests check that hot paths ask none.
uint64_t pointer_lookups() noexcept;

// Can memory of this kind serve work on `device`? Device memory of that GPU or
// managed memory for a CUDA device; anything but device memory for the host.
bool usable_by(const PointerInfo& info, const gcommDevice_t& device) noexcept;

// Throws gcommInvalidArgument unless usable_by(info, device). `what` names the
// buffer and `index` its element ("grads" and 3: "grads[3]"; -1: none), `user`
// what uses it ("the call runs on", "the communicator is on"). The message is only
// formatted on failure: this runs for every tensor of every call.
void require_usable(const PointerInfo& info, const gcommDevice_t& device, const char* what, long long index,
                    const char* user);

// A CUDA driver entry point, found through the runtime (no link against libcuda);
// nullptr without a driver or where the driver lacks it.
void* driver_entry(const char* name) noexcept;

// True if the primary context of CUDA device `ordinal` exists (so switching to
// it creates nothing). False when it cannot be told.
bool primary_context_active(int ordinal) noexcept;

// Makes `ordinal` the current CUDA device for the guard's lifetime; a host device
// (ordinal < 0) does nothing. On exit it restores the caller's device if the
// caller's device has a live context. It never creates a context on a device
// gradcomm was not given: if the caller had never used its current device (no
// context on it yet), restoring it would create one, so the current device is
// left on ours instead.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal);
  explicit DeviceGuard(const gcommDevice_t& device)
      : DeviceGuard(device.kind == gcommDeviceCuda ? device.ordinal : -1) {}
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace gradcomm
