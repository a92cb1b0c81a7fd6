// The kernels layer's internal API: each call validates its arguments (nothing
// runs on bad input), then runs the host twin now (host target) or enqueues the
// CUDA kernel on the target's stream (CUDA target). The reducer calls these.
//
// Tensor lists are gcommTensor_t arrays. Bucket layouts are element offsets:
// tensor k occupies [offsets[k], offsets[k] + count_k) of the bucket (NULL
// offsets = packed back to back). A float* "device scalar" lives where the
// target says (device memory for CUDA, host memory for the host).
#pragma once

#include <cstddef>

#include "gradcomm/types.h"
#include "kernels/scaler_math.hpp"

namespace gradcomm::kernels {

struct Target {
  gcommDevice_t device;
  gcommStream_t stream;
  // The caller has already checked where every pointer of the call lives (the
  // reducer: its own buffers, and gradients checked at registration), so the
  // driver is not asked again (~0.5 us a query, one per allocation per call).
  // Every other check still runs.
  bool locations_known = false;
  // Only the call's device scalars (inv_scale, found_inf, device_scale, state)
  // are the caller's own, checked allocations (a grad scaler's state); tensors
  // and buckets are still looked up.
  bool scalars_known = false;
  bool cuda() const { return device.kind == gcommDeviceCuda; }
};

// Validates the device descriptor and returns the target (throws on a bad one).
Target make_target(gcommDevice_t device, gcommStream_t stream);

// found_inf (may be NULL) is set to 1.0f if any result is Inf/NaN; never cleared.
void unscale_and_check(const gcommTensor_t* grads, size_t n, const float* inv_scale, float* found_inf,
                       const Target& target);

// found_inf is set to 1.0f if any element is Inf/NaN; the tensors are only read.
void check_finite(const gcommTensor_t* grads, size_t n, float* found_inf, const Target& target);

// bucket <- cast(src * scale * (*device_scale)); device_scale may be NULL.
// found_per_tensor (may be NULL; where the kernels run): entry slots[k] (k when
// slots is NULL) set to 1.0f when tensor k's packed value is not finite on the
// wire (this rank's own Inf/NaN gradient, or one the cast to f16/bf16
// overflows); never cleared.
void pack(const gcommTensor_t* src, size_t n, const size_t* offsets, void* bucket,
          gcommDataType_t bucket_dtype, float scale, const float* device_scale, const Target& target,
          float* found_per_tensor = nullptr, const size_t* slots = nullptr);

// dst <- cast(bucket * scale * (*device_scale) [+ dst]); found_inf as above.
void unpack(const void* bucket, gcommDataType_t bucket_dtype, const size_t* offsets, const gcommTensor_t* dst,
            size_t n, float scale, const float* device_scale, bool accumulate, float* found_inf,
            const Target& target);

// Workspace bytes for l2_norm / clip_by_global_norm on this tensor list.
size_t norm_workspace_bytes(const gcommTensor_t* tensors, size_t n);

// global_norm = sqrt(sum of squares) over every element; per_tensor[k] (may be
// NULL) the norm of tensor k. Deterministic: the same inputs give the same bits.
// sum_of_squares (may be NULL; where the target is): the sum itself, in double,
// before the square root and the rounding to float.
void l2_norm(const gcommTensor_t* tensors, size_t n, float* global_norm, float* per_tensor, void* workspace,
             size_t workspace_bytes, const Target& target, double* sum_of_squares = nullptr);

// *norm = sqrt(squares[0] + ... + squares[n-1]), added in order in double and
// rounded once: sums of squares of disjoint parts (the ranks' shards) combined
// into their global norm, the float the whole list's l2_norm gives but in rare ties.
void norm_of_sums(const double* squares, size_t n, float* norm, const Target& target);

// Computes the global norm into global_norm, then multiplies every tensor by
// max_norm / (norm + 1e-6) if that is below 1 — all on the target, no host sync.
// A non-finite norm scales nothing and sets *found_inf (when given) to 1.
void clip_by_global_norm(const gcommTensor_t* tensors, size_t n, float max_norm, float* global_norm,
                         void* workspace, size_t workspace_bytes, const Target& target,
                         float* found_inf = nullptr);

// Multiplies every tensor by max_norm / (*norm + 1e-6) when that is below 1,
// with a norm already computed (a non-finite norm scales nothing). The reducer's
// clip over shards combines the ranks' partial norms first, then calls this.
void clip_to_norm(const gcommTensor_t* tensors, size_t n, float max_norm, const float* norm,
                  const Target& target);

// dst = src (count floats) unless *skip > 0 (skip may be NULL): a state update
// that a step with Inf/NaN (the skip flag, on the target) must not make.
void copy_unless_flagged(float* dst, const float* src, size_t count, const float* skip, const Target& target);

// dst <- cast(src), count elements.
void cast(const void* src, gcommDataType_t src_dtype, void* dst, gcommDataType_t dst_dtype, size_t count,
          const Target& target);

// The loss-scale rule on a ScalerState living on the target.
void update_scale(ScalerState* state, const ScalerParams& params, const Target& target);

}  // namespace gradcomm::kernels
