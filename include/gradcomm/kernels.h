/*
 * gradcomm kernels: mixed-precision scaling, bucket pack/unpack with a fused
 * epilogue, norms and casts, as standalone calls on caller-owned memory, plus a
 * grad-scaler object holding the dynamic loss scale on the device.
 *
 * Every call takes the device the memory lives on (gcommHostDevice() or
 * gcommCudaDevice(n)) and a stream. On a CUDA device the work is enqueued on the
 * stream and the call returns without waiting; on the host it runs before the
 * call returns (the host twin: the same math). Pointers must live where the
 * device says (device memory of that GPU or managed memory for CUDA; host memory
 * for the host): anything else is refused, and nothing runs. "Device scalars"
 * (inv_scale, found_inf, norms, device_scale) follow the same rule.
 *
 * found_inf is a float set to 1.0f when a non-finite value is produced; calls
 * never clear it (like torch._amp_foreach_non_finite_check_and_unscale_).
 * Thread safety: calls on different memory may run concurrently; a grad scaler
 * is used by one thread at a time.
 */
#ifndef GRADCOMM_KERNELS_H
#define GRADCOMM_KERNELS_H

#include "gradcomm/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** grads[k] *= *inv_scale in place; *found_inf = 1 if any result is Inf/NaN
 *  (found_inf may be NULL). Any number of tensors, any mix of dtypes. */
GCOMM_API gcommStatus_t gcommUnscaleAndCheck(const gcommTensor_t* grads, size_t num_grads,
                                             const float* inv_scale, float* found_inf, gcommDevice_t device,
                                             gcommStream_t stream);

/** *found_inf = 1 if any element of the tensors is Inf/NaN; the tensors are only
 *  read (half the memory traffic of an unscale by 1). Any mix of dtypes. */
GCOMM_API gcommStatus_t gcommCheckFinite(const gcommTensor_t* grads, size_t num_grads, float* found_inf,
                                         gcommDevice_t device, gcommStream_t stream);

/** Gathers @p num_src tensors into @p bucket of @p bucket_dtype, casting, times
 *  @p scale and *device_scale (device_scale may be NULL). Tensor k goes to
 *  elements [offsets[k], offsets[k] + count) (offsets NULL: back to back). */
GCOMM_API gcommStatus_t gcommPack(const gcommTensor_t* src, size_t num_src, const size_t* offsets,
                                  void* bucket, gcommDataType_t bucket_dtype, float scale,
                                  const float* device_scale, gcommDevice_t device, gcommStream_t stream);

/** Scatters @p bucket back into @p num_dst tensors in one pass: cast to each
 *  tensor's dtype, times @p scale and *device_scale, added to the destination if
 *  @p accumulate is non-zero, *found_inf = 1 on a non-finite result. Destination
 *  tensors must not overlap. */
GCOMM_API gcommStatus_t gcommUnpack(const void* bucket, gcommDataType_t bucket_dtype, const size_t* offsets,
                                    const gcommTensor_t* dst, size_t num_dst, float scale,
                                    const float* device_scale, int accumulate, float* found_inf,
                                    gcommDevice_t device, gcommStream_t stream);

/** Bytes of workspace gcommL2Norm / gcommClipByGlobalNorm need for this list on a
 *  CUDA device (0 is fine on the host). */
GCOMM_API gcommStatus_t gcommNormWorkspaceSize(const gcommTensor_t* tensors, size_t num_tensors,
                                               size_t* bytes);

/** *global_norm = the L2 norm of all elements; per_tensor[k] (may be NULL) the
 *  norm of tensor k. Deterministic (same bits every run). @p workspace: device
 *  memory of gcommNormWorkspaceSize bytes (unused on the host). */
GCOMM_API gcommStatus_t gcommL2Norm(const gcommTensor_t* tensors, size_t num_tensors, float* global_norm,
                                    float* per_tensor, void* workspace, size_t workspace_bytes,
                                    gcommDevice_t device, gcommStream_t stream);

/** Computes the global norm into *global_norm, then multiplies every tensor by
 *  max_norm / (norm + 1e-6) when that is below 1; no host synchronization.
 *  Inf or NaN anywhere in the list makes *global_norm Inf or NaN, and then no
 *  tensor is changed: the values stay as they were, so the step can be skipped
 *  (PyTorch's clip_grad_norm_ instead multiplies everything by NaN, which cannot
 *  be undone). Use gcommClipByGlobalNormAndCheck to have that reported in a flag. */
GCOMM_API gcommStatus_t gcommClipByGlobalNorm(const gcommTensor_t* tensors, size_t num_tensors,
                                              float max_norm, float* global_norm, void* workspace,
                                              size_t workspace_bytes, gcommDevice_t device,
                                              gcommStream_t stream);

/** gcommClipByGlobalNorm that reports a non-finite norm: *found_inf (in the
 *  target's memory, like gcommUnscaleAndCheck's) is set to 1 when the norm is Inf
 *  or NaN and left as it was otherwise, so one flag can collect the unscale's and
 *  the clip's verdicts before the optimizer step. */
GCOMM_API gcommStatus_t gcommClipByGlobalNormAndCheck(const gcommTensor_t* tensors, size_t num_tensors,
                                                      float max_norm, float* global_norm, float* found_inf,
                                                      void* workspace, size_t workspace_bytes,
                                                      gcommDevice_t device, gcommStream_t stream);

/** dst = src converted, round to nearest even. f32 -> f16 overflows to +-Inf from
 *  65520 up; NaN stays NaN. */
GCOMM_API gcommStatus_t gcommCast(const void* src, gcommDataType_t src_dtype, void* dst,
                                  gcommDataType_t dst_dtype, size_t count, gcommDevice_t device,
                                  gcommStream_t stream);

/* ------------------------------------------------------------------------- */
/* Grad scaler                                                               */
/* ------------------------------------------------------------------------- */

/** Grad-scaler configuration (versioned config struct, version 1). Defaults are
 *  PyTorch GradScaler's. */
typedef struct gcommGradScalerConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  float init_scale;        /**< 65536 */
  float growth_factor;     /**< 2.0, > 1 */
  float backoff_factor;    /**< 0.5, in (0, 1) */
  int32_t growth_interval; /**< 2000, >= 1 */
  int32_t hysteresis;      /**< 1 (back off on every overflow); DeepSpeed uses 2 */
  float min_scale;         /**< 0: none; the scale never backs off below it */
} gcommGradScalerConfig_t;

#define GCOMM_GRAD_SCALER_CONFIG_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommGradScalerConfig_t), 65536.0f, 2.0f, 0.5f, 2000, 1, 0.0f }

/** Creates a scaler whose state (scale, growth tracker, found-inf) lives on @p device. */
GCOMM_API gcommStatus_t gcommGradScalerCreate(gcommDevice_t device, const gcommGradScalerConfig_t* config,
                                              gcommGradScaler_t* scaler);
GCOMM_API gcommStatus_t gcommGradScalerDestroy(gcommGradScaler_t scaler);

/** grads *= 1/scale, accumulating found-inf in the scaler (stream-ordered). */
GCOMM_API gcommStatus_t gcommGradScalerUnscale(gcommGradScaler_t scaler, const gcommTensor_t* grads,
                                               size_t num_grads, gcommStream_t stream);

/** Applies the scale rule to this step's found-inf, records whether the step must
 *  be skipped, and clears found-inf for the next step. No host synchronization. */
GCOMM_API gcommStatus_t gcommGradScalerUpdate(gcommGradScaler_t scaler, gcommStream_t stream);

/** Device pointers into the scaler's state, for fused kernels and optimizers:
 *  the scale, 1/scale, this step's found-inf flag (float, > 0 on overflow), and
 *  "the last update skipped its step" (int32, 1 = skip). Any may be NULL. */
GCOMM_API gcommStatus_t gcommGradScalerDeviceState(gcommGradScaler_t scaler, const float** scale,
                                                   const float** inv_scale, float** found_inf,
                                                   const int32_t** skipped_last);

/** The scaler's state as a checkpoint holds it (torch.amp.GradScaler's state_dict
 *  has the same scale and growth tracker). */
typedef struct gcommGradScalerState {
  float scale;             /**< the loss scale, positive and finite */
  int32_t growth_tracker;  /**< clean steps since the last growth or backoff, 0 .. growth_interval-1 */
  int32_t hysteresis_left; /**< overflows still tolerated before a backoff, 1 .. hysteresis */
  int32_t skipped_last;    /**< 1 if the last update saw an overflow */
} gcommGradScalerState_t;

/** Reads the state (SYNCHRONIZES @p stream, like the host reads below). */
GCOMM_API gcommStatus_t gcommGradScalerGetState(gcommGradScaler_t scaler, gcommStream_t stream,
                                                gcommGradScalerState_t* state);
/** Restores a state read by gcommGradScalerGetState (stream-ordered; this step's
 *  found-inf is cleared). A scale that is not positive and finite or below the
 *  scaler's min_scale, a growth tracker outside 0 .. growth_interval-1, a
 *  hysteresis_left outside 1 .. hysteresis or a skipped_last other than 0/1 is
 *  refused with gcommInvalidArgument, and the state is left as it was. Synchronizes
 *  @p stream before it returns (the host copy is read by the transfer). */
GCOMM_API gcommStatus_t gcommGradScalerSetState(gcommGradScaler_t scaler, const gcommGradScalerState_t* state,
                                                gcommStream_t stream);

/** Host reads; they SYNCHRONIZE @p stream (wait for the scaler's pending work). */
GCOMM_API gcommStatus_t gcommGradScalerGetScale(gcommGradScaler_t scaler, gcommStream_t stream, float* scale);
GCOMM_API gcommStatus_t gcommGradScalerGetFoundInf(gcommGradScaler_t scaler, gcommStream_t stream,
                                                   int* found_inf);
GCOMM_API gcommStatus_t gcommGradScalerGetSkipped(gcommGradScaler_t scaler, gcommStream_t stream,
                                                  int* skipped);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GRADCOMM_KERNELS_H */
