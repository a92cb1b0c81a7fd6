// The fp4 format's Codec: the host twins instantiated here, the CUDA paths in
// fp4_cuda.cu.
#include "kernels/quant/fp4.hpp"

#include "kernels/quant/quant_host.hpp"

namespace gradcomm::kernels::quant {

const Codec& fp4_e2m1_codec() {
  static const Codec codec{"fp4 e2m1",
                           Fp4E2M1::kBits,
                           host::Twins<Fp4E2M1>::quantize,
                           host::Twins<Fp4E2M1>::sum_requantize,
                           host::Twins<Fp4E2M1>::dequantize,
#ifdef GRADCOMM_KERNELS_CUDA
                           cuda::fp4_e2m1_quantize,
                           cuda::fp4_e2m1_sum_requantize,
                           cuda::fp4_e2m1_dequantize
#else
                           nullptr,
                           nullptr,
                           nullptr
#endif
  };
  return codec;
}

}  // namespace gradcomm::kernels::quant
