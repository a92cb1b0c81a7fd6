// Host twins: the same functors as the CUDA kernels, run in plain loops. They
// are the reference in tests and what runs on machines without a GPU.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/backend.hpp"
#include "kernels/f16c_blocks.hpp"
#include "kernels/functors.hpp"

namespace gradcomm::kernels::host {

namespace {
// One tensor through an op, on typed pointers the compiler may treat as distinct
// (a tensor's two sides never overlap: the API refuses overlapping unpack
// destinations, and one-sided ops touch one side), so the loop vectorizes.
template <class Op>
bool run_tensor(const Op& op, void* a, void* b, size_t n) {
  typename Op::TA* __restrict__ pa = static_cast<typename Op::TA*>(a);
  typename Op::TB* __restrict__ pb = static_cast<typename Op::TB*>(b);
  unsigned nonfinite = 0;
  for (size_t i = 0; i < n; ++i) nonfinite |= apply_at(op, pa, pb, i) ? 1u : 0u;
  return nonfinite != 0;
}

// An op with its f16 sides as float: the same function once the f16 values are
// converted exactly on the way in and rounded once on the way out, which lets
// the f16 sides move in blocks through kernels/f16c_blocks.hpp (F16C: the
// element-at-a-time conversions made the socket transport's f16 wire slower
// than f32). Same bits: the float op rounds where the f16 op did.
template <class T>
using FloatSide = std::conditional_t<std::is_same_v<T, half_bits>, float, T>;
template <class Op>
struct AsFloat;
template <class T>
struct AsFloat<UnscaleOp<T>> {
  using type = UnscaleOp<FloatSide<T>>;
};
template <class T>
struct AsFloat<CheckOp<T>> {
  using type = CheckOp<FloatSide<T>>;
};
template <class A, class B, class W, bool CHECK>
struct AsFloat<PackOp<A, B, W, CHECK>> {
  using type = PackOp<FloatSide<A>, FloatSide<B>, W, CHECK>;  // the wire's own type still checked
};
template <class A, class B, bool ACC>
struct AsFloat<UnpackOp<A, B, ACC>> {
  using type = UnpackOp<FloatSide<A>, FloatSide<B>, ACC>;
};

// One side of a block: staged through floats when it is f16, else in place.
template <class T, bool READ>
FloatSide<T>* stage_in(void* p, size_t base, size_t m, FloatSide<T>* scratch) {
  T* typed = static_cast<T*>(p) + base;
  if constexpr (!std::is_same_v<T, half_bits>) {
    return typed;
  } else {
    if (READ) f16c::to_float(typed, scratch, m);
    return scratch;
  }
}

template <class T, bool WRITE>
void stage_out(void* p, size_t base, size_t m, const FloatSide<T>* scratch) {
  if constexpr (std::is_same_v<T, half_bits>)
    if (WRITE) f16c::from_float(scratch, static_cast<T*>(p) + base, m);
}

template <class Op>
bool run_tensor_in_blocks(const Op& op, void* a, void* b, size_t n) {
  using TA = typename Op::TA;
  using TB = typename Op::TB;
  constexpr size_t kBlock = 1024;
  typename AsFloat<Op>::type fop{op.s};
  FloatSide<TA> sa[kBlock];
  FloatSide<TB> sb[kBlock];
  unsigned nonfinite = 0;
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    FloatSide<TA>* __restrict__ pa = stage_in<TA, Op::kReadA>(a, base, m, sa);
    FloatSide<TB>* __restrict__ pb = stage_in<TB, Op::kReadB>(b, base, m, sb);
    for (size_t i = 0; i < m; ++i) nonfinite |= apply_at(fop, pa, pb, i) ? 1u : 0u;
    stage_out<TA, Op::kWriteA>(a, base, m, sa);
    stage_out<TB, Op::kWriteB>(b, base, m, sb);
  }
  return nonfinite != 0;
}

template <class Op>
bool run(const Op& op, const Pair* pairs, size_t n, float* per_tensor = nullptr) {
  constexpr bool has_f16 =
      std::is_same_v<typename Op::TA, half_bits> || std::is_same_v<typename Op::TB, half_bits>;
  bool nonfinite = false;
  for (size_t k = 0; k < n; ++k) {
    bool tensor = false;
    if constexpr (has_f16)
      tensor = run_tensor_in_blocks(op, pairs[k].a, pairs[k].b, pairs[k].n);
    else
      tensor = run_tensor(op, pairs[k].a, pairs[k].b, pairs[k].n);
    if (tensor && per_tensor != nullptr) per_tensor[pairs[k].index] = 1.0f;
    nonfinite |= tensor;
  }
  return nonfinite;
}

template <class A, class B>
bool dispatch_pair(const OpSpec& spec, float s, const Pair* pairs, size_t n) {
  switch (spec.kind) {
    case OpKind::kPack:
      if (spec.found_per_tensor != nullptr)
        return run(PackOp<A, B, B, true>{s}, pairs, n, spec.found_per_tensor);
      return run(PackOp<A, B>{s}, pairs, n);
    case OpKind::kUnpack:
      return spec.accumulate ? run(UnpackOp<A, B, true>{s}, pairs, n)
                             : run(UnpackOp<A, B, false>{s}, pairs, n);
    case OpKind::kCheck:
      return std::is_same<A, B>::value ? run(CheckOp<A>{s}, pairs, n) : false;
    default:
      return std::is_same<A, B>::value ? run(UnscaleOp<A>{s}, pairs, n) : false;
  }
}
}  // namespace

void apply(const OpSpec& spec, const Pair* pairs, size_t n) {
  float s = spec.scale;
  if (spec.device_scale != nullptr) s *= *spec.device_scale;
  if (spec.kind == OpKind::kClip) s = clip_factor(*spec.norm, spec.max_norm);
  bool nonfinite = dispatch_dtype(spec.a_dtype, [&](auto a) {
    return dispatch_dtype(spec.b_dtype,
                          [&](auto b) { return dispatch_pair<decltype(a), decltype(b)>(spec, s, pairs, n); });
  });
  // Clip never flags; unscale and unpack flag like PyTorch: set, never cleared.
  if (nonfinite && spec.found_inf != nullptr && spec.kind != OpKind::kClip) *spec.found_inf = 1.0f;
}

void l2_norm(const gcommTensor_t* tensors, size_t n, float* global_norm, float* per_tensor,
             double* sum_of_squares) {
  // Squares summed in double per chunk, chunks summed in order per tensor, and
  // tensors in order: the CUDA kernels' grouping above the chunk (within a chunk
  // each sums in its own fixed order; the two agree to rounding).
  double total = 0.0;
  for (size_t k = 0; k < n; ++k) {
    double tensor_sum = 0.0;
    dispatch_dtype(tensors[k].dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(tensors[k].data);
      for (size_t c = 0; c < chunks_of(tensors[k].count); ++c) {
        // kLanes interleaved partial sums, added in a fixed order: deterministic,
        // and independent enough for the compiler to vectorize (one running sum
        // is a chain of dependent adds).
        constexpr size_t kLanes = 8;
        double lanes[kLanes] = {};
        size_t i = c * kChunkElements;
        const size_t end = std::min(tensors[k].count, (c + 1) * kChunkElements);
        for (; i + kLanes <= end; i += kLanes)
          for (size_t j = 0; j < kLanes; ++j) {
            double v = to_float(x[i + j]);
            lanes[j] += v * v;
          }
        for (size_t j = 0; i < end; ++i, ++j) {
          double v = to_float(x[i]);
          lanes[j] += v * v;
        }
        double chunk = 0.0;
        for (double lane : lanes) chunk += lane;
        tensor_sum += chunk;
      }
    });
    if (per_tensor != nullptr) per_tensor[k] = static_cast<float>(std::sqrt(tensor_sum));
    total += tensor_sum;
  }
  *global_norm = static_cast<float>(std::sqrt(total));
  if (sum_of_squares != nullptr) *sum_of_squares = total;
}

void norm_of_sums(const double* squares, size_t n, float* norm) {
  double total = 0.0;
  for (size_t k = 0; k < n; ++k) total += squares[k];
  *norm = static_cast<float>(std::sqrt(total));
}

void update_scale(ScalerState* state, const ScalerParams& params) {
  kernels::update_scale(*state, params);
}

}  // namespace gradcomm::kernels::host
