// The host twins of the low-rank math (low_rank.hpp): what host ranks run.
// The long sums (P = MQ over a row, Q = MᵀP down a column) run in float over
// blocks of kBlock terms, each block's sum added into double: loops the compiler
// vectorizes when the rank is a compile-time constant (1, 2, 4, 8, 16; others run
// the same code with the rank at run time), with an error close to a double sum's.
// The all-double loops they replace ran P = MQ at ~2 GFLOP/s on the 2-core VM:
// PowerSGD's compute, not its wire, was most of a host rank's step.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/element.hpp"
#include "kernels/powersgd/low_rank.hpp"

namespace gradcomm::kernels::powersgd::host {

namespace {

constexpr size_t kBlock = 256;

// fn(std::integral_constant<int, R>) with R = r for the ranks compiled for, else R = 0.
template <class Fn>
void with_rank(int r, Fn&& fn) {
  switch (r) {
    case 1:
      return fn(std::integral_constant<int, 1>{});
    case 2:
      return fn(std::integral_constant<int, 2>{});
    case 4:
      return fn(std::integral_constant<int, 4>{});
    case 8:
      return fn(std::integral_constant<int, 8>{});
    case 16:
      return fn(std::integral_constant<int, 16>{});
    default:
      return fn(std::integral_constant<int, 0>{});
  }
}

// p[i, :] = m[i, :] q for every row. U sets of accumulators side by side: a
// float sum's latency hides behind the others when the rank is small.
template <int R>
void mq_matrix(const LowRankMatrix& a, int r) {
  constexpr int W = R > 0 ? R : kMaxRank;
  constexpr int U = R == 1 ? 8 : R == 2 ? 4 : R == 4 ? 2 : 1;
  const int rr = R > 0 ? R : r;
  for (size_t i = 0; i < a.rows; ++i) {
    const float* row = a.m + i * a.cols;
    double total[W] = {};
    for (size_t j0 = 0; j0 < a.cols; j0 += kBlock) {
      const size_t j1 = std::min(a.cols, j0 + kBlock);
      float acc[U][W] = {};
      size_t j = j0;
      for (; j + U <= j1; j += U)
        for (int u = 0; u < U; ++u) {
          const float v = row[j + u];
          const float* q = a.q + (j + u) * rr;
          for (int c = 0; c < rr; ++c) acc[u][c] += v * q[c];
        }
      for (; j < j1; ++j) {
        const float v = row[j];
        const float* q = a.q + j * rr;
        for (int c = 0; c < rr; ++c) acc[0][c] += v * q[c];
      }
      for (int u = 0; u < U; ++u)
        for (int c = 0; c < rr; ++c) total[c] += acc[u][c];
    }
    for (int c = 0; c < rr; ++c) a.p[i * rr + c] = static_cast<float>(total[c]);
  }
}

// q = mᵀ p: every row adds row[j] * p[i, :] into column j's r sums (float over
// kBlock rows at a time, then into double).
template <int R>
void mtp_matrix(const LowRankMatrix& a, int r, std::vector<float>& acc, std::vector<double>& total) {
  constexpr int W = R > 0 ? R : kMaxRank;
  const int rr = R > 0 ? R : r;
  const size_t n = a.cols * static_cast<size_t>(rr);
  total.assign(n, 0.0);
  acc.resize(n);
  for (size_t i0 = 0; i0 < a.rows; i0 += kBlock) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (size_t i = i0; i < std::min(a.rows, i0 + kBlock); ++i) {
      const float* row = a.m + i * a.cols;
      float p[W];
      for (int c = 0; c < rr; ++c) p[c] = a.p[i * rr + c];
      float* out = acc.data();
      for (size_t j = 0; j < a.cols; ++j)
        for (int c = 0; c < rr; ++c) out[j * rr + c] += row[j] * p[c];
    }
    for (size_t e = 0; e < n; ++e) total[e] += acc[e];
  }
  for (size_t e = 0; e < n; ++e) a.q[e] = static_cast<float>(total[e]);
}

// approx = scale * p qᵀ (r terms: float); e = m - approx; m = approx * out_scale.
template <int R>
bool decompress_matrix(const LowRankMatrix& a, int r, float scale, bool write_e, float out_scale) {
  constexpr int W = R > 0 ? R : kMaxRank;
  const int rr = R > 0 ? R : r;
  bool nonfinite = false;
  for (size_t i = 0; i < a.rows; ++i) {
    float p[W];
    for (int c = 0; c < rr; ++c) p[c] = a.p[i * rr + c];
    float* m = a.m + i * a.cols;
    float* e = write_e ? a.e + i * a.cols : nullptr;
    for (size_t j = 0; j < a.cols; ++j) {
      const float* q = a.q + j * rr;
      float s = 0.0f;
      for (int c = 0; c < rr; ++c) s += p[c] * q[c];
      const float approx = s * scale;
      if (e != nullptr) e[j] = m[j] - approx;
      const float v = approx * out_scale;
      m[j] = v;
      nonfinite |= !is_finite(v);
    }
  }
  return nonfinite;
}

double column_dot(const LowRankMatrix& a, int r, int c, int d) {
  double s = 0.0;
  for (size_t i = 0; i < a.rows; ++i) s += static_cast<double>(a.p[i * r + c]) * a.p[i * r + d];
  return s;
}

}  // namespace

void add_error(const LowRankMatrix* mats, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    const LowRankMatrix& a = mats[k];
    if (a.e == nullptr) continue;
    for (size_t i = 0; i < a.rows * a.cols; ++i) a.m[i] += a.e[i];
  }
}

void multiply_mq(const LowRankMatrix* mats, size_t n, int r) {
  with_rank(r, [&](auto rank) {
    for (size_t k = 0; k < n; ++k) mq_matrix<decltype(rank)::value>(mats[k], r);
  });
}

// The host twin keeps the two passes: the result is the same by definition.
void add_error_multiply_mq(const LowRankMatrix* mats, size_t n, int r) {
  add_error(mats, n);
  multiply_mq(mats, n, r);
}

void orthogonalize(const LowRankMatrix* mats, size_t n, int r, float eps) {
  for (size_t k = 0; k < n; ++k) {
    const LowRankMatrix& a = mats[k];
    double before[kMaxRank];
    for (int c = 0; c < r; ++c) before[c] = std::sqrt(column_dot(a, r, c, c));
    for (int c = 0; c < r; ++c) {
      double norm = std::sqrt(column_dot(a, r, c, c));
      float inv = keeps_column(norm, before[c], eps) ? static_cast<float>(1.0 / norm) : 0.0f;
      for (size_t i = 0; i < a.rows; ++i) a.p[i * r + c] *= inv;
      for (int d = c + 1; d < r; ++d) {
        float f = static_cast<float>(column_dot(a, r, c, d));
        for (size_t i = 0; i < a.rows; ++i) a.p[i * r + d] -= f * a.p[i * r + c];
      }
    }
  }
}

void multiply_mtp(const LowRankMatrix* mats, size_t n, int r, const float* skip) {
  if (skip != nullptr && *skip > 0.0f) return;
  std::vector<float> acc;
  std::vector<double> total;
  with_rank(r, [&](auto rank) {
    for (size_t k = 0; k < n; ++k) mtp_matrix<decltype(rank)::value>(mats[k], r, acc, total);
  });
}

void decompress(const LowRankMatrix* mats, size_t n, int r, float scale, const float* skip,
                const DecompressOutput& out) {
  const bool keep_state = skip != nullptr && *skip > 0.0f;
  const float out_scale = out.out_scale != nullptr ? *out.out_scale : 1.0f;
  bool nonfinite = false;
  with_rank(r, [&](auto rank) {
    for (size_t k = 0; k < n; ++k)
      nonfinite |= decompress_matrix<decltype(rank)::value>(mats[k], r, scale,
                                                            mats[k].e != nullptr && !keep_state, out_scale);
  });
  if (nonfinite && out.found_inf != nullptr) *out.found_inf = 1.0f;
}

}  // namespace gradcomm::kernels::powersgd::host
