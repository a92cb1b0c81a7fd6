// The int8 format's Codec: the host twins instantiated here, the CUDA paths in
// int8_cuda.cu.
#include "kernels/quant/int8.hpp"

#include "kernels/quant/quant_host.hpp"

namespace gradcomm::kernels::quant {

const Codec& int8_codec() {
  static const Codec codec{"int8",
                           Int8::kBits,
                           host::quantize<Int8>,
                           host::sum_requantize<Int8>,
                           host::dequantize<Int8>,
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
