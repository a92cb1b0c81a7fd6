// Host twins of the PowerSGD kernels: the reference in tests and what runs on
// machines without a GPU. Products accumulate in double and round once, so they
// are the exact result to within one f32 rounding; the CUDA kernels accumulate
// in f32 (orthogonalization's Gram matrix in double on both), see the tolerance
// notes in tests/kernels/powersgd_gpu_test.cpp. The seeded Q is bit-identical.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/powersgd/powersgd.hpp"
#include "kernels/powersgd/powersgd_math.hpp"

namespace gradcomm::kernels::powersgd::host {

namespace {
const float* state_of(const Matrix& m) { return m.q_state != nullptr ? m.q_state : m.q; }
}  // namespace

void init_q(const Matrix* ms, size_t n, int r, uint64_t seed) {
  for (size_t k = 0; k < n; ++k) {
    float* q = const_cast<float*>(state_of(ms[k]));
    size_t count = ms[k].cols * static_cast<size_t>(r);
    for (size_t e = 0; e < count; ++e) q[e] = normal_at(seed, ms[k].key, e);
  }
}

void multiply_p(const Matrix* ms, size_t n, int r, float* found_nonfinite) {
  bool nonfinite = false;
  double acc[kMaxRank];
  for (size_t k = 0; k < n; ++k) {
    const Matrix& m = ms[k];
    const float* q = state_of(m);
    for (size_t i = 0; i < m.rows; ++i) {
      float* row = m.grad + i * m.cols;
      std::fill(acc, acc + r, 0.0);
      for (size_t j = 0; j < m.cols; ++j) {
        float v = row[j];
        if (m.error != nullptr) {
          v += m.error[i * m.cols + j];
          row[j] = v;
        }
        nonfinite |= !is_finite(v);
        const float* qj = q + j * r;
        for (int c = 0; c < r; ++c) acc[c] += static_cast<double>(v) * qj[c];
      }
      for (int c = 0; c < r; ++c) m.p[i * r + c] = static_cast<float>(acc[c]);
    }
  }
  if (nonfinite && found_nonfinite != nullptr) *found_nonfinite = 1.0f;
}

void orthogonalize(const Panel* panels, size_t n, int r, double eps) {
  double G[kMaxRank * kMaxRank], T[kMaxRank * kMaxRank], W[kMaxRank * kMaxRank], row[kMaxRank];
  for (size_t k = 0; k < n; ++k) {
    const Panel& pn = panels[k];
    std::fill(G, G + r * r, 0.0);
    for (size_t i = 0; i < pn.rows; ++i) {
      const float* x = pn.data + i * r;
      for (int a = 0; a < r; ++a)
        for (int b = a; b < r; ++b) G[a * r + b] += static_cast<double>(x[a]) * x[b];
    }
    for (int a = 0; a < r; ++a)
      for (int b = 0; b < a; ++b) G[a * r + b] = G[b * r + a];
    factor_gram(G, r, static_cast<size_t>(r), eps, T, W);
    for (size_t i = 0; i < pn.rows; ++i) {
      float* x = pn.data + i * r;
      for (int c = 0; c < r; ++c) {
        double s = 0.0;
        for (int a = 0; a <= c; ++a) s += static_cast<double>(x[a]) * T[a * r + c];
        row[c] = s;
      }
      for (int c = 0; c < r; ++c) x[c] = static_cast<float>(row[c]);
    }
  }
}

void multiply_q(const Matrix* ms, size_t n, int r) {
  // Q's rows are summed over M's rows: a double scratch of m x r keeps the
  // passes over M row by row (cache order). Grown once, reused after.
  static thread_local std::vector<double> acc;
  for (size_t k = 0; k < n; ++k) {
    const Matrix& m = ms[k];
    acc.assign(m.cols * r, 0.0);
    for (size_t i = 0; i < m.rows; ++i) {
      const float* row = m.grad + i * m.cols;
      const float* p = m.p + i * r;
      for (size_t j = 0; j < m.cols; ++j) {
        double v = row[j];
        double* aj = acc.data() + j * r;
        for (int c = 0; c < r; ++c) aj[c] += v * p[c];
      }
    }
    for (size_t e = 0; e < m.cols * r; ++e) m.q[e] = static_cast<float>(acc[e]);
  }
}

void decompress(const Matrix* ms, size_t n, int r, float scale, const float* skip) {
  const bool commit = skip == nullptr || *skip == 0.0f;
  for (size_t k = 0; k < n; ++k) {
    const Matrix& m = ms[k];
    for (size_t i = 0; i < m.rows; ++i) {
      const float* p = m.p + i * r;
      for (size_t j = 0; j < m.cols; ++j) {
        const float* q = m.q + j * r;
        double dot = 0.0;
        for (int c = 0; c < r; ++c) dot += static_cast<double>(p[c]) * q[c];
        float approx = static_cast<float>(dot * scale);
        size_t idx = i * m.cols + j;
        float old = m.grad[idx];
        m.grad[idx] = approx;
        if (m.error != nullptr && commit) m.error[idx] = old - approx;
      }
    }
    if (commit && m.q_state != nullptr) std::copy(m.q, m.q + m.cols * r, m.q_state);
  }
}

}  // namespace gradcomm::kernels::powersgd::host
