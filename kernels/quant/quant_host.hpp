// The host twins of the quantized blocks (quant.hpp) for a number format F: a
// format's host file instantiates them into its Codec. The element loops are
// written so that -O3 vectorizes them (no calls, no early exits, NaN tracked by
// the bits of |v|); the math is quant_math.hpp's, shared with the CUDA kernels.
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/quant/quant_math.hpp"

namespace gradcomm::kernels::quant::host {

// max |v| over a block, NaN if any v is NaN: the bits of |v| compared as unsigned
// integers order non-negative floats, and every NaN's bits lie above Inf's. An
// integer max vectorizes where a float one (without -ffast-math) does not.
inline float block_amax(const float* v, size_t n) {
  uint32_t top = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t bits = float_to_bits(v[j]) & 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  return bits_to_float(top);
}

// The loops below work on codes one a byte, so that they vectorize alike for every
// format: an 8-bit format's are the wire's bytes; a 4-bit format's are unpacked
// from (and packed into) the wire's nibbles in a pass of their own.
template <class F>
const uint8_t* codes_one_a_byte(const uint8_t* wire, size_t block, uint8_t* scratch) {
  if constexpr (F::kBits == 8) {
    return wire;
  } else {
    for (size_t j = 0; j < block / 2; ++j) {
      scratch[2 * j] = wire[j] & 0xfu;
      scratch[2 * j + 1] = wire[j] >> 4;
    }
    return scratch;
  }
}
// Where to encode a block's codes one a byte: the wire itself for an 8-bit format.
template <class F>
uint8_t* encode_target(uint8_t* wire, uint8_t* scratch) {
  if constexpr (F::kBits == 8) {
    return wire;
  } else {
    return scratch;
  }
}
template <class F>
void store_codes(const uint8_t* one_a_byte, size_t block, uint8_t* wire) {
  if constexpr (F::kBits != 8)
    for (size_t j = 0; j < block / 2; ++j)
      wire[j] = static_cast<uint8_t>(one_a_byte[2 * j] | (one_a_byte[2 * j + 1] << 4));
}

template <class F>
void quantize(const float* x, const float* e, const Layout& l, void* out, float* residual) {
  const size_t blocks = l.chunks * l.blocks_per_chunk, block = l.block;
  std::vector<float> v(block);
  std::vector<uint8_t> scratch(block);
  for (size_t k = 0; k < blocks; ++k) {
    const size_t chunk = k / l.blocks_per_chunk, b = k % l.blocks_per_chunk;
    const size_t first = k * l.block;
    const size_t live = first >= l.n ? 0 : std::min(l.block, l.n - first);  // the rest is padding
    for (size_t j = 0; j < live; ++j) v[j] = e != nullptr ? add_rn(x[first + j], e[first + j]) : x[first + j];
    for (size_t j = live; j < block; ++j) v[j] = 0.0f;
    const float amax = block_amax(v.data(), block);
    const float scale = scale_of<F>(amax);
    const Encoder enc = encoder_for<F>(amax);
    uint8_t* wire = const_cast<uint8_t*>(codes_of(out, l, chunk, b));
    const_cast<float*>(scales_of(out, l, chunk))[b] = scale;
    const float* vv = v.data();
    uint8_t* codes = encode_target<F>(wire, scratch.data());
    for (size_t j = 0; j < block; ++j) codes[j] = encode<F>(vv[j], enc);
    store_codes<F>(codes, block, wire);
    if (residual != nullptr)
      for (size_t j = 0; j < live; ++j) residual[first + j] = add_rn(vv[j], -decode<F>(codes[j], scale));
  }
}

template <class F>
void sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                    float* residual) {
  const size_t block = l.block;
  std::vector<float> sums(block);
  std::vector<uint8_t> scratch(block);
  float* s = sums.data();
  for (size_t b = 0; b < l.blocks_per_chunk; ++b) {
    // Rank by rank over the block: the same rank-order sum per element.
    for (size_t j = 0; j < block; ++j) s[j] = 0.0f;
    for (size_t r = 0; r < ranks; ++r) {
      const uint8_t* codes = codes_one_a_byte<F>(codes_of(in, l, r, b), block, scratch.data());
      const float scale = scales_of(in, l, r)[b];
      for (size_t j = 0; j < block; ++j) s[j] = add_rn(s[j], decode<F>(codes[j], scale));
    }
    if (e != nullptr) {
      const float* eb = e + b * block;
      for (size_t j = 0; j < block; ++j) s[j] = add_rn(s[j], eb[j]);
    }
    const float amax = block_amax(s, block);
    const float scale = scale_of<F>(amax);
    const Encoder enc = encoder_for<F>(amax);
    uint8_t* wire = const_cast<uint8_t*>(codes_of(out, l, 0, b));
    const_cast<float*>(scales_of(out, l, 0))[b] = scale;
    uint8_t* codes = encode_target<F>(wire, scratch.data());
    for (size_t j = 0; j < block; ++j) codes[j] = encode<F>(s[j], enc);
    store_codes<F>(codes, block, wire);
    if (residual != nullptr) {
      float* rb = residual + b * block;
      for (size_t j = 0; j < block; ++j) rb[j] = add_rn(s[j], -decode<F>(codes[j], scale));
    }
  }
}

template <class F>
void dequantize(const void* in, const Layout& l, float* out) {
  std::vector<uint8_t> scratch(l.block);
  for (size_t chunk = 0; chunk < l.chunks; ++chunk)
    for (size_t b = 0; b < l.blocks_per_chunk; ++b) {
      const size_t first = (chunk * l.blocks_per_chunk + b) * l.block;
      if (first >= l.n) return;  // the rest is padding
      const size_t live = std::min(l.block, l.n - first);
      const uint8_t* codes = codes_one_a_byte<F>(codes_of(in, l, chunk, b), l.block, scratch.data());
      const float scale = scales_of(in, l, chunk)[b];
      for (size_t j = 0; j < live; ++j) out[first + j] = decode<F>(codes[j], scale);
    }
}

// The host twins as a format's Codec holds them (int8.cpp, fp8.cpp, fp4.cpp). With
// GCC on x86-64 each is cloned for AVX2, and the clone the CPU can run is picked when
// the library loads (an ifunc); flatten inlines the whole twin into each clone, so its
// element loops run 8 floats wide on an AVX2 CPU and 4 wide (SSE2) elsewhere. The
// same bits either way: every operation is IEEE's, and the avx2 target adds no FMA to
// contract into (HostTwinClones.* checks them against the plain template). Clang (the
// fuzz build) and ThreadSanitizer builds get the plain functions: an ifunc's resolver
// runs while the program is relocated, before TSan's runtime is up, and TSan's
// instrumented resolver crashed every test program at start.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define GCOMM_HOST_TWIN_CLONES __attribute__((target_clones("avx2", "default"), flatten))
#else
#define GCOMM_HOST_TWIN_CLONES
#endif

template <class F>
struct Twins {
  GCOMM_HOST_TWIN_CLONES static void quantize(const float* x, const float* e, const Layout& l, void* out,
                                              float* residual) {
    host::quantize<F>(x, e, l, out, residual);
  }
  GCOMM_HOST_TWIN_CLONES static void sum_requantize(const void* in, size_t ranks, const Layout& l,
                                                    const float* e, void* out, float* residual) {
    host::sum_requantize<F>(in, ranks, l, e, out, residual);
  }
  GCOMM_HOST_TWIN_CLONES static void dequantize(const void* in, const Layout& l, float* out) {
    host::dequantize<F>(in, l, out);
  }
};

#undef GCOMM_HOST_TWIN_CLONES

}  // namespace gradcomm::kernels::quant::host
