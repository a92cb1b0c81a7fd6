// Test helpers for the kernels: typed random buffers (never zeros) and plain
// scalar references written independently of the kernels' code paths.
#pragma once

#if __has_include(<cuda_fp16.h>)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define GRADCOMM_TEST_CUDA_HALF 1
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gradcomm/gradcomm.h"
#include "tests/support/plain_half.hpp"

namespace gradcomm::test {

// Reference conversions: CUDA's own host implementations where cuda_fp16.h exists,
// else the arithmetic ones of tests/support/plain_half.hpp (a build without CUDA).
#ifdef GRADCOMM_TEST_CUDA_HALF
inline uint16_t ref_f16(float f) {
  return __half_raw(__float2half_rn(f)).x;
}
inline float ref_from_f16(uint16_t u) {
  __half_raw raw;
  raw.x = u;
  return __half2float(__half(raw));
}
inline uint16_t ref_bf16(float f) {
  return __nv_bfloat16_raw(__float2bfloat16_rn(f)).x;
}
#else
inline uint16_t ref_f16(float f) {
  return plain_f16(f);
}
inline float ref_from_f16(uint16_t u) {
  return plain_from_f16(u);
}
inline uint16_t ref_bf16(float f) {
  return plain_bf16(f);
}
#endif
inline float ref_from_bf16(uint16_t u) {
  uint32_t x = static_cast<uint32_t>(u) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline size_t elem_size(gcommDataType_t d) {
  return d == gcommFloat32 ? 4 : 2;
}

// A buffer of `count` elements of `dtype` (plus `offset` leading elements, so the
// data can start misaligned) with the values kept as floats alongside.
struct TypedBuffer {
  gcommDataType_t dtype;
  size_t count;
  size_t offset;
  std::vector<unsigned char> bytes;
  void* data() { return bytes.data() + offset * elem_size(dtype); }
  gcommTensor_t tensor() { return gcommTensor_t{count ? data() : nullptr, count, dtype}; }
  float get(size_t i) const {
    const unsigned char* p = bytes.data() + (offset + i) * elem_size(dtype);
    if (dtype == gcommFloat32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    uint16_t u;
    std::memcpy(&u, p, 2);
    return dtype == gcommFloat16 ? ref_from_f16(u) : ref_from_bf16(u);
  }
  void set(size_t i, float v) {
    unsigned char* p = bytes.data() + (offset + i) * elem_size(dtype);
    if (dtype == gcommFloat32) {
      std::memcpy(p, &v, 4);
      return;
    }
    uint16_t u = dtype == gcommFloat16 ? ref_f16(v) : ref_bf16(v);
    std::memcpy(p, &u, 2);
  }
};

inline TypedBuffer random_buffer(std::mt19937& rng, gcommDataType_t dtype, size_t count, size_t offset = 0,
                                 float scale = 4.0f) {
  TypedBuffer b{dtype, count, offset, std::vector<unsigned char>((count + offset + 8) * elem_size(dtype))};
  std::uniform_real_distribution<float> u(-scale, scale);
  for (size_t i = 0; i < count; ++i) {
    float v = u(rng);
    if (std::fabs(v) < 1e-3f) v = 0.5f;  // never zero
    b.set(i, v);
  }
  return b;
}

// Round a float through a dtype (what storing it in that dtype keeps).
inline float through(gcommDataType_t d, float v) {
  if (d == gcommFloat16) return ref_from_f16(ref_f16(v));
  if (d == gcommBfloat16) return ref_from_bf16(ref_bf16(v));
  return v;
}

inline bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;
}

}  // namespace gradcomm::test
