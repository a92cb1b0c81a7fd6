// The fp8 formats' Codecs: the host twins instantiated here, the CUDA paths in
// fp8_cuda.cu.
#include "kernels/quant/fp8.hpp"

#include "kernels/quant/quant_host.hpp"

namespace gradcomm::kernels::quant {

#ifdef GRADCOMM_KERNELS_CUDA
#define GCOMM_FP8_CUDA(format) \
  cuda::fp8_##format##_quantize, cuda::fp8_##format##_sum_requantize, cuda::fp8_##format##_dequantize
#else
#define GCOMM_FP8_CUDA(format) nullptr, nullptr, nullptr
#endif

const Codec& fp8_e4m3_codec() {
  static const Codec codec{"fp8 e4m3",
                           Fp8E4M3::kBits,
                           host::Twins<Fp8E4M3>::quantize,
                           host::Twins<Fp8E4M3>::sum_requantize,
                           host::Twins<Fp8E4M3>::dequantize,
                           GCOMM_FP8_CUDA(e4m3)};
  return codec;
}

const Codec& fp8_e5m2_codec() {
  static const Codec codec{"fp8 e5m2",
                           Fp8E5M2::kBits,
                           host::Twins<Fp8E5M2>::quantize,
                           host::Twins<Fp8E5M2>::sum_requantize,
                           host::Twins<Fp8E5M2>::dequantize,
                           GCOMM_FP8_CUDA(e5m2)};
  return codec;
}

#undef GCOMM_FP8_CUDA

}  // namespace gradcomm::kernels::quant
