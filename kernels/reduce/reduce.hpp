// The reduction loops of the host transports (local, socket), on the host and as
// CUDA kernels (reduce_cuda.cu), computing the same function (reduce_math.hpp).
#pragma once

#include <cstddef>

#include "gradcomm/types.h"

namespace gradcomm::kernels {

// The most inputs one call combines (the local transport's rank limit).
constexpr int kMaxReduceInputs = 64;

// out[i] = finish(op, combine over ranks q = 0..n-1 of send[q][offset + i]) for
// i < count, in float (out_float) or in the dtype (out_typed).
namespace reduce_host {
void reduce_to_float(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, float* out);
void reduce_to_typed(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, void* out);
void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype);
}  // namespace reduce_host

namespace reduce_cuda {
void reduce_to_float(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, float* out, gcommStream_t stream);
void reduce_to_typed(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, void* out, gcommStream_t stream);
void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype, gcommStream_t stream);
}  // namespace reduce_cuda

}  // namespace gradcomm::kernels
