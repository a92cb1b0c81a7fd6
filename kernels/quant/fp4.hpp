// The 4-bit format of the quantized blocks (quant.hpp), two codes a byte: e2m1, the
// OCP MX / NVFP4 element format (1 sign, 2 exponent and 1 mantissa bit: 0, 0.5, 1,
// 1.5, 2, 3, 4, 6), here with one f32 scale per block of 32 or more values. The fp4
// wire's codes (reducer/strategies/fp4_wire.*). Chosen over ZeRO++'s int4 (-7..7)
// on measured error: equal on Gaussian blocks, 1.4x more accurate on heavy-tailed
// ones (docs/compression.md, "fp4").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/fp8.hpp"
#include "kernels/quant/quant.hpp"

namespace gradcomm::kernels::quant {

struct Fp4E2M1 : MiniFloat<2, 1, 1, 0x7> {
  static constexpr float kMax = 6.0f;
};

const Codec& fp4_e2m1_codec();

namespace cuda {  // fp4_cuda.cu (a build with CUDA)
void fp4_e2m1_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                       gcommStream_t stream);
void fp4_e2m1_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                             float* residual, gcommStream_t stream);
void fp4_e2m1_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels::quant
