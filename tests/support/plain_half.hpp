// binary16 and bfloat16 conversions by arithmetic: scale to the format's quantum,
// round with std::nearbyint (ties to even), scale back, encode. No bit tricks, so
// it checks the kernels' bit-level conversions independently. The kernel tests use
// CUDA's own host conversions where cuda_fp16.h exists (tests/kernels/reference.hpp)
// and this where it does not (a GRADCOMM_CUDA=OFF build); the two are compared
// where both exist (Element.PlainReferenceAgreesWithCuda).
#pragma once

#include <cmath>
#include <cstdint>

namespace gradcomm::test {

// |x| rounded to the format with `mantissa_bits` and smallest normal exponent
// `min_exp` (2^min_exp), or +inf past `max_finite`; sign kept by the caller.
inline double plain_round(double a, int mantissa_bits, int min_exp, double max_finite) {
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  const int lead = e - 1 < min_exp ? min_exp : e - 1;
  const double quantum = std::ldexp(1.0, lead - mantissa_bits);
  const double r = std::nearbyint(a / quantum) * quantum;  // a / quantum is exact
  return r > max_finite ? INFINITY : r;
}

inline uint16_t plain_encode(double r, bool negative, int mantissa_bits, int min_exp, int bias) {
  const uint16_t sign = negative ? static_cast<uint16_t>(1u << 15) : 0;
  const uint16_t inf = static_cast<uint16_t>(((2 * bias + 1) << mantissa_bits));
  if (std::isinf(r)) return sign | inf;
  if (r < std::ldexp(1.0, min_exp))  // zero or subnormal: a count of the smallest quantum
    return sign | static_cast<uint16_t>(r / std::ldexp(1.0, min_exp - mantissa_bits));
  int e = 0;
  const double m = std::frexp(r, &e);
  const int field = e - 1 + bias;
  const auto mantissa = static_cast<uint16_t>((m * 2 - 1) * std::ldexp(1.0, mantissa_bits));
  return sign | static_cast<uint16_t>(field << mantissa_bits) | mantissa;
}

inline uint16_t plain_f16(float f) {
  if (std::isnan(f)) return 0x7e00;
  const double r = plain_round(std::fabs(static_cast<double>(f)), 10, -14, 65504.0);
  return plain_encode(r, std::signbit(f), 10, -14, 15);
}

inline float plain_from_f16(uint16_t u) {
  const int field = (u >> 10) & 31, mantissa = u & 1023;
  double v = field == 0    ? std::ldexp(mantissa, -24)
             : field == 31 ? (mantissa != 0 ? NAN : INFINITY)
                           : std::ldexp(1024 + mantissa, field - 25);
  return static_cast<float>((u & 0x8000) != 0 ? -v : v);
}

inline uint16_t plain_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  const double max_finite = std::ldexp(255.0, 120);  // 0x7f7f: (2 - 2^-7) * 2^127
  const double r = plain_round(std::fabs(static_cast<double>(f)), 7, -126, max_finite);
  return plain_encode(r, std::signbit(f), 7, -126, 127);
}

}  // namespace gradcomm::test
