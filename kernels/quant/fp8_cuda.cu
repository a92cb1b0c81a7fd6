// The fp8 formats' CUDA paths (quant_cuda.cuh instantiated for Fp8E4M3 and Fp8E5M2).
#include "kernels/quant/fp8.hpp"
#include "kernels/quant/quant_cuda.cuh"

namespace gradcomm::kernels::quant::cuda {

void fp8_e4m3_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                       gcommStream_t stream) {
  quantize<Fp8E4M3>(x, e, l, out, residual, stream);
}
void fp8_e4m3_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                             float* residual, gcommStream_t stream) {
  sum_requantize<Fp8E4M3>(in, ranks, l, e, out, residual, stream);
}
void fp8_e4m3_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream) {
  dequantize<Fp8E4M3>(in, l, out, stream);
}
void fp8_e5m2_quantize(const float* x, const float* e, const Layout& l, void* out, float* residual,
                       gcommStream_t stream) {
  quantize<Fp8E5M2>(x, e, l, out, residual, stream);
}
void fp8_e5m2_sum_requantize(const void* in, size_t ranks, const Layout& l, const float* e, void* out,
                             float* residual, gcommStream_t stream) {
  sum_requantize<Fp8E5M2>(in, ranks, l, e, out, residual, stream);
}
void fp8_e5m2_dequantize(const void* in, const Layout& l, float* out, gcommStream_t stream) {
  dequantize<Fp8E5M2>(in, l, out, stream);
}

}  // namespace gradcomm::kernels::quant::cuda
