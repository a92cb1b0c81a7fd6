// Validation and dispatch of the quantized blocks (quant.hpp); the formats'
// kernels are instantiated by their own files (int8.*, fp8.*).
#include "kernels/quant/quant.hpp"

#include "common/device.hpp"
#include "common/error.hpp"
#include "kernels/dispatch.hpp"

namespace gradcomm::kernels::quant {

namespace {

void require_layout(const Layout& l) {
  require(l.block >= kMinBlock && l.block <= kMaxBlock && (l.block & (l.block - 1)) == 0, "block size ",
          l.block, " is not a power of two in ", kMinBlock, "..", kMaxBlock);
  require(l.chunks >= 1, "a quantized bucket needs at least one chunk");
  require(l.code_bits == 8 || l.code_bits == 4, "codes of ", l.code_bits, " bits (8 or 4)");
  require(l.padded() >= l.n, "the layout's ", l.padded(), " elements cannot hold ", l.n);
}

void require_layout(const Layout& l, const Codec& codec) {
  require_layout(l);
  require(l.code_bits == codec.code_bits, "a layout of ", l.code_bits, "-bit codes for the ", codec.name,
          " blocks (", codec.code_bits, "-bit codes)");
}

}  // namespace

Layout layout_for(size_t n, size_t chunks, size_t block, size_t code_bits) {
  Layout l;
  l.n = n;
  l.chunks = chunks;
  l.block = block;
  l.code_bits = code_bits;
  require(chunks >= 1 && chunks <= (size_t{1} << 20), "chunks must be 1..2^20, not ", chunks);
  require(n <= (size_t{1} << 40), "a quantized bucket of ", n, " elements is too large");
  const size_t blocks = (n + block - 1) / (block == 0 ? 1 : block);
  l.blocks_per_chunk = (blocks + chunks - 1) / chunks;
  require_layout(l);
  return l;
}

namespace {

// The CUDA path of `codec`, or the reason there is none.
template <class Fn>
Fn cuda_path(Fn fn, const Codec& codec) {
  if (fn == nullptr)
    fail(gcommNotSupported, "the ", codec.name,
         " blocks need a CUDA kernel, and gradcomm was built without CUDA "
         "(GRADCOMM_CUDA=OFF)");
  return fn;
}

}  // namespace

void quantize(const Codec& codec, const float* x, const float* e, const Layout& layout, void* out,
              float* residual, const Target& t) {
  require_layout(layout, codec);
  if (layout.padded() == 0) return;
  require(out != nullptr && (x != nullptr || layout.n == 0), "quantize: NULL buffer");
  dispatch(
      t, [&] { codec.host_quantize(x, e, layout, out, residual); },
      [&] { cuda_path(codec.cuda_quantize, codec)(x, e, layout, out, residual, t.stream); });
}

void sum_requantize(const Codec& codec, const void* in, size_t ranks, const Layout& layout, const float* e,
                    void* out, float* residual, const Target& t) {
  require_layout(layout, codec);
  require(ranks >= 1, "sum_requantize needs at least one rank's chunk");
  if (layout.chunk_elements() == 0) return;
  require(in != nullptr && out != nullptr, "sum_requantize: NULL buffer");
  dispatch(
      t, [&] { codec.host_sum_requantize(in, ranks, layout, e, out, residual); },
      [&] { cuda_path(codec.cuda_sum_requantize, codec)(in, ranks, layout, e, out, residual, t.stream); });
}

void dequantize(const Codec& codec, const void* in, const Layout& layout, float* out, const Target& t) {
  require_layout(layout, codec);
  if (layout.n == 0) return;
  require(in != nullptr && out != nullptr, "dequantize: NULL buffer");
  dispatch(
      t, [&] { codec.host_dequantize(in, layout, out); },
      [&] { cuda_path(codec.cuda_dequantize, codec)(in, layout, out, t.stream); });
}

}  // namespace gradcomm::kernels::quant
