#include "kernels/f16c_blocks.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define GCOMM_HAVE_F16C_PATH 1
#endif

namespace gradcomm::kernels::f16c {

namespace {

// Integer tests, so that the loops vectorize (a float self-comparison did not,
// and cost more than the conversion it guarded).
bool any_f16_nan(const uint16_t* h, size_t m) {
  unsigned nan = 0;
  for (size_t i = 0; i < m; ++i) nan |= (h[i] & 0x7fffu) > 0x7c00u;
  return nan != 0;
}

bool any_f32_nan(const float* v, size_t m) {
  unsigned nan = 0;
  for (size_t i = 0; i < m; ++i) {
    uint32_t u;
    std::memcpy(&u, v + i, sizeof u);
    nan |= (u & 0x7fffffffu) > 0x7f800000u;
  }
  return nan != 0;
}

#ifdef GCOMM_HAVE_F16C_PATH
// CPUID leaf 1: AVX (ECX bit 28) and F16C (bit 29), and the OS saving the YMM
// registers (OSXSAVE, bit 27, then XCR0 bits 1-2). cpuid.h rather than
// __builtin_cpu_supports("f16c"), which clang 14 (the fuzz build) does not know.
bool detect_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
  if ((c & need) != need) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x6u) == 0x6u;
}

bool has_f16c() {
  static const bool yes = detect_f16c();
  return yes;
}

__attribute__((target("avx,f16c"))) void hw_to_float(const uint16_t* in, float* out, size_t m) {
  size_t i = 0;
  for (; i + 8 <= m; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < m; ++i) out[i] = f16_to_f32(in[i]);
}

__attribute__((target("avx,f16c"))) void hw_from_float(const float* in, uint16_t* out, size_t m) {
  size_t i = 0;
  for (; i + 8 <= m; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < m; ++i) out[i] = f32_to_f16(in[i]);
}
#endif

}  // namespace

void to_float(const half_bits* in, float* out, size_t m) {
  static_assert(sizeof(half_bits) == sizeof(uint16_t), "half_bits is the 16 bits");
  const auto* h = reinterpret_cast<const uint16_t*>(in);
#ifdef GCOMM_HAVE_F16C_PATH
  if (has_f16c() && !any_f16_nan(h, m)) {
    hw_to_float(h, out, m);
    return;
  }
#endif
  for (size_t i = 0; i < m; ++i) out[i] = f16_to_f32(h[i]);
}

void from_float(const float* in, half_bits* out, size_t m) {
  auto* h = reinterpret_cast<uint16_t*>(out);
#ifdef GCOMM_HAVE_F16C_PATH
  if (has_f16c() && !any_f32_nan(in, m)) {
    hw_from_float(in, h, m);
    return;
  }
#endif
  for (size_t i = 0; i < m; ++i) h[i] = f32_to_f16(in[i]);
}

}  // namespace gradcomm::kernels::f16c
