// PowerSGD's compute: the host twins against a plain float64 reference on
// random low-rank-plus-noise matrices, exact recovery of a rank-r matrix, no NaN
// from zero columns, the deterministic initial Q; the CUDA paths against the host
// twins (skipped without a GPU).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/ops.hpp"
#include "kernels/powersgd/low_rank.hpp"
#include "support/gpu.hpp"

namespace gradcomm::kernels::powersgd {
namespace {

const Target kHost{gcommHostDevice(), nullptr};

// One matrix with its own host storage.
struct HostMatrix {
  size_t rows, cols;
  int r;
  std::vector<float> m, e, p, q;
  HostMatrix(size_t rows_, size_t cols_, int r_, bool with_error)
      : rows(rows_),
        cols(cols_),
        r(r_),
        m(rows_ * cols_),
        e(with_error ? rows_ * cols_ : 0),
        p(rows_ * r_),
        q(cols_ * r_) {}
  LowRankMatrix view() {
    return LowRankMatrix{m.data(), e.empty() ? nullptr : e.data(), p.data(), q.data(), rows, cols};
  }
};

// A rank-`rank` matrix plus noise of size `noise`.
void low_rank_plus_noise(HostMatrix& a, int rank, float noise, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> u(a.rows * rank), v(a.cols * rank);
  for (auto& x : u) x = g(rng);
  for (auto& x : v) x = g(rng);
  for (size_t i = 0; i < a.rows; ++i)
    for (size_t j = 0; j < a.cols; ++j) {
      double s = 0;
      for (int c = 0; c < rank; ++c) s += static_cast<double>(u[i * rank + c]) * v[j * rank + c];
      a.m[i * a.cols + j] = static_cast<float>(s) + noise * g(rng);
    }
}

// The whole round in float64, written independently of the twins.
std::vector<double> reference_round(const std::vector<float>& m, size_t rows, size_t cols, int r,
                                    const std::vector<float>& q0) {
  std::vector<double> p(rows * r, 0.0), q(cols * r, 0.0), out(rows * cols, 0.0);
  for (size_t i = 0; i < rows; ++i)
    for (int c = 0; c < r; ++c)
      for (size_t j = 0; j < cols; ++j) p[i * r + c] += static_cast<double>(m[i * cols + j]) * q0[j * r + c];
  for (int c = 0; c < r; ++c) {
    double sq = 0;
    for (size_t i = 0; i < rows; ++i) sq += p[i * r + c] * p[i * r + c];
    double norm = std::sqrt(sq);
    for (size_t i = 0; i < rows; ++i) p[i * r + c] = norm > 1e-8 ? p[i * r + c] / norm : 0.0;
    for (int d = c + 1; d < r; ++d) {
      double dot = 0;
      for (size_t i = 0; i < rows; ++i) dot += p[i * r + c] * p[i * r + d];
      for (size_t i = 0; i < rows; ++i) p[i * r + d] -= dot * p[i * r + c];
    }
  }
  for (size_t j = 0; j < cols; ++j)
    for (int c = 0; c < r; ++c)
      for (size_t i = 0; i < rows; ++i) q[j * r + c] += static_cast<double>(m[i * cols + j]) * p[i * r + c];
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j)
      for (int c = 0; c < r; ++c) out[i * cols + j] += p[i * r + c] * q[j * r + c];
  return out;
}

void round_on(LowRankMatrix* mats, size_t n, int r, const Target& t) {
  multiply_mq(mats, n, r, t);
  orthogonalize(mats, n, r, 1e-8f, t);
  multiply_mtp(mats, n, r, nullptr, t);
  decompress(mats, n, r, 1.0f, nullptr, t);
}

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    num += (got[k] - want[k]) * (got[k] - want[k]);
    den += want[k] * want[k];
  }
  return std::sqrt(num / (den + 1e-300));
}

TEST(PowerSgdHost, OneRoundMatchesTheFloat64Reference) {
  std::mt19937 rng(1);
  for (auto [rows, cols, r] : {std::tuple<size_t, size_t, int>{17, 33, 1},
                               {64, 100, 4},
                               {1000, 3, 2},
                               {3, 1000, 3},
                               {128, 96, 32},
                               {1, 7, 1}}) {
    HostMatrix a(rows, cols, r, false);
    low_rank_plus_noise(a, 2, 0.1f, rng);
    initial_q(7, 0, cols, r, a.q.data());
    std::vector<float> m0 = a.m, q0 = a.q;
    LowRankMatrix v = a.view();
    round_on(&v, 1, r, kHost);
    std::vector<double> want = reference_round(m0, rows, cols, r, q0);
    EXPECT_LT(rel_error(a.m, want), 1e-5) << rows << "x" << cols << " r=" << r;
  }
}

TEST(PowerSgdHost, RecoversARankRMatrixExactly) {
  std::mt19937 rng(2);
  for (int r : {1, 2, 4, 8}) {
    HostMatrix a(200, 150, r, true);
    low_rank_plus_noise(a, r, 0.0f, rng);
    std::vector<float> m0 = a.m;
    initial_q(11, 3, a.cols, r, a.q.data());
    LowRankMatrix v = a.view();
    round_on(&v, 1, r, kHost);
    std::vector<double> want(m0.begin(), m0.end());
    EXPECT_LT(rel_error(a.m, want), 1e-4) << "r=" << r;
    // The error feedback holds what was not sent: here, almost nothing.
    double e2 = 0, m2 = 0;
    for (size_t k = 0; k < m0.size(); ++k) e2 += a.e[k] * a.e[k], m2 += m0[k] * m0[k];
    EXPECT_LT(std::sqrt(e2 / m2), 1e-4);
  }
}

TEST(PowerSgdHost, ZeroMatricesAndZeroColumnsGiveNoNaN) {
  HostMatrix a(50, 40, 4, true);  // all zeros
  initial_q(1, 0, a.cols, 4, a.q.data());
  LowRankMatrix v = a.view();
  round_on(&v, 1, 4, kHost);
  for (float x : a.m) ASSERT_EQ(x, 0.0f);
  for (float x : a.p) ASSERT_FALSE(std::isnan(x));
  // A rank-1 matrix with r = 4: columns 2..4 of P vanish after Gram-Schmidt.
  std::mt19937 rng(3);
  HostMatrix b(60, 30, 4, false);
  low_rank_plus_noise(b, 1, 0.0f, rng);
  initial_q(1, 1, b.cols, 4, b.q.data());
  LowRankMatrix w = b.view();
  round_on(&w, 1, 4, kHost);
  for (float x : b.p) ASSERT_TRUE(std::isfinite(x));
  for (float x : b.m) ASSERT_TRUE(std::isfinite(x));
}

TEST(PowerSgdHost, RankAboveTheMatrixRankKeepsOnlyRealColumns) {
  // A 55 x 4 matrix with r = 16: P has rank 4; columns 5..16 must become zero,
  // not normalized rounding noise, and the result is the exact matrix.
  std::mt19937 rng(12);
  HostMatrix a(55, 4, 16, false);
  low_rank_plus_noise(a, 4, 0.0f, rng);
  std::vector<float> m0 = a.m;
  initial_q(5, 0, a.cols, 16, a.q.data());
  LowRankMatrix v = a.view();
  round_on(&v, 1, 16, kHost);
  EXPECT_LT(rel_error(a.m, std::vector<double>(m0.begin(), m0.end())), 1e-4);
  for (size_t i = 0; i < a.rows; ++i)
    for (int c = 4; c < 16; ++c) ASSERT_EQ(a.p[i * 16 + c], 0.0f) << "row " << i << " column " << c;
}

TEST(PowerSgdHost, InitialQIsDeterministicAndStandardNormal) {
  std::vector<float> a(4000), b(4000), c(4000), d(4000);
  initial_q(42, 5, 1000, 4, a.data());
  initial_q(42, 5, 1000, 4, b.data());
  initial_q(43, 5, 1000, 4, c.data());
  initial_q(42, 6, 1000, 4, d.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  double mean = 0, var = 0;
  for (float x : a) mean += x;
  mean /= a.size();
  for (float x : a) var += (x - mean) * (x - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0.0, 0.08);
  EXPECT_NEAR(var, 1.0, 0.1);
}

TEST(PowerSgdHost, ErrorFeedbackTelescopes) {
  // Over many steps the sum of what was sent tracks the sum of the true
  // gradients: their difference is exactly the final error buffer.
  std::mt19937 rng(4);
  HostMatrix a(40, 30, 2, true);
  std::vector<double> true_sum(a.m.size(), 0.0), sent_sum(a.m.size(), 0.0);
  initial_q(9, 0, a.cols, 2, a.q.data());
  for (int step = 0; step < 50; ++step) {
    low_rank_plus_noise(a, 3, 0.5f, rng);
    for (size_t k = 0; k < a.m.size(); ++k) true_sum[k] += a.m[k];
    LowRankMatrix v = a.view();
    add_error(&v, 1, kHost);
    round_on(&v, 1, 2, kHost);  // q warm-starts from the last step's
    for (size_t k = 0; k < a.m.size(); ++k) sent_sum[k] += a.m[k];
  }
  for (size_t k = 0; k < a.m.size(); ++k) ASSERT_NEAR(true_sum[k] - sent_sum[k], a.e[k], 1e-3) << k;
}

TEST(PowerSgdHost, ASkipFlagKeepsQAndE) {
  std::mt19937 rng(6);
  HostMatrix a(30, 20, 2, true);
  low_rank_plus_noise(a, 2, 0.2f, rng);
  for (auto& x : a.e) x = 0.5f;
  initial_q(1, 0, a.cols, 2, a.q.data());
  std::vector<float> q0 = a.q, e0 = a.e;
  const float skip = 1.0f;
  LowRankMatrix v = a.view();
  multiply_mq(&v, 1, 2, kHost);
  orthogonalize(&v, 1, 2, 1e-8f, kHost);
  multiply_mtp(&v, 1, 2, &skip, kHost);
  decompress(&v, 1, 2, 1.0f, &skip, kHost);
  EXPECT_EQ(a.q, q0);
  EXPECT_EQ(a.e, e0);
}

// The reducer's epilogue, fused: m = approx * out_scale with Inf/NaN flagged, and e
// still computed from the unscaled approximation: the same bits as decompress
// followed by a separate multiply.
TEST(PowerSgdHost, DecompressScalesItsOutputAndFlagsInfWithoutChangingTheError) {
  std::mt19937 rng(11);
  HostMatrix a(37, 23, 3, true);
  low_rank_plus_noise(a, 2, 0.2f, rng);
  for (auto& x : a.e) x = 0.125f * static_cast<float>(static_cast<int>(rng() % 16) - 8);
  initial_q(4, 0, a.cols, 3, a.q.data());
  LowRankMatrix v = a.view();
  multiply_mq(&v, 1, 3, kHost);
  orthogonalize(&v, 1, 3, 1e-8f, kHost);
  multiply_mtp(&v, 1, 3, nullptr, kHost);
  HostMatrix plain = a;
  LowRankMatrix pv = plain.view();
  decompress(&pv, 1, 3, 0.5f, nullptr, kHost);
  const float out_scale = 1.0f / 1024.0f;
  float found_inf = 0.0f;
  decompress(&v, 1, 3, 0.5f, nullptr, kHost, DecompressOutput{&out_scale, &found_inf});
  EXPECT_EQ(a.e, plain.e);
  for (size_t k = 0; k < a.m.size(); ++k) ASSERT_EQ(a.m[k], plain.m[k] * out_scale) << k;
  EXPECT_EQ(found_inf, 0.0f);
  // A NaN in P reaches the output: flagged.
  a.p[5] = std::nanf("");
  decompress(&v, 1, 3, 0.5f, nullptr, kHost, DecompressOutput{&out_scale, &found_inf});
  EXPECT_EQ(found_inf, 1.0f);
}

TEST(PowerSgdHost, FusedErrorFeedbackIsAddErrorThenMultiply) {
  std::mt19937 rng(15);
  HostMatrix a(41, 29, 3, true);
  low_rank_plus_noise(a, 2, 0.2f, rng);
  for (auto& x : a.e) x = std::normal_distribution<float>(0.0f, 0.1f)(rng);
  initial_q(5, 0, a.cols, 3, a.q.data());
  HostMatrix b = a;
  LowRankMatrix va = a.view(), vb = b.view();
  add_error_multiply_mq(&va, 1, 3, kHost);
  add_error(&vb, 1, kHost);
  multiply_mq(&vb, 1, 3, kHost);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.p, b.p);
  va.rows = 0;
  EXPECT_THROW(add_error_multiply_mq(&va, 1, 3, kHost), Error);
}

TEST(PowerSgdHost, BadArgumentsAreRefused) {
  HostMatrix a(4, 4, 2, false);
  LowRankMatrix v = a.view();
  EXPECT_THROW(multiply_mq(&v, 1, 0, kHost), Error);
  EXPECT_THROW(multiply_mq(&v, 1, 33, kHost), Error);
  v.p = nullptr;
  EXPECT_THROW(multiply_mq(&v, 1, 2, kHost), Error);
  v = a.view();
  v.rows = 0;
  EXPECT_THROW(decompress(&v, 1, 2, 1.0f, nullptr, kHost), Error);
  EXPECT_THROW(orthogonalize(nullptr, 2, 2, 1e-8f, kHost), Error);
  v = a.view();
  EXPECT_THROW(orthogonalize(&v, 1, 2, -1.0f, kHost), Error);
}

// ---- GPU against the host twins ---------------------------------------------------

struct DeviceBuf {
  float* p = nullptr;
  explicit DeviceBuf(const std::vector<float>& h) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(h.size(), 1) * 4), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuf() { cudaFree(p); }
  std::vector<float> get(size_t n) const {
    std::vector<float> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// GPU cases: skip without a GPU, else run on device 0.
class PowerSgdGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    GCOMM_SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  const Target gpu{gcommCudaDevice(0), nullptr};
};

TEST_F(PowerSgdGpu, EveryOperationMatchesTheHostTwin) {
  std::mt19937 rng(5);
  for (int r : {1, 3, 4, 7, 16, 32}) {
    // A bucket of mixed shapes, more than one launch's worth (64) for r = 4.
    std::vector<HostMatrix> hs;
    size_t count = r == 4 ? 70 : 5;
    for (size_t k = 0; k < count; ++k) {
      size_t rows = 1 + rng() % 300, cols = 1 + rng() % 200;
      if (k == 0) rows = 2048, cols = 33;
      hs.emplace_back(rows, cols, r, true);
      low_rank_plus_noise(hs.back(), 3, 0.3f, rng);
      for (auto& x : hs.back().e) x = 0.01f * static_cast<float>(static_cast<int>(rng() % 200) - 100);
      initial_q(13, k, cols, r, hs.back().q.data());
    }
    std::vector<std::unique_ptr<DeviceBuf>> bufs;
    std::vector<LowRankMatrix> dv, hv;
    for (auto& h : hs) {
      bufs.push_back(std::make_unique<DeviceBuf>(h.m));
      bufs.push_back(std::make_unique<DeviceBuf>(h.e));
      bufs.push_back(std::make_unique<DeviceBuf>(h.p));
      bufs.push_back(std::make_unique<DeviceBuf>(h.q));
      size_t b = bufs.size();
      dv.push_back(
          LowRankMatrix{bufs[b - 4]->p, bufs[b - 3]->p, bufs[b - 2]->p, bufs[b - 1]->p, h.rows, h.cols});
      hv.push_back(h.view());
    }
    add_error(hv.data(), count, kHost);
    add_error(dv.data(), count, gpu);
    round_on(hv.data(), count, r, kHost);
    round_on(dv.data(), count, r, gpu);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (size_t k = 0; k < count; ++k) {
      const HostMatrix& h = hs[k];
      std::vector<float> m = bufs[4 * k]->get(h.m.size()), e = bufs[4 * k + 1]->get(h.e.size());
      std::vector<double> want_m(h.m.begin(), h.m.end()), want_e(h.e.begin(), h.e.end());
      EXPECT_LT(rel_error(m, want_m), 2e-4) << "r=" << r << " matrix " << k << " " << h.rows << "x" << h.cols;
      // e = m_in - approx can be rounding noise (r at or above the matrix's rank):
      // measure its difference on the scale of the values, not of e itself.
      double diff = 0, scale = 0;
      for (size_t j = 0; j < e.size(); ++j) {
        diff += (e[j] - want_e[j]) * (e[j] - want_e[j]);
        scale += want_e[j] * want_e[j] + want_m[j] * want_m[j];
      }
      EXPECT_LT(std::sqrt(diff / (scale + 1e-30)), 2e-4) << "r=" << r << " matrix " << k;
      for (float x : m) ASSERT_TRUE(std::isfinite(x));
    }
  }
}

TEST_F(PowerSgdGpu, DecompressOutputScaleAndFlagMatchTheHost) {
  std::mt19937 rng(12);
  HostMatrix h(513, 67, 4, true);
  low_rank_plus_noise(h, 3, 0.2f, rng);
  for (auto& x : h.p) x = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  for (auto& x : h.q) x = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  const float out_scale = 1.0f / 256.0f;
  for (bool with_nan : {false, true}) {
    if (with_nan) h.p[4 * 300 + 2] = std::nanf("");
    HostMatrix want = h;
    LowRankMatrix hv = want.view();
    float host_flag = 0.0f;
    decompress(&hv, 1, 4, 0.5f, nullptr, kHost, DecompressOutput{&out_scale, &host_flag});
    DeviceBuf m(h.m), e(h.e), p(h.p), q(h.q), scalars(std::vector<float>{out_scale, 0.0f});
    LowRankMatrix dv{m.p, e.p, p.p, q.p, h.rows, h.cols};
    decompress(&dv, 1, 4, 0.5f, nullptr, gpu, DecompressOutput{scalars.p, scalars.p + 1});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(scalars.get(2)[1], host_flag) << "with_nan " << with_nan;
    EXPECT_EQ(host_flag, with_nan ? 1.0f : 0.0f);
    std::vector<float> got = m.get(h.m.size());
    for (size_t k = 0; k < got.size(); ++k) {
      if (std::isnan(want.m[k])) {
        ASSERT_TRUE(std::isnan(got[k])) << k;
        continue;
      }
      // f32 on both; the GPU fuses products into FMAs: equal up to rounding.
      ASSERT_NEAR(got[k], want.m[k], 1e-5f * (1.0f + std::fabs(want.m[k]))) << k;
    }
  }
}

// Error feedback fused into P = M Q computes the same floats as the two passes.
TEST_F(PowerSgdGpu, FusedErrorFeedbackMatchesTheTwoPassesBitForBit) {
  std::mt19937 rng(14);
  for (int r : {1, 4, 13}) {
    std::vector<HostMatrix> hs;
    for (size_t k = 0; k < 3; ++k) {
      hs.emplace_back(1 + rng() % 700, 1 + rng() % 300, r, k != 1);  // matrix 1 without error feedback
      low_rank_plus_noise(hs.back(), 2, 0.3f, rng);
      for (auto& x : hs.back().e) x = std::normal_distribution<float>(0.0f, 0.1f)(rng);
      initial_q(21, k, hs.back().cols, r, hs.back().q.data());
    }
    std::vector<std::unique_ptr<DeviceBuf>> bufs;
    std::vector<LowRankMatrix> fused, split;
    for (auto& h : hs)
      for (auto* out : {&fused, &split}) {
        for (auto* v : {&h.m, &h.e, &h.p, &h.q}) bufs.push_back(std::make_unique<DeviceBuf>(*v));
        size_t b = bufs.size();
        out->push_back(LowRankMatrix{bufs[b - 4]->p, h.e.empty() ? nullptr : bufs[b - 3]->p, bufs[b - 2]->p,
                                     bufs[b - 1]->p, h.rows, h.cols});
      }
    add_error_multiply_mq(fused.data(), fused.size(), r, gpu);
    add_error(split.data(), split.size(), gpu);
    multiply_mq(split.data(), split.size(), r, gpu);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (size_t k = 0; k < hs.size(); ++k) {
      const size_t f = 8 * k, s = 8 * k + 4;  // fused then split buffers of matrix k
      EXPECT_EQ(bufs[f]->get(hs[k].m.size()), bufs[s]->get(hs[k].m.size()))
          << "m, r=" << r << " matrix " << k;
      EXPECT_EQ(bufs[f + 2]->get(hs[k].p.size()), bufs[s + 2]->get(hs[k].p.size()))
          << "p, r=" << r << " matrix " << k;
    }
  }
}

// A matrix alone in its launch, as a bucket of one gives it: P = MQ with a block
// per row (wide rows take several rounds of loads), Q = MtP with its rows split
// over a cluster (tall matrices, sm_90), each against the host twin and the same
// bits when run again.
TEST_F(PowerSgdGpu, EachProductOfAMatrixAloneMatchesTheHostTwinAndRepeatsBitForBit) {
  std::mt19937 rng(31);
  const std::vector<std::pair<size_t, size_t>> shapes = {
      {4100, 70}, {700, 40}, {3, 5000}, {1, 1}, {65, 2100}};
  for (int r : {1, 4, 13}) {
    for (auto [rows, cols] : shapes) {
      HostMatrix h(rows, cols, r, false);
      low_rank_plus_noise(h, 2, 0.3f, rng);
      initial_q(17, rows, cols, r, h.q.data());
      DeviceBuf m(h.m), p(h.p), q(h.q);
      LowRankMatrix dv{m.p, nullptr, p.p, q.p, rows, cols};
      LowRankMatrix hv = h.view();
      multiply_mq(&hv, 1, r, kHost);
      multiply_mq(&dv, 1, r, gpu);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> first_p = p.get(h.p.size());
      EXPECT_LT(rel_error(first_p, std::vector<double>(h.p.begin(), h.p.end())), 1e-5)
          << "P, r=" << r << " " << rows << "x" << cols;
      multiply_mq(&dv, 1, r, gpu);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(p.get(h.p.size()), first_p) << "P again, r=" << r << " " << rows << "x" << cols;
      // Q = MtP from the host's P on both sides.
      ASSERT_EQ(cudaMemcpy(p.p, h.p.data(), h.p.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      multiply_mtp(&hv, 1, r, nullptr, kHost);
      multiply_mtp(&dv, 1, r, nullptr, gpu);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> first_q = q.get(h.q.size());
      EXPECT_LT(rel_error(first_q, std::vector<double>(h.q.begin(), h.q.end())), 1e-5)
          << "Q, r=" << r << " " << rows << "x" << cols;
      multiply_mtp(&dv, 1, r, nullptr, gpu);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(q.get(h.q.size()), first_q) << "Q again, r=" << r << " " << rows << "x" << cols;
    }
  }
}

TEST_F(PowerSgdGpu, ZeroMatrixGivesNoNaN) {
  HostMatrix h(300, 20, 8, false);
  initial_q(3, 0, h.cols, 8, h.q.data());
  DeviceBuf m(h.m), p(h.p), q(h.q);
  LowRankMatrix v{m.p, nullptr, p.p, q.p, h.rows, h.cols};
  round_on(&v, 1, 8, gpu);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (float x : m.get(h.m.size())) ASSERT_EQ(x, 0.0f);
  for (float x : p.get(h.p.size())) ASSERT_FALSE(std::isnan(x));
}

TEST_F(PowerSgdGpu, ADeviceSkipFlagKeepsQAndE) {
  std::mt19937 rng(8);
  HostMatrix h(100, 50, 4, true);
  low_rank_plus_noise(h, 2, 0.2f, rng);
  for (auto& x : h.e) x = 0.25f;
  initial_q(2, 0, h.cols, 4, h.q.data());
  DeviceBuf m(h.m), e(h.e), p(h.p), q(h.q), flag(std::vector<float>{1.0f}), q_next(h.q);
  LowRankMatrix v{m.p, e.p, p.p, q.p, h.rows, h.cols};
  multiply_mq(&v, 1, 4, gpu);
  orthogonalize(&v, 1, 4, 1e-8f, gpu);
  multiply_mtp(&v, 1, 4, flag.p, gpu);
  decompress(&v, 1, 4, 1.0f, flag.p, gpu);
  kernels::copy_unless_flagged(q.p, q_next.p, h.q.size(), flag.p, gpu);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(q.get(h.q.size()), h.q);
  EXPECT_EQ(e.get(h.e.size()), h.e);
}

}  // namespace
}  // namespace gradcomm::kernels::powersgd
