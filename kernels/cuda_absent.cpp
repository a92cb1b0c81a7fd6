// The CUDA launchers of a build without CUDA (GRADCOMM_CUDA=OFF; replaces
// cuda_kernels.cu, powersgd/low_rank_cuda.cu, reduce/reduce_cuda.cu and hash/; the
// quantized blocks' formats leave their CUDA paths NULL instead, quant/quant.cpp). They are
// never reached: such a build sees no GPU, so every CUDA device is refused where
// it is named (validate_device) before a kernel could be chosen. If one is
// reached all the same, it fails with the reason instead of doing nothing.
#include "common/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/hash/tensor_hash.hpp"
#include "kernels/powersgd/low_rank.hpp"
#include "kernels/reduce/reduce.hpp"

namespace gradcomm::kernels {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail(gcommNotSupported, what,
       " needs a CUDA kernel, and gradcomm was built without CUDA (GRADCOMM_CUDA=OFF)");
}
}  // namespace

namespace cuda {
void apply(const OpSpec&, const Pair*, size_t, gcommStream_t) {
  no_cuda("an element-wise op");
}
void l2_norm(const gcommTensor_t*, size_t, float*, float*, double*, gcommStream_t, double*) {
  no_cuda("a norm");
}
void norm_of_sums(const double*, size_t, float*, gcommStream_t) {
  no_cuda("a norm");
}
void copy_unless_flagged(float*, const float*, size_t, const float*, gcommStream_t) {
  no_cuda("a flagged copy");
}
void update_scale(ScalerState*, const ScalerParams&, gcommStream_t) {
  no_cuda("the grad scaler's update");
}
}  // namespace cuda

namespace hash::cuda {
void chunk_hashes(const void*, size_t, uint64_t*, gcommStream_t) {
  no_cuda("the divergence check's hash");
}
}  // namespace hash::cuda

namespace reduce_cuda {
void reduce_to_float(const void* const*, int, size_t, size_t, gcommDataType_t, gcommRedOp_t, float*,
                     gcommStream_t) {
  no_cuda("a reduction");
}
void reduce_to_typed(const void* const*, int, size_t, size_t, gcommDataType_t, gcommRedOp_t, void*,
                     gcommStream_t) {
  no_cuda("a reduction");
}
void float_to_typed(const float*, void*, size_t, gcommDataType_t, gcommStream_t) {
  no_cuda("a conversion");
}
}  // namespace reduce_cuda

namespace powersgd::cuda {
void add_error(const LowRankMatrix*, size_t, gcommStream_t) {
  no_cuda("PowerSGD");
}
void multiply_mq(const LowRankMatrix*, size_t, int, gcommStream_t) {
  no_cuda("PowerSGD");
}
void add_error_multiply_mq(const LowRankMatrix*, size_t, int, gcommStream_t) {
  no_cuda("PowerSGD");
}
void orthogonalize(const LowRankMatrix*, size_t, int, float, gcommStream_t) {
  no_cuda("PowerSGD");
}
void multiply_mtp(const LowRankMatrix*, size_t, int, const float*, gcommStream_t) {
  no_cuda("PowerSGD");
}
void decompress(const LowRankMatrix*, size_t, int, float, const float*, const DecompressOutput&,
                gcommStream_t) {
  no_cuda("PowerSGD");
}
}  // namespace powersgd::cuda

}  // namespace gradcomm::kernels
