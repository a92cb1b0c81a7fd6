// The fp8 formats of the quantized blocks (quant.hpp), OCP FP8: e4m3 ("E4M3FN": 4
// exponent bits, bias 7, 3 mantissa bits, largest 448, no infinities) and e5m2
// (bias 15, 2 mantissa bits, largest 57344). Sign-magnitude bytes; the nearest
// code with ties to the even one, subnormals kept, nothing past the largest finite
// code (a block with Inf/NaN has scale NaN and codes 0; quant.hpp). The fp8 wire's
// codes (reducer/strategies/fp8_wire.*).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/quant.hpp"
#include "kernels/quant/quant_math.hpp"

namespace gradcomm::kernels::quant {

template <int kExpBits, int kManBits, int kBias, uint32_t kLargest>
struct MiniFloat {
  static constexpr size_t kBits = 1 + kExpBits + kManBits;  // 8, or 4 (fp4.hpp)
  static constexpr uint32_t kSign = 1u << (kBits - 1);
  static constexpr int kMinExp = 1 - kBias;  // the smallest normal's exponent; subnormals share its step

  // x's nearest code: its significand in steps of 2^(k - M), k its binade's
  // exponent (kMinExp for subnormals), rounded to even; the code is then
  // (k + bias - 1) << M plus that count, which carries into the exponent field
  // when it rounds up to 2^(M+1), and is a subnormal's count when k is kMinExp.
  // Zero, Inf and NaN give 0 (the block's scale carries Inf/NaN). No branches, so
  // the host loops vectorize: Inf and NaN are taken as 0 before anything else.
  GCOMM_HD static uint8_t encode(float x) {
    const uint32_t bits = float_to_bits(x);
    const uint32_t finite = (bits & 0x7fffffffu) < 0x7f800000u ? 0xffffffffu : 0u;
    const uint32_t magnitude = bits & 0x7fffffffu & finite;
    const int e = static_cast<int>(magnitude >> 23) - 127;  // -127 for zero and float subnormals
    const int k = e < kMinExp ? kMinExp : e;
    const float steps = round_even(mul_rn(bits_to_float(magnitude), pow2(kManBits - k)));
    uint32_t code = (static_cast<uint32_t>(k + kBias - 1) << kManBits) + static_cast<uint32_t>(steps);
    code = code > kLargest ? kLargest : code;
    return static_cast<uint8_t>((((bits >> 31) * kSign) & finite) | code);
  }

  // The value's bits built directly (a normal code's exponent and mantissa fields
  // moved into a float's; a subnormal's count times its step, exact), selected and
  // signed without branches: the codes of a block are as unpredictable as its
  // values, and the host loops that decode them vectorize only without branches.
  GCOMM_HD static float value(uint8_t code) {
    const uint32_t c = code;
    const uint32_t field = (c >> kManBits) & ((1u << kExpBits) - 1);
    const uint32_t mantissa = c & ((1u << kManBits) - 1);
    const uint32_t normal = ((field + 127 - kBias) << 23) | (mantissa << (23 - kManBits));
    const uint32_t subnormal = float_to_bits(mul_rn(static_cast<float>(mantissa), pow2(kMinExp - kManBits)));
    const uint32_t magnitude = field == 0 ? subnormal : normal;
    return bits_to_float(magnitude | ((c & kSign) << (32 - kBits)));
  }
};

struct Fp8E4M3 : MiniFloat<4, 3, 7, 0x7e> {
  static constexpr float kMax = 448.0f;
};
struct Fp8E5M2 : MiniFloat<5, 2, 15, 0x7b> {
  static constexpr float kMax = 57344.0f;
};

const Codec& fp8_e4m3_codec();
const Codec& fp8_e5m2_codec();

namespace cuda {  // fp8_cuda.cu (a build with CUDA)
void fp8_e4m3_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                       gcommStream_t stream);
void fp8_e4m3_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                             float* residual, gcommStream_t stream);
void fp8_e4m3_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream);
void fp8_e5m2_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                       gcommStream_t stream);
void fp8_e5m2_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                             float* residual, gcommStream_t stream);
void fp8_e5m2_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels::quant
