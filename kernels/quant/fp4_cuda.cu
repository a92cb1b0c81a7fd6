// The fp4 format's CUDA paths (quant_cuda.cuh instantiated for Fp4E2M1).
#include "kernels/quant/fp4.hpp"
#include "kernels/quant/quant_cuda.cuh"

namespace gradcomm::kernels::quant::cuda {

void fp4_e2m1_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                       gcommStream_t stream) {
  quantize<Fp4E2M1>(x, e, l, out, residual, stream);
}
void fp4_e2m1_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                             float* residual, gcommStream_t stream) {
  sum_requantize<Fp4E2M1>(in, ranks, l, e, out, residual, stream);
}
void fp4_e2m1_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream) {
  dequantize<Fp4E2M1>(in, l, out, stream);
}

}  // namespace gradcomm::kernels::quant::cuda
