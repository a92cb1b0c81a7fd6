// Internal access to the grad scaler behind a C handle, for the floors above
// (the reducer's C API). acquire_grad_scaler counts a user (gcommGradScalerDestroy
// refuses while users remain); release_grad_scaler undoes it and never throws.
#pragma once

#include "gradcomm/kernels.h"
#include "kernels/grad_scaler.hpp"

namespace gradcomm::kernels {
GradScaler& acquire_grad_scaler(gcommGradScaler_t handle);
void release_grad_scaler(gcommGradScaler_t handle) noexcept;
}  // namespace gradcomm::kernels
