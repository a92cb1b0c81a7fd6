// C API of the kernels layer: standalone kernels and the grad scaler.
#include <atomic>

#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/handle_registry.hpp"
#include "gradcomm/kernels.h"
#include "kernels/grad_scaler.hpp"
#include "kernels/ops.hpp"

using namespace gradcomm;
using namespace gradcomm::kernels;

struct gcommGradScaler : UseCounted {  // reducers using it
  GradScaler scaler;
  gcommGradScaler(gcommDevice_t device, const gcommGradScalerConfig_t& config) : scaler(device, config) {}
};

namespace {
HandleRegistry<gcommGradScaler>& scalers() {
  static HandleRegistry<gcommGradScaler> registry("gcommGradScaler_t");
  return registry;
}
}  // namespace

extern "C" {

GCOMM_API gcommStatus_t gcommUnscaleAndCheck(const gcommTensor_t* grads, size_t num_grads,
                                             const float* inv_scale, float* found_inf, gcommDevice_t device,
                                             gcommStream_t stream) {
  return GCOMM_API_CALL(
      { unscale_and_check(grads, num_grads, inv_scale, found_inf, make_target(device, stream)); });
}

GCOMM_API gcommStatus_t gcommCheckFinite(const gcommTensor_t* grads, size_t num_grads, float* found_inf,
                                         gcommDevice_t device, gcommStream_t stream) {
  return GCOMM_API_CALL({ check_finite(grads, num_grads, found_inf, make_target(device, stream)); });
}

GCOMM_API gcommStatus_t gcommPack(const gcommTensor_t* src, size_t num_src, const size_t* offsets,
                                  void* bucket, gcommDataType_t bucket_dtype, float scale,
                                  const float* device_scale, gcommDevice_t device, gcommStream_t stream) {
  return GCOMM_API_CALL({
    pack(src, num_src, offsets, bucket, bucket_dtype, scale, device_scale, make_target(device, stream));
  });
}

GCOMM_API gcommStatus_t gcommUnpack(const void* bucket, gcommDataType_t bucket_dtype, const size_t* offsets,
                                    const gcommTensor_t* dst, size_t num_dst, float scale,
                                    const float* device_scale, int accumulate, float* found_inf,
                                    gcommDevice_t device, gcommStream_t stream) {
  return GCOMM_API_CALL({
    unpack(bucket, bucket_dtype, offsets, dst, num_dst, scale, device_scale, accumulate != 0, found_inf,
           make_target(device, stream));
  });
}

GCOMM_API gcommStatus_t gcommNormWorkspaceSize(const gcommTensor_t* tensors, size_t num_tensors,
                                               size_t* bytes) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(bytes);
    *bytes = norm_workspace_bytes(tensors, num_tensors);
  });
}

GCOMM_API gcommStatus_t gcommL2Norm(const gcommTensor_t* tensors, size_t num_tensors, float* global_norm,
                                    float* per_tensor, void* workspace, size_t workspace_bytes,
                                    gcommDevice_t device, gcommStream_t stream) {
  return GCOMM_API_CALL({
    l2_norm(tensors, num_tensors, global_norm, per_tensor, workspace, workspace_bytes,
            make_target(device, stream));
  });
}

GCOMM_API gcommStatus_t gcommClipByGlobalNorm(const gcommTensor_t* tensors, size_t num_tensors,
                                              float max_norm, float* global_norm, void* workspace,
                                              size_t workspace_bytes, gcommDevice_t device,
                                              gcommStream_t stream) {
  return GCOMM_API_CALL({
    clip_by_global_norm(tensors, num_tensors, max_norm, global_norm, workspace, workspace_bytes,
                        make_target(device, stream));
  });
}

GCOMM_API gcommStatus_t gcommClipByGlobalNormAndCheck(const gcommTensor_t* tensors, size_t num_tensors,
                                                      float max_norm, float* global_norm, float* found_inf,
                                                      void* workspace, size_t workspace_bytes,
                                                      gcommDevice_t device, gcommStream_t stream) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(found_inf);
    clip_by_global_norm(tensors, num_tensors, max_norm, global_norm, workspace, workspace_bytes,
                        make_target(device, stream), found_inf);
  });
}

GCOMM_API gcommStatus_t gcommCast(const void* src, gcommDataType_t src_dtype, void* dst,
                                  gcommDataType_t dst_dtype, size_t count, gcommDevice_t device,
                                  gcommStream_t stream) {
  return GCOMM_API_CALL({ cast(src, src_dtype, dst, dst_dtype, count, make_target(device, stream)); });
}

GCOMM_API gcommStatus_t gcommGradScalerCreate(gcommDevice_t device, const gcommGradScalerConfig_t* config,
                                              gcommGradScaler_t* scaler) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(scaler);
    const gcommGradScalerConfig_t defaults = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
    gcommGradScalerConfig_t c = read_config(config, defaults, "gcommGradScalerConfig_t");
    auto* created = new gcommGradScaler(device, c);
    scalers().add(created);
    *scaler = created;
  });
}

GCOMM_API gcommStatus_t gcommGradScalerDestroy(gcommGradScaler_t scaler) {
  return GCOMM_API_CALL({
    scalers().refuse_if_used(scaler, "the scaler");
    scalers().destroy(scaler);
  });
}

GCOMM_API gcommStatus_t gcommGradScalerUnscale(gcommGradScaler_t scaler, const gcommTensor_t* grads,
                                               size_t num_grads, gcommStream_t stream) {
  return GCOMM_API_CALL({ scalers().get(scaler)->scaler.unscale(grads, num_grads, stream); });
}

GCOMM_API gcommStatus_t gcommGradScalerUpdate(gcommGradScaler_t scaler, gcommStream_t stream) {
  return GCOMM_API_CALL({ scalers().get(scaler)->scaler.update(stream); });
}

GCOMM_API gcommStatus_t gcommGradScalerDeviceState(gcommGradScaler_t scaler, const float** scale,
                                                   const float** inv_scale, float** found_inf,
                                                   const int32_t** skipped_last) {
  return GCOMM_API_CALL({
    ScalerState* s = scalers().get(scaler)->scaler.state();
    if (scale != nullptr) *scale = &s->scale;
    if (inv_scale != nullptr) *inv_scale = &s->inv_scale;
    if (found_inf != nullptr) *found_inf = &s->found_inf;
    if (skipped_last != nullptr) *skipped_last = &s->skipped_last;
  });
}

GCOMM_API gcommStatus_t gcommGradScalerGetScale(gcommGradScaler_t scaler, gcommStream_t stream,
                                                float* scale) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(scale);
    *scale = scalers().get(scaler)->scaler.read(stream).scale;
  });
}

GCOMM_API gcommStatus_t gcommGradScalerGetFoundInf(gcommGradScaler_t scaler, gcommStream_t stream,
                                                   int* found_inf) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(found_inf);
    *found_inf = scalers().get(scaler)->scaler.read(stream).found_inf > 0.0f ? 1 : 0;
  });
}

GCOMM_API gcommStatus_t gcommGradScalerGetSkipped(gcommGradScaler_t scaler, gcommStream_t stream,
                                                  int* skipped) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(skipped);
    *skipped = scalers().get(scaler)->scaler.read(stream).skipped_last;
  });
}

GCOMM_API gcommStatus_t gcommGradScalerGetState(gcommGradScaler_t scaler, gcommStream_t stream,
                                                gcommGradScalerState_t* state) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(state);
    ScalerState s = scalers().get(scaler)->scaler.read(stream);
    *state = gcommGradScalerState_t{s.scale, s.growth_tracker, s.hysteresis_left, s.skipped_last};
  });
}

GCOMM_API gcommStatus_t gcommGradScalerSetState(gcommGradScaler_t scaler, const gcommGradScalerState_t* state,
                                                gcommStream_t stream) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(state);
    scalers().get(scaler)->scaler.write(*state, stream);
  });
}

}  // extern "C"

// The reducer's C API (reducer/api/reducer_api.cpp) takes scalers by handle.
namespace gradcomm::kernels {
GradScaler& acquire_grad_scaler(gcommGradScaler_t handle) {
  return scalers().acquire(handle).scaler;
}
void release_grad_scaler(gcommGradScaler_t handle) noexcept {
  scalers().release(handle);
}
}  // namespace gradcomm::kernels
