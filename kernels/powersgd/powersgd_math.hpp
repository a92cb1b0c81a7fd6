// PowerSGD math shared by the CUDA kernels (powersgd_cuda.cu) and their host
// twins (powersgd_host.cpp):
//  - the seeded normal generator for Q (a counter-based hash and Box-Muller
//    written with correctly rounded operations only, so host and GPU give the
//    same bits);
//  - the Gram-Schmidt column rule (when a column counts as zero);
//  - the factorization of a Gram matrix into the transform T with P·T orthonormal;
//  - the work geometry both sides size workspaces from.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/element.hpp"

namespace gradcomm::kernels::powersgd {

constexpr int kMaxRank = 32;

// The rank the kernels are instantiated for: the next power of two (1..32).
// Columns from the real rank up to it are zero padding inside the kernels.
inline int padded_rank(int r) {
  int p = 1;
  while (p < r) p *= 2;
  return p;
}

// ---- geometry (units of work of one CUDA block; workspace sizes follow) --------
constexpr size_t kOrthSliceRows = 1024;  // orthogonalize: rows per Gram / apply unit
constexpr size_t kQSliceRows = 512;      // multiply_q: rows per partial sum (split over rows)
constexpr size_t kQTileCols = 64;        // multiply_q: columns per block
constexpr size_t kInitChunk = 4096;      // init_q: elements per block

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// compensate_and_multiply_p: rows per warp (the register tile is rows x rp
// accumulators, at most 64); a block of 8 warps takes 8 times that many rows.
GCOMM_HD constexpr int multiply_p_rows_per_warp(int rp) { return rp >= 32 ? 2 : rp == 16 ? 4 : 8; }
constexpr size_t multiply_p_rows_per_block(int rp) { return 8 * static_cast<size_t>(multiply_p_rows_per_warp(rp)); }
// decompress: a block takes 64 rows x 64 columns.
constexpr size_t kDecompressRows = 64;
constexpr size_t kDecompressCols = 64;

// ---- correctly rounded float operations --------------------------------------
// The device could contract a*b+c into one fma and the host would not; these keep
// every rounding explicit so the generator gives the same bits on both.
GCOMM_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
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
GCOMM_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
GCOMM_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);  // correctly rounded (software where there is no fma instruction)
#endif
}
GCOMM_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// ---- seeded normal generator --------------------------------------------------
// splitmix64's finalizer: a bijection that mixes every input bit into every output bit.
GCOMM_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 64 random bits for pair `pair` of the stream (seed, key). Counter-based: any
// element can be drawn alone, in any order, on any device.
GCOMM_HD uint64_t stream_bits(uint64_t seed, uint64_t key, uint64_t pair) {
  uint64_t base = mix64(seed ^ mix64(key + 0x9e3779b97f4a7c15ull));
  return mix64(base + (pair + 1) * 0xd1b54a32d192ed03ull);
}

// ln(k * 2^-24) for k in [1, 2^24]: exponent split off exactly, then the atanh
// series of the mantissa reduced to [sqrt(1/2), sqrt(2)) (|s| <= 0.172, six terms
// leave < 1e-10). Accuracy matters little; identical bits everywhere do.
GCOMM_HD float log_unit(uint32_t k) {
  int e = 0;
  while ((k >> e) > 1) ++e;  // floor(log2 k), 0..24
  float f = mul_rn(static_cast<float>(k), bits_to_float(static_cast<uint32_t>(127 - e) << 23));  // k * 2^-e: exact, [1, 2)
  if (f > 1.41421356f) {
    f = mul_rn(f, 0.5f);  // exact
    ++e;
  }
  float s = div_rn(add_rn(f, -1.0f), add_rn(f, 1.0f));
  float z = mul_rn(s, s);
  float p = static_cast<float>(1.0 / 11.0);
  p = fma_rn(p, z, static_cast<float>(1.0 / 9.0));
  p = fma_rn(p, z, static_cast<float>(1.0 / 7.0));
  p = fma_rn(p, z, static_cast<float>(1.0 / 5.0));
  p = fma_rn(p, z, static_cast<float>(1.0 / 3.0));
  p = fma_rn(p, z, 1.0f);
  float ln_f = mul_rn(mul_rn(s, p), 2.0f);
  float ee = static_cast<float>(e - 24);
  // ln 2 = hi + lo, hi with few mantissa bits so ee * hi is exact.
  return fma_rn(ee, 0.693145751953125f, fma_rn(ee, 1.42860682030941723e-6f, ln_f));
}

// cos or sin of 2*pi*t, t = bits * 2^-24 in [0, 1): quadrant from the top two
// bits (exact), Taylor series on [0, pi/2) (< 1e-8).
GCOMM_HD float trig_turns(uint32_t bits, bool sine) {
  uint32_t quadrant = bits >> 22;
  float x = mul_rn(mul_rn(static_cast<float>(bits & 0x3fffffu), static_cast<float>(1.0 / 4194304.0)),  // exact
                   1.57079632679489662f);
  float z = mul_rn(x, x);
  float c = static_cast<float>(1.0 / 479001600.0);
  c = fma_rn(c, z, static_cast<float>(-1.0 / 3628800.0));
  c = fma_rn(c, z, static_cast<float>(1.0 / 40320.0));
  c = fma_rn(c, z, static_cast<float>(-1.0 / 720.0));
  c = fma_rn(c, z, static_cast<float>(1.0 / 24.0));
  c = fma_rn(c, z, -0.5f);
  c = fma_rn(c, z, 1.0f);
  float s = static_cast<float>(1.0 / 6227020800.0);
  s = fma_rn(s, z, static_cast<float>(-1.0 / 39916800.0));
  s = fma_rn(s, z, static_cast<float>(1.0 / 362880.0));
  s = fma_rn(s, z, static_cast<float>(-1.0 / 5040.0));
  s = fma_rn(s, z, static_cast<float>(1.0 / 120.0));
  s = fma_rn(s, z, static_cast<float>(-1.0 / 6.0));
  s = fma_rn(s, z, 1.0f);
  s = mul_rn(s, x);
  // angle = quadrant * pi/2 + x
  uint32_t q = sine ? (quadrant + 3u) & 3u : quadrant;  // sin(a) = cos(a - pi/2)
  switch (q) {
    case 0: return c;
    case 1: return -s;
    case 2: return -c;
    default: return s;
  }
}

// Element `index` of the standard normal stream (seed, key): Box-Muller on the
// pair index/2, cosine for even elements, sine for odd ones. Bit-identical on
// host and GPU (every operation is correctly rounded and none is contracted).
GCOMM_HD float normal_at(uint64_t seed, uint64_t key, uint64_t index) {
  uint64_t h = stream_bits(seed, key, index >> 1);
  uint32_t k = static_cast<uint32_t>(h >> 40) + 1u;              // [1, 2^24]: u1 in (0, 1]
  uint32_t t = static_cast<uint32_t>(h >> 16) & 0xffffffu;       // u2 in [0, 1)
  float radius = sqrt_rn(mul_rn(log_unit(k), -2.0f));            // >= 0: log_unit <= 0
  return mul_rn(radius, trig_turns(t, (index & 1u) != 0));
}

// ---- Gram-Schmidt -------------------------------------------------------------
// Orthogonalization works on the Gram matrix G = PᵀP, computed in double (f32
// products are exact in double), so it needs one pass over P for G and one for
// P <- P·T, instead of one pass per column; in exact arithmetic T is what modified
// Gram-Schmidt computes. A column is dropped (becomes exactly zero, never NaN)
// when what is left of it after projecting out the kept earlier columns has a
// norm at most `eps` (absolute) or at most kDropRelative of its own norm: such a
// column is rounding noise of the earlier ones (a matrix of rank < r, n < r, a
// zero or duplicated column), and normalizing it would give a vector that is
// not orthogonal to the others.
constexpr double kDropRelative = 1e-4;

// d: the squared norm left of column j; g: its squared norm before projection.
// NaN compares false, so a non-finite Gram drops nothing (the NaN reaches P).
GCOMM_HD bool keep_column(double d, double g, double eps) {
  return !(d <= eps * eps) && !(d <= kDropRelative * kDropRelative * g);
}

// The host's factorization (the CUDA kernel runs the same steps with the
// entries of one step in parallel): G is r x r (row-major, leading dimension
// ld, symmetric); T receives the upper triangular r x r transform, P·T having
// orthonormal or zero columns. W is r x r scratch.
inline void factor_gram(const double* G, int r, size_t ld, double eps, double* T, double* W) {
  double c[kMaxRank];
  for (int a = 0; a < r; ++a)
    for (int k = 0; k < r; ++k) {
      W[a * ld + k] = G[a * ld + k];
      T[a * ld + k] = a == k ? 1.0 : 0.0;
    }
  for (int j = 0; j < r; ++j) {
    double d = W[j * ld + j];
    if (!keep_column(d, G[j * ld + j], eps)) {
      for (int a = 0; a <= j; ++a) T[a * ld + j] = 0.0;
      continue;
    }
    double s = 1.0 / std::sqrt(d);
    for (int a = 0; a <= j; ++a) T[a * ld + j] *= s;
    for (int k = j + 1; k < r; ++k) c[k] = W[j * ld + k] * s;
    for (int k = j + 1; k < r; ++k) {
      for (int a = 0; a <= j; ++a) T[a * ld + k] -= c[k] * T[a * ld + j];
      for (int a = j + 1; a < r; ++a) W[a * ld + k] -= c[a] * c[k];
    }
  }
}

}  // namespace gradcomm::kernels::powersgd
