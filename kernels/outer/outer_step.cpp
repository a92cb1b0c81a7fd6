// Validation, dispatch and the host twins of the outer step (outer_step.hpp).
#include "kernels/outer/outer_step.hpp"

#include <cmath>

#include "common/error.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/outer/outer_math.hpp"

namespace gradcomm::kernels::outer {

namespace {

// The CUDA path, or the reason there is none.
template <class Op>
void on_cuda(Op&& op) {
#ifdef GRADCOMM_KERNELS_CUDA
  op();
#else
  (void)op;
  fail(gcommNotSupported,
       "the outer step needs a CUDA kernel, and gradcomm was built without CUDA (GRADCOMM_CUDA=OFF)");
#endif
}

void require_spans(size_t n, std::initializer_list<const void*> spans) {
  if (n == 0) return;
  for (const void* p : spans) require(p != nullptr, "the outer step: NULL buffer for ", n, " values");
}

}  // namespace

void check_rule(const OuterRule& rule) {
  require(std::isfinite(rule.lr) && rule.lr > 0.0f, "outer_lr ", rule.lr, " is not a finite value > 0");
  require(std::isfinite(rule.momentum) && rule.momentum >= 0.0f && rule.momentum < 1.0f, "outer_momentum ",
          rule.momentum, " is not in [0, 1)");
  require(std::isfinite(rule.mix) && rule.mix >= 0.0f && rule.mix < 1.0f, "mix ", rule.mix,
          " is not in [0, 1)");
}

void pseudo_gradient(const float* outer, const float* param, float* delta, size_t n, const Target& t) {
  require_spans(n, {outer, param, delta});
  if (n == 0) return;
  dispatch(
      t,
      [&] {
        for (size_t i = 0; i < n; ++i) delta[i] = pseudo_gradient_of(outer[i], param[i]);
      },
      [&] {
        on_cuda([&] {
#ifdef GRADCOMM_KERNELS_CUDA
          cuda::pseudo_gradient(outer, param, delta, n, t.stream);
#endif
        });
      });
}

void outer_update(float* outer, float* m, const float* delta, float* param, size_t n, const OuterRule& rule,
                  const Target& t) {
  check_rule(rule);
  require_spans(n, {outer, m, delta, param});
  if (n == 0) return;
  dispatch(
      t,
      [&] {
        for (size_t i = 0; i < n; ++i) update_element(outer[i], m[i], delta[i], param[i], rule);
      },
      [&] {
        on_cuda([&] {
#ifdef GRADCOMM_KERNELS_CUDA
          cuda::outer_update(outer, m, delta, param, n, rule, t.stream);
#endif
        });
      });
}

}  // namespace gradcomm::kernels::outer
