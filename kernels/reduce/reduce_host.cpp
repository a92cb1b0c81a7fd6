// The host reductions of the local and socket transports. Blocks of kBlock
// elements are accumulated in a float array, rank by rank, with the operator
// chosen once per block rather than per element: the compiler vectorizes the
// inner loops, and each element still sees exactly reduce_math.hpp's sequence
// (rank 0, combine rank 1, ..., finish, round once): the same bits as the
// element-at-a-time form and as the CUDA kernels. (The element-at-a-time loop
// took 11.6 ms for a 16 MiB + 16 MiB float sum, this form 4.9 ms at -O3, which
// kernels/CMakeLists.txt sets for this file.)
#include "kernels/reduce/reduce.hpp"

#include <algorithm>
#include <type_traits>

#include "kernels/f16c_blocks.hpp"
#include "kernels/reduce/reduce_math.hpp"

namespace gradcomm::kernels::reduce_host {

namespace {

constexpr size_t kBlock = 1024;  // 4 KiB of float accumulators: stays in L1

// out[0..m) = the floats of in[0..m), as to_float gives them.
// f16 blocks go through kernels/f16c_blocks.hpp (F16C where the CPU has it).
template <class T>
void block_to_float(const T* in, float* out, size_t m) {
  if constexpr (std::is_same_v<T, half_bits>) {
    f16c::to_float(in, out, m);
  } else {
    for (size_t i = 0; i < m; ++i) out[i] = to_float(in[i]);
  }
}

// out[0..m) = from_float<T>(in[0..m)).
template <class T>
void block_from_float(const float* in, T* out, size_t m) {
  if constexpr (std::is_same_v<T, half_bits>) {
    f16c::from_float(in, out, m);
  } else {
    for (size_t i = 0; i < m; ++i) out[i] = from_float<T>(in[i]);
  }
}

template <class T, class Combine>
void fold(float* acc, const T* in, size_t m, Combine&& combine_one) {
  if constexpr (std::is_same_v<T, half_bits>) {  // converted a block at a time
    float v[kBlock];
    block_to_float(in, v, m);
    for (size_t i = 0; i < m; ++i) acc[i] = combine_one(acc[i], v[i]);
  } else {
    for (size_t i = 0; i < m; ++i) acc[i] = combine_one(acc[i], to_float(in[i]));
  }
}

// acc[0..m) = finish(op, combine of send[q][first .. first + m) over q in rank order).
template <class T>
void reduce_block(const void* const* sends, int n, size_t first, size_t m, gcommRedOp_t op, float* acc) {
  const T* s0 = static_cast<const T*>(sends[0]) + first;
  block_to_float(s0, acc, m);
  for (int q = 1; q < n; ++q) {
    const T* in = static_cast<const T*>(sends[q]) + first;
    switch (op) {
      case gcommMax:
        fold(acc, in, m, [](float a, float v) { return combine(gcommMax, a, v); });
        break;
      case gcommMin:
        fold(acc, in, m, [](float a, float v) { return combine(gcommMin, a, v); });
        break;
      default:
        fold(acc, in, m, [](float a, float v) { return a + v; });
        break;  // sum, avg: combine's default
    }
  }
  if (op == gcommAvg)
    for (size_t i = 0; i < m; ++i) acc[i] = finish(op, acc[i], n);
}

// Calls sink(block_start, m, acc) for consecutive blocks of the reduction.
template <class T, class Sink>
void reduce_blocks(const void* const* sends, int n, size_t offset, size_t count, gcommRedOp_t op,
                   Sink&& sink) {
  float acc[kBlock];
  for (size_t b = 0; b < count; b += kBlock) {
    const size_t m = std::min(kBlock, count - b);
    // Every input of the block is read before the sink writes it: `out` may alias
    // this rank's input.
    reduce_block<T>(sends, n, offset + b, m, op, acc);
    sink(b, m, acc);
  }
}

}  // namespace

void reduce_to_float(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, float* out) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_blocks<T>(sends, n, offset, count, op,
                     [&](size_t b, size_t m, const float* acc) { std::copy_n(acc, m, out + b); });
  });
}

void reduce_to_typed(const void* const* sends, int n, size_t offset, size_t count, gcommDataType_t dtype,
                     gcommRedOp_t op, void* out) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    reduce_blocks<T>(sends, n, offset, count, op,
                     [&](size_t b, size_t m, const float* acc) { block_from_float(acc, o + b, m); });
  });
}

void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    for (size_t b = 0; b < count; b += kBlock) block_from_float(in + b, o + b, std::min(kBlock, count - b));
  });
}

}  // namespace gradcomm::kernels::reduce_host
