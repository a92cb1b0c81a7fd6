// Validation, dispatch and the host twins of the int8 blocks (quant.hpp).
#include "kernels/quant/quant.hpp"

#include <algorithm>
#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/quant/quant_math.hpp"

namespace gradcomm::kernels::quant {

namespace {

void require_layout(const Layout& l) {
  require(l.block >= kMinBlock && l.block <= kMaxBlock && (l.block & (l.block - 1)) == 0, "block size ", l.block,
          " is not a power of two in ", kMinBlock, "..", kMaxBlock);
  require(l.chunks >= 1, "a quantized bucket needs at least one chunk");
  require(l.padded() >= l.n, "the layout's ", l.padded(), " elements cannot hold ", l.n);
}

}  // namespace

Layout layout_for(size_t n, size_t chunks, size_t block) {
  Layout l;
  l.n = n;
  l.chunks = chunks;
  l.block = block;
  require(chunks >= 1 && chunks <= (size_t{1} << 20), "chunks must be 1..2^20, not ", chunks);
  require(n <= (size_t{1} << 40), "a quantized bucket of ", n, " elements is too large");
  const size_t blocks = (n + block - 1) / (block == 0 ? 1 : block);
  l.blocks_per_chunk = (blocks + chunks - 1) / chunks;
  require_layout(l);
  return l;
}

void quantize(const float* x, const float* e, const Layout& layout, void* out, float* residual, const Target& t) {
  require_layout(layout);
  if (layout.padded() == 0) return;
  require(out != nullptr && (x != nullptr || layout.n == 0), "quantize: NULL buffer");
  dispatch(t, [&] { host::quantize(x, e, layout, out, residual); },
           [&] { cuda::quantize(x, e, layout, out, residual, t.stream); });
}

void sum_requantize(const void* in, size_t ranks, const Layout& layout, const float* e, void* out, float* residual,
                    const Target& t) {
  require_layout(layout);
  require(ranks >= 1, "sum_requantize needs at least one rank's chunk");
  if (layout.chunk_elements() == 0) return;
  require(in != nullptr && out != nullptr, "sum_requantize: NULL buffer");
  dispatch(t, [&] { host::sum_requantize(in, ranks, layout, e, out, residual); },
           [&] { cuda::sum_requantize(in, ranks, layout, e, out, residual, t.stream); });
}

void dequantize(const void* in, const Layout& layout, float* out, const Target& t) {
  require_layout(layout);
  if (layout.n == 0) return;
  require(in != nullptr && out != nullptr, "dequantize: NULL buffer");
  dispatch(t, [&] { host::dequantize(in, layout, out); }, [&] { cuda::dequantize(in, layout, out, t.stream); });
}

namespace host {

namespace {
// max |v| over a block, NaN if any v is NaN: the bits of |v| compared as unsigned
// integers order non-negative floats, and every NaN's bits lie above Inf's. An
// integer max vectorizes where a float one (without -ffast-math) does not.
float block_amax(const float* v, size_t n) {
  uint32_t top = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t bits = float_to_bits(v[j]) & 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  return bits_to_float(top);
}
}  // namespace

// The element loops below are written so that -O3 vectorizes them (no calls, no
// early exits, NaN tracked with a flag beside a plain max).
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
    const float scale = scale_of(amax);
    const Encoder enc = encoder_for(amax);
    int8_t* codes = const_cast<int8_t*>(codes_of(out, l, chunk, b));
    const_cast<float*>(scales_of(out, l, chunk))[b] = scale;
    const float* vv = v.data();
    for (size_t j = 0; j < block; ++j) codes[j] = encode(vv[j], enc);
    if (residual != nullptr)
      for (size_t j = 0; j < live; ++j) residual[first + j] = add_rn(vv[j], -decode(codes[j], scale));
  }
}

void sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out, float* residual) {
  const size_t block = l.block;
  std::vector<float> sums(block);
  float* s = sums.data();
  for (size_t b = 0; b < l.blocks_per_chunk; ++b) {
    // Rank by rank over the block: the same rank-order sum per element.
    for (size_t j = 0; j < block; ++j) s[j] = 0.0f;
    for (size_t r = 0; r < ranks; ++r) {
      const int8_t* codes = codes_of(in, l, r, b);
      const float scale = scales_of(in, l, r)[b];
      for (size_t j = 0; j < block; ++j) s[j] = add_rn(s[j], decode(codes[j], scale));
    }
    if (e != nullptr) {
      const float* eb = e + b * block;
      for (size_t j = 0; j < block; ++j) s[j] = add_rn(s[j], eb[j]);
    }
    const float amax = block_amax(s, block);
    const float scale = scale_of(amax);
    const Encoder enc = encoder_for(amax);
    int8_t* codes = const_cast<int8_t*>(codes_of(out, l, 0, b));
    const_cast<float*>(scales_of(out, l, 0))[b] = scale;
    for (size_t j = 0; j < block; ++j) codes[j] = encode(s[j], enc);
    if (residual != nullptr) {
      float* rb = residual + b * block;
      for (size_t j = 0; j < block; ++j) rb[j] = add_rn(s[j], -decode(codes[j], scale));
    }
  }
}

void dequantize(const void* in, const Layout& l, float* out) {
  for (size_t chunk = 0; chunk < l.chunks; ++chunk)
    for (size_t b = 0; b < l.blocks_per_chunk; ++b) {
      const size_t first = (chunk * l.blocks_per_chunk + b) * l.block;
      if (first >= l.n) return;  // the rest is padding
      const size_t live = std::min(l.block, l.n - first);
      const int8_t* codes = codes_of(in, l, chunk, b);
      const float scale = scales_of(in, l, chunk)[b];
      for (size_t j = 0; j < live; ++j) out[first + j] = decode(codes[j], scale);
    }
}

}  // namespace host

}  // namespace gradcomm::kernels::quant
