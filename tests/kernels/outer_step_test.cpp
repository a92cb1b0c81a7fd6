// The outer step's kernels (kernels/outer/): known values of the Nesterov and
// heavy-ball rules and the mix, the host twin against an element-by-element
// reference on random values (odd sizes, Inf/NaN passed through), the rule's
// checks, and the CUDA kernels against the host twin, bit for bit.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "kernels/outer/outer_step.hpp"
#include "support/gpu.hpp"

namespace gradcomm::kernels::outer {
namespace {

const Target kHost{gcommHostDevice(), nullptr};

std::vector<float> randoms(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}

TEST(OuterStep, KnownValuesOfEachRule) {
  float outer = 2.0f, m = 0.0f, param = 5.0f;
  const float delta = 1.0f;
  OuterRule rule;
  rule.lr = 0.5f;
  rule.momentum = 0.5f;
  outer_update(&outer, &m, &delta, &param, 1, rule, kHost);
  EXPECT_EQ(m, 1.0f);       // 0.5 * 0 + 1
  EXPECT_EQ(outer, 1.25f);  // 2 - 0.5 * (1 + 0.5 * 1)
  EXPECT_EQ(param, 1.25f);  // replaced by the outer parameters
  rule.nesterov = false;
  outer_update(&outer, &m, &delta, &param, 1, rule, kHost);
  EXPECT_EQ(m, 1.5f);      // 0.5 * 1 + 1
  EXPECT_EQ(outer, 0.5f);  // 1.25 - 0.5 * 1.5
  rule.mix = 0.25f;
  param = 4.5f;
  outer_update(&outer, &m, &delta, &param, 1, rule, kHost);
  EXPECT_EQ(m, 1.75f);
  EXPECT_EQ(outer, -0.375f);                         // 0.5 - 0.5 * 1.75
  EXPECT_EQ(param, 0.25f * 4.5f + 0.75f * -0.375f);  // 1.125 - 0.28125
  float d = 0.0f;
  pseudo_gradient(&outer, &param, &d, 1, kHost);
  EXPECT_EQ(d, outer - param);
}

// The rule written out element by element, in the order outer_step.hpp states.
void reference(std::vector<float>& outer, std::vector<float>& m, const std::vector<float>& delta,
               std::vector<float>& param, const OuterRule& r) {
  for (size_t i = 0; i < outer.size(); ++i) {
    volatile float mm = r.momentum * m[i];
    m[i] = mm + delta[i];
    volatile float look = r.momentum * m[i];
    const float step = r.nesterov ? delta[i] + look : m[i];
    volatile float moved = r.lr * step;
    outer[i] = outer[i] - moved;
    if (r.mix == 0.0f) {
      param[i] = outer[i];
    } else {
      volatile float kept = r.mix * param[i];
      volatile float taken = (1.0f - r.mix) * outer[i];
      param[i] = kept + taken;
    }
  }
}

TEST(OuterStep, TheHostTwinIsTheRuleElementByElement) {
  for (size_t n : {0u, 1u, 7u, 1000u, 4099u})
    for (float mix : {0.0f, 0.5f})
      for (bool nesterov : {true, false}) {
        OuterRule rule;
        rule.lr = 0.7f;
        rule.momentum = 0.9f;
        rule.nesterov = nesterov;
        rule.mix = mix;
        std::vector<float> outer = randoms(n, 1), m = randoms(n, 2), param = randoms(n, 3), delta(n);
        if (n > 5) {
          outer[3] = std::numeric_limits<float>::infinity();
          param[4] = std::numeric_limits<float>::quiet_NaN();
        }
        pseudo_gradient(outer.data(), param.data(), delta.data(), n, kHost);
        for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same({delta[i]}, {outer[i] - param[i]})) << i;
        std::vector<float> ro = outer, rm = m, rp = param;
        reference(ro, rm, delta, rp, rule);
        outer_update(outer.data(), m.data(), delta.data(), param.data(), n, rule, kHost);
        EXPECT_TRUE(same(outer, ro)) << n;
        EXPECT_TRUE(same(m, rm)) << n;
        EXPECT_TRUE(same(param, rp)) << n;
      }
}

TEST(OuterStep, BadRulesAndBuffersAreRefused) {
  float x = 1.0f;
  OuterRule rule;
  for (float lr : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    rule = OuterRule{};
    rule.lr = lr;
    EXPECT_THROW(outer_update(&x, &x, &x, &x, 1, rule, kHost), Error) << lr;
  }
  for (float momentum : {1.0f, -0.1f}) {
    rule = OuterRule{};
    rule.momentum = momentum;
    EXPECT_THROW(outer_update(&x, &x, &x, &x, 1, rule, kHost), Error) << momentum;
  }
  rule = OuterRule{};
  rule.mix = 1.0f;
  EXPECT_THROW(check_rule(rule), Error);
  EXPECT_THROW(pseudo_gradient(nullptr, &x, &x, 1, kHost), Error);
  EXPECT_NO_THROW(pseudo_gradient(nullptr, nullptr, nullptr, 0, kHost));
}

TEST(OuterStepGpu, TheKernelsAreTheHostTwinsBitForBit) {
  GCOMM_SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const size_t n = 100003;
  OuterRule rule;
  rule.mix = 0.5f;
  std::vector<float> outer = randoms(n, 5), m = randoms(n, 6), param = randoms(n, 7), delta(n);
  std::vector<float*> d(4, nullptr);
  for (float*& p : d) ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * 4), cudaSuccess);
  cudaMemcpy(d[0], outer.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d[1], m.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d[3], param.data(), n * 4, cudaMemcpyHostToDevice);
  const Target gpu{gcommCudaDevice(0), nullptr};
  pseudo_gradient(d[0], d[3], d[2], n, gpu);
  outer_update(d[0], d[1], d[2], d[3], n, rule, gpu);
  pseudo_gradient(outer.data(), param.data(), delta.data(), n, kHost);
  outer_update(outer.data(), m.data(), delta.data(), param.data(), n, rule, kHost);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::vector<float>> back(4, std::vector<float>(n));
  for (size_t k = 0; k < 4; ++k) cudaMemcpy(back[k].data(), d[k], n * 4, cudaMemcpyDeviceToHost);
  EXPECT_TRUE(same(back[0], outer));
  EXPECT_TRUE(same(back[1], m));
  EXPECT_TRUE(same(back[2], delta));
  EXPECT_TRUE(same(back[3], param));
  for (float* p : d) cudaFree(p);
}

}  // namespace
}  // namespace gradcomm::kernels::outer
