// The int8 format's Codec: the host twins instantiated here, the CUDA paths in
// int8_cuda.cu.
#include "kernels/quant/int8.hpp"

#include "kernels/quant/quant_host.hpp"

namespace gradcomm::kernels::quant {

const Codec& int8_codec() {
  static const Codec codec{"int8",
                           Int8::kBits,
                           host::Twins<Int8>::quantize,
                           host::Twins<Int8>::sum_requantize,
                           host::Twins<Int8>::dequantize,
#ifdef GRADCOMM_KERNELS_CUDA
                           cuda::int8_quantize,
                           cuda::int8_sum_requantize,
                           cuda::int8_dequantize
#else
                           nullptr,
                           nullptr,
                           nullptr
#endif
  };
  return codec;
}

}  // namespace gradcomm::kernels::quant
