// The reduction loops of the local transport, on the host and as CUDA kernels
// (local_kernels.cu), computing the same function (reduce_math.hpp).
#pragma once

#include <cstddef>

#include "gradcomm/comm.h"

namespace gradcomm::comm {

constexpr int kMaxLocalRanks = 64;

// out[i] = finish(op, combine over ranks q = 0..n-1 of send[q][offset + i]) for
// i < count, in float (out_float) or in the dtype (out_typed).
namespace local_host {
void reduce_to_float(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, float* out);
void reduce_to_typed(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, void* out);
void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype);
}  // namespace local_host

namespace local_cuda {
void reduce_to_float(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, float* out, gcommStream_t stream);
void reduce_to_typed(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, void* out, gcommStream_t stream);
void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype, gcommStream_t stream);
}  // namespace local_cuda

}  // namespace gradcomm::comm
