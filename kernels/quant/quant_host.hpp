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

template <class F>
void quantize(const float* x, const float* e, const Layout& l, void* out, float* residual) {
  const size_t blocks = l.chunks * l.blocks_per_chunk, block = l.block;
  std::vector<float> v(block);
  for (size_t k = 0; k < blocks; ++k) {
    const size_t chunk = k / l.blocks_per_chunk, b = k % l.blocks_per_chunk;
    const size_t first = k * l.block;
    const size_t live = first >= l.n ? 0 : std::min(l.block, l.n - first);  // the rest is padding
    for (size_t j = 0; j < live; ++j) v[j] = e != nullptr ? add_rn(x[first + j], e[first + j]) : x[first + j];
    for (size_t j = live; j < block; ++j) v[j] = 0.0f;
    const float amax = block_amax(v.data(), block);
    const float scale = scale_of<F>(amax);
    const Encoder enc = encoder_for<F>(amax);
    uint8_t* codes = const_cast<uint8_t*>(codes_of(out, l, chunk, b));
    const_cast<float*>(scales_of(out, l, chunk))[b] = scale;
    const float* vv = v.data();
    constexpr size_t per = kCodesPerByte<F>;
    for (size_t j = 0; j < block / per; ++j) codes[j] = encode_byte<F>(vv + j * per, enc);
    if (residual != nullptr)
      for (size_t j = 0; j < live; ++j)
        residual[first + j] = add_rn(vv[j], -decode<F>(code_at<F>(codes, j), scale));
  }
}

template <class F>
void sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                    float* residual) {
  const size_t block = l.block;
  std::vector<float> sums(block);
  float* s = sums.data();
  for (size_t b = 0; b < l.blocks_per_chunk; ++b) {
    // Rank by rank over the block: the same rank-order sum per element.
    for (size_t j = 0; j < block; ++j) s[j] = 0.0f;
    for (size_t r = 0; r < ranks; ++r) {
      const uint8_t* codes = codes_of(in, l, r, b);
      const float scale = scales_of(in, l, r)[b];
      for (size_t j = 0; j < block; ++j) s[j] = add_rn(s[j], decode<F>(code_at<F>(codes, j), scale));
    }
    if (e != nullptr) {
      const float* eb = e + b * block;
      for (size_t j = 0; j < block; ++j) s[j] = add_rn(s[j], eb[j]);
    }
    const float amax = block_amax(s, block);
    const float scale = scale_of<F>(amax);
    const Encoder enc = encoder_for<F>(amax);
    uint8_t* codes = const_cast<uint8_t*>(codes_of(out, l, 0, b));
    const_cast<float*>(scales_of(out, l, 0))[b] = scale;
    constexpr size_t per = kCodesPerByte<F>;
    for (size_t j = 0; j < block / per; ++j) codes[j] = encode_byte<F>(s + j * per, enc);
    if (residual != nullptr) {
      float* rb = residual + b * block;
      for (size_t j = 0; j < block; ++j) rb[j] = add_rn(s[j], -decode<F>(code_at<F>(codes, j), scale));
    }
  }
}

template <class F>
void dequantize(const void* in, const Layout& l, float* out) {
  for (size_t chunk = 0; chunk < l.chunks; ++chunk)
    for (size_t b = 0; b < l.blocks_per_chunk; ++b) {
      const size_t first = (chunk * l.blocks_per_chunk + b) * l.block;
      if (first >= l.n) return;  // the rest is padding
      const size_t live = std::min(l.block, l.n - first);
      const uint8_t* codes = codes_of(in, l, chunk, b);
      const float scale = scales_of(in, l, chunk)[b];
      for (size_t j = 0; j < live; ++j) out[first + j] = decode<F>(code_at<F>(codes, j), scale);
    }
}

}  // namespace gradcomm::kernels::quant::host
