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

#include "gradcomm/gradcomm.h"

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

GCOMM_HD bool is_finite(float f) { return (float_to_bits(f) & 0x7f800000u) != 0x7f800000u; }

GCOMM_HD uint16_t f32_to_f16(float f) {
  uint32_t x = float_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // Inf, or NaN (kept quiet, top payload bits kept)
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65536: Inf
  if (ax < 0x38800000u) {                                               // below 2^-14: f16 subnormal or 0
    uint32_t e = ax >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25 (ties at 2^-25 go to even 0)
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14..24: units of 2^-24
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal: still right
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t r = ax - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

GCOMM_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24, exact
    return bits_to_float(float_to_bits(v) | sign);
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

GCOMM_HD uint16_t f32_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

GCOMM_HD float bf16_to_f32(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

// Typed load/store through float, the compute type of every kernel.
GCOMM_HD float to_float(float v) { return v; }
GCOMM_HD float to_float(half_bits v) { return f16_to_f32(v.bits); }
GCOMM_HD float to_float(bf16_bits v) { return bf16_to_f32(v.bits); }

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
    case gcommFloat16: return f(half_bits{});
    case gcommBfloat16: return f(bf16_bits{});
    default: return f(float{});
  }
}

}  // namespace gradcomm::kernels
