// The int8 format of the quantized blocks (quant.hpp): symmetric codes -127..127
// (two's complement bytes), round to nearest even, the int8 wire's codes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/quant.hpp"
#include "kernels/quant/quant_math.hpp"

namespace gradcomm::kernels::quant {

struct Int8 {
  static constexpr size_t kBits = 8;
  static constexpr float kMax = 127.0f;
  // Anything that is not a number becomes 0, so the conversion is always defined.
  GCOMM_HD static uint8_t encode(float x) {
    float r = round_even(x);
    r = r == r ? r : 0.0f;
    r = r > kMax ? kMax : r;
    r = r < -kMax ? -kMax : r;
    return static_cast<uint8_t>(static_cast<int8_t>(r));
  }
  GCOMM_HD static float value(uint8_t code) { return static_cast<float>(static_cast<int8_t>(code)); }
};

const Codec& int8_codec();

namespace cuda {  // int8_cuda.cu (a build with CUDA)
void int8_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                   gcommStream_t stream);
void int8_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                         float* residual, gcommStream_t stream);
void int8_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels::quant
