// The int8 format's CUDA paths (quant_cuda.cuh instantiated for Int8).
#include "kernels/quant/int8.hpp"
#include "kernels/quant/quant_cuda.cuh"

namespace gradcomm::kernels::quant::cuda {

void int8_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                   gcommStream_t stream) {
  quantize<Int8>(x, e, l, out, residual, stream);
}
void int8_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                         float* residual, gcommStream_t stream) {
  sum_requantize<Int8>(in, ranks, l, e, out, residual, stream);
}
void int8_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream) {
  dequantize<Int8>(in, l, out, stream);
}

}  // namespace gradcomm::kernels::quant::cuda
