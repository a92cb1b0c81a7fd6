// PowerSGD's compute (Vogels et al., NeurIPS 2019), for every matrix of a bucket
// at once: error feedback, the two skinny products, Gram-Schmidt and the fused
// decompress + error update. Each operation has a host twin (double
// accumulation: the reference) and a CUDA path, with the same signature; the
// reducer strings them together around its all-reduces of P and Q.
//
// Layouts (f32, row-major): M is rows x cols (the gradient viewed as first
// dimension x the rest), P is rows x r, Q is cols x r, E (error feedback) like M.
// r is 1..32. On a CUDA target every pointer is device memory of that device and
// the work is enqueued on the target's stream; on the host it runs now.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/element.hpp"
#include "kernels/ops.hpp"

namespace gradcomm::kernels::powersgd {

constexpr int kMaxRank = 32;

struct LowRankMatrix {
  float* m = nullptr;  // the gradient (rows x cols); decompress overwrites it with the approximation
  float* e = nullptr;  // error feedback (rows x cols) or nullptr
  float* p = nullptr;  // rows x r
  float* q = nullptr;  // cols x r
  size_t rows = 0;
  size_t cols = 0;
};

// Throws gcommInvalidArgument naming the matrix and field (NULL buffers, zero
// sizes, sizes that overflow, r outside 1..32).
void validate(const LowRankMatrix* mats, size_t n, int r);

// The standard-normal initial Q of matrix `index` (cols x r), from a counter-based
// hash of (seed, index, element): the same bits on every rank, host or GPU (it is
// always computed on the host and copied). `out` is host memory.
void initial_q(uint64_t seed, uint64_t index, size_t cols, int r, float* out);

// m += e (skipped for matrices without e).
void add_error(const LowRankMatrix* mats, size_t n, const Target& t);
// p = m q.
void multiply_mq(const LowRankMatrix* mats, size_t n, int r, const Target& t);
// Both in one pass over m: m += e (for matrices with e), then p = m q. The same
// bits as add_error followed by multiply_mq, with one read of m fewer.
void add_error_multiply_mq(const LowRankMatrix* mats, size_t n, int r, const Target& t);
// The columns of p, in order, made orthonormal (modified Gram-Schmidt). A column
// whose remaining norm is below eps, or below kDependentColumn times its norm
// before the projections (a column that depends on the earlier ones, up to f32
// rounding: P has rank < r when M does), becomes zero: no division by ~0, no NaN,
// no rounding noise blown up to a unit column. Host and GPU decide alike.
constexpr double kDependentColumn = 1e-4;
GCOMM_HD bool keeps_column(double norm, double norm_before, float eps) {
  return norm > eps && norm > kDependentColumn * norm_before;
}
void orthogonalize(const LowRankMatrix* mats, size_t n, int r, float eps, const Target& t);
// `skip` (may be NULL) is a flag where the target's memory is: when *skip > 0 the
// step saw Inf/NaN and the operations below leave the state (q, e) untouched.
// q = m^T p.
void multiply_mtp(const LowRankMatrix* mats, size_t n, int r, const float* skip, const Target& t);
// Where decompress writes the gradient, so the reducer's epilogue needs no second
// pass over it: m = approx * *out_scale (the scaler's 1/loss scale; NULL: 1), and
// *found_inf = 1 when a value written is Inf or NaN (found_inf may be NULL). Both
// are in the target's memory.
struct DecompressOutput {
  const float* out_scale = nullptr;
  float* found_inf = nullptr;
};
// One pass: approx = scale * p q^T; e = m - approx (when e is set); m = approx * out_scale.
void decompress(const LowRankMatrix* mats, size_t n, int r, float scale, const float* skip, const Target& t,
                const DecompressOutput& out = {});

namespace host {
void add_error(const LowRankMatrix* mats, size_t n);
void multiply_mq(const LowRankMatrix* mats, size_t n, int r);
void add_error_multiply_mq(const LowRankMatrix* mats, size_t n, int r);
void orthogonalize(const LowRankMatrix* mats, size_t n, int r, float eps);
void multiply_mtp(const LowRankMatrix* mats, size_t n, int r, const float* skip);
void decompress(const LowRankMatrix* mats, size_t n, int r, float scale, const float* skip,
                const DecompressOutput& out);
}  // namespace host

namespace cuda {
void add_error(const LowRankMatrix* mats, size_t n, gcommStream_t stream);
void multiply_mq(const LowRankMatrix* mats, size_t n, int r, gcommStream_t stream);
void add_error_multiply_mq(const LowRankMatrix* mats, size_t n, int r, gcommStream_t stream);
void orthogonalize(const LowRankMatrix* mats, size_t n, int r, float eps, gcommStream_t stream);
void multiply_mtp(const LowRankMatrix* mats, size_t n, int r, const float* skip, gcommStream_t stream);
void decompress(const LowRankMatrix* mats, size_t n, int r, float scale, const float* skip,
                const DecompressOutput& out, gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels::powersgd
