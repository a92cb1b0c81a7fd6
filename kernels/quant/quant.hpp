// Blockwise symmetric quantization for the block-quantized gradient wires
// (reducer/strategies/block_wire.*: int8, fp8, fp4). Each operation has a host twin
// and a CUDA path that give the same bits (quant_math.hpp holds the shared element
// math); the number format of the codes is a Codec, one file set each (int8.*,
// fp8.*, fp4.*), which instantiates the kernels of quant_host.hpp and quant_cuda.cuh.
//
// A bucket of n f32 values is cut into `chunks` equal chunks (one per rank) of
// chunk_elements = blocks_per_chunk * block values each; the last chunks are
// padded with zeros past n. A block of `block` values is stored as `block` codes of
// code_bits bits (8, or 4: two codes a byte, the even element's in the low nibble)
// and one f32 scale: value = value_of(code) * scale, scale = max|v| / M over
// the block (M: the format's largest code, 127 for int8), code = the format's
// nearest code (ties to even) of v * (M / max|v|) (two roundings; blocks whose max
// is below 2^-64 are scaled by 2^64 first). A block of zeros has scale 0 (codes 0,
// no NaN); a block holding Inf or NaN gets scale NaN (codes 0), so every value
// decoded from it is NaN and the step's Inf/NaN check sees it on every rank. A
// block whose max is below M * 2^-149 has a scale that underflows to 0: it decodes
// as zeros (its error is its own size).
//
// A chunk in memory (chunk_bytes(...)): its codes, then its scales (4-byte aligned,
// as a block's codes take a multiple of 16 bytes). Chunks follow one another.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/element.hpp"
#include "kernels/ops.hpp"

namespace gradcomm::kernels::quant {

constexpr size_t kMinBlock = 32;
constexpr size_t kMaxBlock = 4096;

// The bucket's layout: n values, `chunks` chunks of blocks_per_chunk blocks.
struct Layout {
  size_t n = 0;
  size_t chunks = 1;
  size_t block = 256;
  size_t blocks_per_chunk = 0;
  size_t code_bits = 8;  // 8 or 4

  GCOMM_HD size_t chunk_elements() const { return blocks_per_chunk * block; }
  GCOMM_HD size_t block_code_bytes() const { return block * code_bits / 8; }
  GCOMM_HD size_t chunk_code_bytes() const { return blocks_per_chunk * block_code_bytes(); }
  GCOMM_HD size_t chunk_bytes() const { return chunk_code_bytes() + blocks_per_chunk * sizeof(float); }
  GCOMM_HD size_t total_bytes() const { return chunks * chunk_bytes(); }
  GCOMM_HD size_t padded() const { return chunks * chunk_elements(); }
};
// Throws gcommInvalidArgument unless block is a power of two in [kMinBlock,
// kMaxBlock], chunks >= 1 and code_bits is 8 or 4; n may be 0 (blocks_per_chunk is
// then 0). A codec's layout takes its code_bits (the operations check it).
Layout layout_for(size_t n, size_t chunks, size_t block, size_t code_bits = 8);

// A number format's instantiations of the three operations (quant_host.hpp,
// quant_cuda.cuh); the CUDA ones are NULL in a build without CUDA.
struct Codec {
  const char* name;  // "int8", "fp8 e4m3": in messages
  size_t code_bits;  // F::kBits: 8, or 4
  void (*host_quantize)(const float* x, const float* e, const Layout& l, void* out, float* residual);
  void (*host_sum_requantize)(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                              float* residual);
  void (*host_dequantize)(const void* in, const Layout& l, float* out);
  void (*cuda_quantize)(const float* x, const float* e, const Layout& l, void* out, float* residual,
                        gcommStream_t stream);
  void (*cuda_sum_requantize)(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                              float* residual, gcommStream_t stream);
  void (*cuda_dequantize)(const void* in, const Layout& l, float* out, gcommStream_t stream);
};

// Quantizes x (n values; the padding counts as 0) plus the error feedback e (n
// values, or NULL) into `out` (layout.total_bytes()). With `residual` (n values,
// may be x itself), also writes residual = (x + e) - decoded: what this rank's
// contribution lost, the next error feedback.
void quantize(const Codec& codec, const float* x, const float* e, const Layout& layout, void* out,
              float* residual, const Target& t);

// The owner's reduction of one chunk: `in` holds `ranks` quantized chunks (each
// layout.chunk_bytes(), in rank order); their decoded values are summed in rank
// order (f32, one rounding per addition), plus the owner's error feedback e
// (layout.chunk_elements() values, or NULL) last, and the sums quantized again into
// `out` (one chunk, which may be a slot of the all-gather buffer). With `residual`
// (chunk_elements values), also writes residual = sum - decoded.
void sum_requantize(const Codec& codec, const void* in, size_t ranks, const Layout& layout, const float* e,
                    void* out, float* residual, const Target& t);

// Decodes the whole bucket (every chunk of layout, `in` as quantize writes it) into
// out[0..n): the padding is not written.
void dequantize(const Codec& codec, const void* in, const Layout& layout, float* out, const Target& t);

}  // namespace gradcomm::kernels::quant
