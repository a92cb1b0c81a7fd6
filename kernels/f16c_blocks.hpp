// Blocks of f16 <-> f32 conversions for the host twins: 8 at a time with x86's
// F16C where the CPU has it (checked at run time), else element.hpp's scalar
// conversions. The bits are the scalar conversions' for every input: F16C
// rounds to nearest even as they do, and a block holding a NaN (whose payload
// the two may treat differently) is converted by the scalar code.
// (Before: a 2-process 25M-element f16 all-reduce on the socket transport took
// 103 ms against 78 ms for f32; with blocks, 49-53 ms.)
#pragma once

#include <cstddef>

#include "kernels/element.hpp"

namespace gradcomm::kernels::f16c {

// out[0..m) = to_float(in[0..m)).
void to_float(const half_bits* in, float* out, size_t m);
// out[0..m) = from_float<half_bits>(in[0..m)).
void from_float(const float* in, half_bits* out, size_t m);

}  // namespace gradcomm::kernels::f16c
