// Element math shared by the CUDA kernels and their host twins, so both compute
// the same function bit for bit: f16/bf16 <-> f32 conversions (round to nearest
// even, written out here rather than taken from cuda_fp16.h so host and device
// cannot differ), and the non-finite test.
//
// Overflow: f32 -> f16 follows IEEE round-to-nearest-even, so |x| >= 65520 becomes
// +-Inf (65504 is the largest f16); f32 -> bf16 overflows to +-Inf only above
// bf16's max (~3.39e38). NaN stays NaN (quiet, sign kept). Subnormals are kept.
#pragma once

#include <cstdint>
#include <cstring>

#include "gradcomm/types.h"

#if defined(__CUDACC__)
#define GCOMM_HD __host__ __device__ __forceinline__
#else
#define GCOMM_HD inline
#endif

namespace gradcomm::kernels {

// Storage types: f16 and bf16 are their 16 raw bits.
struct half_bits {
  uint16_t bits;
};
struct bf16_bits {
  uint16_t bits;
};

GCOMM_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

GCOMM_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

GCOMM_HD bool is_finite(float f) {
  return (float_to_bits(f) & 0x7f800000u) != 0x7f800000u;
}

// Round to nearest even, written with selects instead of early returns so the host
// twins' loops vectorize (the GPU runs the same code). Every path is computed and
// one is chosen: Inf/NaN (NaN kept quiet, top payload bits kept), overflow to Inf
// (>= 65520 rounds to 65536), f16 subnormals and zero (the float adder rounds
// |f| + 0.5 to a multiple of 2^-24, to nearest even: the low bits are the result;
// below 2^-25 that is 0), and normals (rebias 127 -> 15, round on bit 13).
GCOMM_HD uint16_t f32_to_f16(float f) {
  const uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  const uint32_t special = 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u);
  const uint32_t subnormal = float_to_bits(bits_to_float(ax) + 0.5f) - 0x3f000000u;
  const uint32_t r = ax - 0x38000000u;
  const uint32_t normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  const uint32_t h = ax >= 0x7f800000u   ? special
                     : ax >= 0x477ff000u ? 0x7c00u
                     : ax < 0x38800000u  ? subnormal
                                         : normal;
  return static_cast<uint16_t>(sign | h);
}

// Selects, not branches, as above: subnormals (mant * 2^-24, exact), Inf/NaN, normals.
GCOMM_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  const uint32_t subnormal = float_to_bits(static_cast<float>(mant) * 5.9604644775390625e-8f);
  const uint32_t special = 0x7f800000u | (mant << 13);
  const uint32_t normal = ((exp + 112) << 23) | (mant << 13);
  return bits_to_float(sign | (exp == 0 ? subnormal : exp == 31 ? special : normal));
}

GCOMM_HD uint16_t f32_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

GCOMM_HD float bf16_to_f32(uint16_t b) {
  return bits_to_float(static_cast<uint32_t>(b) << 16);
}

// Typed load/store through float, the compute type of every kernel.
GCOMM_HD float to_float(float v) {
  return v;
}
GCOMM_HD float to_float(half_bits v) {
  return f16_to_f32(v.bits);
}
GCOMM_HD float to_float(bf16_bits v) {
  return bf16_to_f32(v.bits);
}

template <class T>
GCOMM_HD T from_float(float v);
template <>
GCOMM_HD float from_float<float>(float v) {
  return v;
}
template <>
GCOMM_HD half_bits from_float<half_bits>(float v) {
  return half_bits{f32_to_f16(v)};
}
template <>
GCOMM_HD bf16_bits from_float<bf16_bits>(float v) {
  return bf16_bits{f32_to_bf16(v)};
}

// Calls f.template operator()<T>() with T the storage type of `dtype`.
template <class F>
decltype(auto) dispatch_dtype(gcommDataType_t dtype, F&& f) {
  switch (dtype) {
    case gcommFloat16:
      return f(half_bits{});
    case gcommBfloat16:
      return f(bf16_bits{});
    default:
      return f(float{});
  }
}

}  // namespace gradcomm::kernels
