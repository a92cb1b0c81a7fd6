// The outer step's CUDA kernels (outer_step.hpp): grid-stride loops over the
// element math of outer_math.hpp, so the bits are the host twins'.
#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda_check.hpp"
#include "kernels/outer/outer_math.hpp"

namespace gradcomm::kernels::outer::cuda {

namespace {

constexpr unsigned kThreads = 256;

unsigned grid_for(size_t n) {
  return static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 4096));
}

__global__ void pseudo_gradient_kernel(const float* outer, const float* param, float* delta, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    delta[i] = pseudo_gradient_of(outer[i], param[i]);
}

__global__ void outer_update_kernel(float* outer, float* m, const float* delta, float* param, size_t n,
                                    OuterRule rule) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float o = outer[i], mi = m[i], p = param[i];
    update_element(o, mi, delta[i], p, rule);
    outer[i] = o;
    m[i] = mi;
    param[i] = p;
  }
}

}  // namespace

void pseudo_gradient(const float* outer, const float* param, float* delta, size_t n, gcommStream_t stream) {
  pseudo_gradient_kernel<<<grid_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(outer, param, delta,
                                                                                          n);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

void outer_update(float* outer, float* m, const float* delta, float* param, size_t n, const OuterRule& rule,
                  gcommStream_t stream) {
  outer_update_kernel<<<grid_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(outer, m, delta, param,
                                                                                       n, rule);
  GCOMM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gradcomm::kernels::outer::cuda
