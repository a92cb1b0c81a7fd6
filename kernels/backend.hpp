// The two backends behind kernels/ops.hpp: host twins and CUDA launchers, with
// the same signatures. Arguments are already validated by ops.cpp.
#pragma once

#include <cstddef>

#include "gradcomm/types.h"
#include "kernels/scaler_math.hpp"

namespace gradcomm::kernels {

// One tensor's two sides for an element-wise op (see functors.hpp).
struct Pair {
  void* a;
  void* b;
  size_t n;
  unsigned int index = 0;  // the tensor's place in the caller's list (OpSpec::found_per_tensor)
};

enum class OpKind { kUnscale, kPack, kUnpack, kClip, kCheck };

struct OpSpec {
  OpKind kind = OpKind::kUnscale;
  gcommDataType_t a_dtype = gcommFloat32;  // unscale/clip: the tensors; pack: source; unpack: bucket
  gcommDataType_t b_dtype = gcommFloat32;  // pack: bucket; unpack: destination
  float scale = 1.0f;                      // multiplied by *device_scale when that is set
  const float* device_scale = nullptr;
  bool accumulate = false;
  float* found_inf = nullptr;  // set to 1 on a non-finite result (unscale, unpack)
  // pack: found_per_tensor[pair.index] set to 1 when that tensor's packed value
  // is non-finite (this rank's own gradient, before any reduction); never cleared.
  float* found_per_tensor = nullptr;
  const float* norm = nullptr;  // clip: the global norm
  float max_norm = 0.0f;        // clip
};

// Elements per chunk: the unit of work of one CUDA block, and the unit the norm's
// partial sums are taken over (on both backends, so both sum in the same groups).
constexpr size_t kChunkElements = 16384;

inline size_t chunks_of(size_t n) {
  return (n + kChunkElements - 1) / kChunkElements;
}

namespace host {
void apply(const OpSpec& spec, const Pair* pairs, size_t n);
void l2_norm(const gcommTensor_t* tensors, size_t n, float* global_norm, float* per_tensor,
             double* sum_of_squares = nullptr);
void norm_of_sums(const double* squares, size_t n, float* norm);
void update_scale(ScalerState* state, const ScalerParams& params);
}  // namespace host

namespace cuda {
void apply(const OpSpec& spec, const Pair* pairs, size_t n, gcommStream_t stream);
// workspace: doubles, one per chunk of every tensor plus one per tensor.
void l2_norm(const gcommTensor_t* tensors, size_t n, float* global_norm, float* per_tensor, double* workspace,
             gcommStream_t stream, double* sum_of_squares = nullptr);
void norm_of_sums(const double* squares, size_t n, float* norm, gcommStream_t stream);
void update_scale(ScalerState* state, const ScalerParams& params, gcommStream_t stream);
void copy_unless_flagged(float* dst, const float* src, size_t count, const float* skip, gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels
