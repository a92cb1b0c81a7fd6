#include "comm/local/local_reduce.hpp"
#include "comm/local/reduce_math.hpp"

namespace gradcomm::comm::local_host {

using kernels::dispatch_dtype;
using kernels::from_float;
using kernels::to_float;

namespace {
template <class T>
float reduce_at(const void* const* sends, int n, size_t j, gcommRedOp_t op) {
  float acc = to_float(static_cast<const T*>(sends[0])[j]);
  for (int q = 1; q < n; ++q) acc = combine(op, acc, to_float(static_cast<const T*>(sends[q])[j]));
  return finish(op, acc, n);
}
}  // namespace

void reduce_to_float(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, float* out) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < count; ++i) out[i] = reduce_at<T>(sends, n, offset + i, op);
  });
}

void reduce_to_typed(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, void* out) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    // Read every input of element i before writing it: `out` may alias this rank's input.
    for (size_t i = 0; i < count; ++i) o[i] = from_float<T>(reduce_at<T>(sends, n, offset + i, op));
  });
}

void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    for (size_t i = 0; i < count; ++i) o[i] = from_float<T>(in[i]);
  });
}

}  // namespace gradcomm::comm::local_host
