// Validation, dispatch and the host twins of the int8 blocks (quant.hpp).
#include "kernels/quant/quant.hpp"

#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"
#include "kernels/quant/quant_math.hpp"

namespace gradcomm::kernels::quant {

namespace {

template <class Host, class Cuda>
void dispatch(const Target& t, Host&& host_op, Cuda&& cuda_op) {
  if (t.cuda()) {
    DeviceGuard guard(t.device);
    cuda_op();
  } else {
    host_op();
  }
}

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

void quantize(const float* x, const float* e, const Layout& l, void* out, float* residual) {
  const size_t blocks = l.chunks * l.blocks_per_chunk;
  for (size_t k = 0; k < blocks; ++k) {
    const size_t chunk = k / l.blocks_per_chunk, b = k % l.blocks_per_chunk;
    const size_t first = k * l.block;
    auto value = [&](size_t j) {
      const size_t i = first + j;
      if (i >= l.n) return 0.0f;
      return e != nullptr ? add_rn(x[i], e[i]) : x[i];
    };
    float amax = 0.0f;
    for (size_t j = 0; j < l.block; ++j) amax = amax_add(amax, value(j));
    const float scale = scale_of(amax), inverse = inverse_of(amax);
    int8_t* codes = const_cast<int8_t*>(codes_of(out, l, chunk, b));
    const_cast<float*>(scales_of(out, l, chunk))[b] = scale;
    for (size_t j = 0; j < l.block; ++j) {
      const float v = value(j);
      codes[j] = encode(v, inverse);
      if (residual != nullptr && first + j < l.n) residual[first + j] = add_rn(v, -decode(codes[j], scale));
    }
  }
}

void sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out, float* residual) {
  std::vector<float> sums(l.block);
  for (size_t b = 0; b < l.blocks_per_chunk; ++b) {
    float amax = 0.0f;
    for (size_t j = 0; j < l.block; ++j) {
      float s = 0.0f;
      for (size_t r = 0; r < ranks; ++r) s = add_rn(s, decode(codes_of(in, l, r, b)[j], scales_of(in, l, r)[b]));
      if (e != nullptr) s = add_rn(s, e[b * l.block + j]);
      sums[j] = s;
      amax = amax_add(amax, s);
    }
    const float scale = scale_of(amax), inverse = inverse_of(amax);
    int8_t* codes = const_cast<int8_t*>(codes_of(out, l, 0, b));
    const_cast<float*>(scales_of(out, l, 0))[b] = scale;
    for (size_t j = 0; j < l.block; ++j) {
      codes[j] = encode(sums[j], inverse);
      if (residual != nullptr) residual[b * l.block + j] = add_rn(sums[j], -decode(codes[j], scale));
    }
  }
}

void dequantize(const void* in, const Layout& l, float* out) {
  const size_t per_chunk = l.chunk_elements();
  for (size_t i = 0; i < l.n; ++i) {
    const size_t chunk = i / per_chunk, within = i % per_chunk;
    const size_t b = within / l.block;
    out[i] = decode(codes_of(in, l, chunk, b)[within % l.block], scales_of(in, l, chunk)[b]);
  }
}

}  // namespace host

}  // namespace gradcomm::kernels::quant
