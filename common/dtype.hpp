// Data type helpers shared by every layer (host-side; element math that runs on
// the device lives in kernels/).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/error.hpp"

namespace gradcomm {

inline bool is_valid_dtype(gcommDataType_t dtype) noexcept {
  return static_cast<int>(dtype) >= 0 && static_cast<int>(dtype) < gcommNumDataTypes;
}

inline size_t dtype_size(gcommDataType_t dtype) noexcept {
  return dtype == gcommFloat32 ? 4 : 2;
}

inline const char* dtype_name(gcommDataType_t dtype) noexcept {
  switch (dtype) {
    case gcommFloat32:
      return "f32";
    case gcommFloat16:
      return "f16";
    case gcommBfloat16:
      return "bf16";
    default:
      return "unknown";
  }
}

// Throws gcommInvalidArgument naming `what` unless dtype is a gcommDataType_t value.
inline gcommDataType_t checked_dtype(gcommDataType_t dtype, const char* what) {
  require(is_valid_dtype(dtype), what, ": ", static_cast<int>(dtype),
          " is not a gcommDataType_t (gcommFloat32, gcommFloat16, gcommBfloat16)");
  return dtype;
}

// count * element size, or gcommInvalidArgument if it overflows size_t.
inline size_t checked_bytes(size_t count, gcommDataType_t dtype, const char* what) {
  size_t element = dtype_size(dtype);
  require(count <= SIZE_MAX / element, what, ": ", count, " elements of ", dtype_name(dtype),
          " overflow the address space");
  return count * element;
}

// Whether `count` elements at `data` end at or below GCOMM_ADDRESS_LIMIT (an
// empty buffer touches nothing: any address will do). No overflow for any count.
inline bool within_address_limit(const void* data, size_t count, gcommDataType_t dtype) noexcept {
  if (count == 0) return true;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  return count <= GCOMM_ADDRESS_LIMIT / dtype_size(dtype) &&
         begin <= GCOMM_ADDRESS_LIMIT - count * dtype_size(dtype);
}

// The bytes of `count` elements at `data`, or gcommInvalidArgument naming `what`
// when they would reach past GCOMM_ADDRESS_LIMIT (which also catches counts
// whose byte size overflows size_t): checked before any byte is touched.
inline size_t checked_span(const void* data, size_t count, gcommDataType_t dtype, const char* what) {
  const size_t bytes = checked_bytes(count, dtype, what);
  require(within_address_limit(data, count, dtype), what, ": ", count, " elements of ", dtype_name(dtype),
          " from ", data, " reach past the highest address memory can have (GCOMM_ADDRESS_LIMIT)");
  return bytes;
}

// Refuses a list longer than GCOMM_MAX_TENSORS before any element is read.
inline void check_list_length(size_t n, const char* what) {
  require(n <= GCOMM_MAX_TENSORS, what, ": ", n, " is above the limit of ", GCOMM_MAX_TENSORS,
          " tensors (GCOMM_MAX_TENSORS)");
}

}  // namespace gradcomm
