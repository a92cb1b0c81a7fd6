// The element math of the quantized blocks (quant.hpp), shared by the host twins and
// the CUDA kernels so both give the same bits: products and sums rounded one at a
// time (no fused multiply-add on the device), round-to-nearest-even codes. A number
// format F (int8.hpp, fp8.hpp, fp4.hpp) gives kBits (8, or 4), kMax (its largest
// code's magnitude), encode(x) (the nearest code of x, |x| <= kMax up to one
// rounding; 0 for anything that is not a number; a 4-bit code in the low nibble)
// and value(code).
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/element.hpp"
#include "kernels/quant/quant.hpp"

namespace gradcomm::kernels::quant {

GCOMM_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);  // never contracted into an FMA with a following add
#else
  return a * b;
#endif
}

GCOMM_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// The running max of |v| over a block; NaN once any value is NaN (Inf stays Inf).
GCOMM_HD float amax_merge(float a, float b) {
  if (a != a || b != b) return a + b;  // NaN
  return b > a ? b : a;
}
GCOMM_HD float amax_add(float a, float v) {
  return amax_merge(a, fabsf(v));
}

// A block's scale: 0 for a block of zeros, NaN for one with Inf or NaN.
template <class F>
GCOMM_HD float scale_of(float amax) {
  if (!is_finite(amax)) return bits_to_float(0x7fc00000u);  // a quiet NaN
  return amax / F::kMax;
}
// How a block's values become codes: v * pre * inverse. For a block whose max is
// below 2^-64 (M / max would overflow from ~3.7e-37 down for int8, subnormals
// included) both are first multiplied by 2^64, which is exact. inverse 0: a block
// of zeros, or one with Inf/NaN (every code 0).
struct Encoder {
  float pre;
  float inverse;
};
template <class F>
GCOMM_HD Encoder encoder_for(float amax) {
  if (!(amax > 0.0f) || !is_finite(amax)) return Encoder{1.0f, 0.0f};
  const float pre = amax < 5.421010862427522e-20f ? 1.8446744073709552e19f : 1.0f;  // 2^-64, 2^64
  return Encoder{pre, F::kMax / mul_rn(amax, pre)};
}

// Round to nearest even for |x| < 2^22 by adding and taking away 1.5 * 2^23 (the
// add rounds in the default mode): the same bits on both sides, and unlike
// rintf() it needs no library call on a host without SSE4.1, so loops vectorize.
GCOMM_HD float round_even(float x) {
  constexpr float kMagic = 12582912.0f;
  return add_rn(add_rn(x, kMagic), -kMagic);
}

// A power of two as a float, exactly, for -126 <= k <= 127.
GCOMM_HD float pow2(int k) {
  return bits_to_float(static_cast<uint32_t>(k + 127) << 23);
}

// The code of v. A block without codes (inverse 0) gives 0.
template <class F>
GCOMM_HD uint8_t encode(float v, Encoder enc) {
  return F::encode(enc.inverse == 0.0f ? 0.0f : mul_rn(mul_rn(v, enc.pre), enc.inverse));
}

template <class F>
GCOMM_HD float decode(uint8_t code, float scale) {
  return mul_rn(F::value(code), scale);
}

// How many codes of F one byte holds: 1, or 2 for 4-bit codes (the even element's
// in the low nibble).
template <class F>
constexpr size_t kCodesPerByte = 8 / F::kBits;

// Code j of a block's codes.
template <class F>
GCOMM_HD uint8_t code_at(const uint8_t* codes, size_t j) {
  if constexpr (F::kBits == 8) {
    return codes[j];
  } else {
    return static_cast<uint8_t>((codes[j / 2] >> (4 * (j & 1))) & 0xfu);
  }
}

// The byte that holds the codes of v[0..kCodesPerByte).
template <class F>
GCOMM_HD uint8_t encode_byte(const float* v, Encoder enc) {
  if constexpr (F::kBits == 8) {
    return encode<F>(v[0], enc);
  } else {
    return static_cast<uint8_t>(encode<F>(v[0], enc) | (encode<F>(v[1], enc) << 4));
  }
}

// Where block k of the bucket lives: its chunk's bytes, its codes, its scale.
GCOMM_HD const uint8_t* codes_of(const void* base, const Layout& l, size_t chunk, size_t block_in_chunk) {
  return static_cast<const uint8_t*>(base) + chunk * l.chunk_bytes() + block_in_chunk * l.block_code_bytes();
}
GCOMM_HD const float* scales_of(const void* base, const Layout& l, size_t chunk) {
  return reinterpret_cast<const float*>(static_cast<const char*>(base) + chunk * l.chunk_bytes() +
                                        l.chunk_code_bytes());
}

}  // namespace gradcomm::kernels::quant
