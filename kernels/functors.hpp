// Per-element operations, shared by the CUDA kernels (kernels/cuda_kernels.cu)
// and the host twins (kernels/host_kernels.cpp): the same object computes the
// same function on both. An op works on register values of one tensor's two
// sides, `a` (type TA) and `b` (type TB); its flags say which side is read and
// written, so the kernel moves only those bytes (16-byte vectors when aligned).
// operator() returns true when it produced a non-finite value (found-inf).
#pragma once

#include "kernels/element.hpp"

namespace gradcomm::kernels {

// g *= s in place (a = the gradient; b unused). Inf/NaN are written too, as
// PyTorch does.
template <class T>
struct UnscaleOp {
  using TA = T;
  using TB = T;
  static constexpr bool kReadA = true, kWriteA = true, kReadB = false, kWriteB = false;
  float s;
  GCOMM_HD bool operator()(TA& a, TB&) const {
    float v = to_float(a) * s;
    a = from_float<T>(v);
    return !is_finite(v);
  }
};

// Reads g and reports Inf/NaN; writes nothing (half the bytes of an unscale by 1).
template <class T>
struct CheckOp {
  using TA = T;
  using TB = T;
  static constexpr bool kReadA = true, kWriteA = false, kReadB = false, kWriteB = false;
  float s;  // unused: every op is made from the launch's scale
  GCOMM_HD bool operator()(TA& a, TB&) const { return !is_finite(to_float(a)); }
};

// Whether v, cast to a wire of type T (round to nearest even), stays finite:
// f16 overflows from 65520, bf16 from 0x7f7f8000 (3.3961775e38). NaN fails.
template <class T>
GCOMM_HD bool fits_wire(float v) {
  return is_finite(v);
}
template <>
GCOMM_HD bool fits_wire<half_bits>(float v) {
  return v < 65520.0f && v > -65520.0f;
}
template <>
GCOMM_HD bool fits_wire<bf16_bits>(float v) {
  return v < 3.3961775e38f && v > -3.3961775e38f;
}

// bucket = cast(src * s) (a = the source tensor, b = its place in the bucket).
// With CHECK it reports a value that is not finite on the wire TWire (the bucket's
// own type; the host twin runs an f16 bucket as float, so the wire is named
// apart): an Inf/NaN gradient, or one the cast overflows. Without, it reports
// nothing and costs no compare (the pack's own flags are wanted only for
// straggler attribution's non-finite source).
template <class TSrc, class TBucket, class TWire = TBucket, bool CHECK = false>
struct PackOp {
  using TA = TSrc;
  using TB = TBucket;
  static constexpr bool kReadA = true, kWriteA = false, kReadB = false, kWriteB = true;
  float s;
  GCOMM_HD bool operator()(TA& a, TB& b) const {
    const float v = to_float(a) * s;
    b = from_float<TBucket>(v);
    if constexpr (CHECK)
      return !fits_wire<TWire>(v);
    else
      return false;
  }
};

// dst = cast(bucket * s [+ dst]) (a = its place in the bucket, b = the
// destination), flagging non-finite results. ACCUMULATE is a template flag so
// the plain form never reads the destination.
template <class TBucket, class TDst, bool ACCUMULATE>
struct UnpackOp {
  using TA = TBucket;
  using TB = TDst;
  static constexpr bool kReadA = true, kWriteA = false, kReadB = ACCUMULATE, kWriteB = true;
  float s;
  GCOMM_HD bool operator()(TA& a, TB& b) const {
    float v = to_float(a) * s;
    if (ACCUMULATE) v = to_float(b) + v;
    b = from_float<TDst>(v);
    return !is_finite(v);
  }
};

// One element through an op, from and to memory: what the host twin runs, and
// the kernels' scalar path.
template <class Op>
GCOMM_HD bool apply_at(const Op& op, typename Op::TA* a, typename Op::TB* b, size_t i) {
  typename Op::TA va{};
  typename Op::TB vb{};
  if (Op::kReadA) va = a[i];
  if (Op::kReadB) vb = b[i];
  bool nonfinite = op(va, vb);
  if (Op::kWriteA) a[i] = va;
  if (Op::kWriteB) b[i] = vb;
  return nonfinite;
}

// The factor clip-by-global-norm multiplies by: 1 when the norm is within bounds,
// and 1 when it is Inf or NaN, so a non-finite list is left exactly as it was
// (an Inf norm used to give 0: every finite value zeroed, every Inf made NaN).
GCOMM_HD float clip_factor(float norm, float max_norm) {
  if (!is_finite(norm)) return 1.0f;
  float f = max_norm / (norm + 1e-6f);
  return f < 1.0f ? f : 1.0f;
}

}  // namespace gradcomm::kernels
