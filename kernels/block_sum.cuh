// A deterministic block-wide sum: every thread of a block of kBlockThreads (a
// power of two) passes its value and gets the total, summed in a fixed tree, so
// the same inputs give the same bits every run. `shared` holds kBlockThreads
// doubles. Every thread of the block must call it.
#pragma once

namespace gradcomm::kernels {

template <int kBlockThreads>
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kBlockThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  double total = shared[0];
  __syncthreads();
  return total;
}

}  // namespace gradcomm::kernels
