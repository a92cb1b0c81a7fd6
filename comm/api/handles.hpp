// Internal access to the objects behind other layers' C handles, for the
// reducer's C API. acquire_* counts a user (the handle's destroy refuses while
// users remain); release_* undoes it and never throws.
#pragma once

#include "comm/communicator.hpp"
#include "gradcomm/reducer.h"
#include "kernels/grad_scaler.hpp"

namespace gradcomm::comm {
Communicator& acquire_communicator(gcommComm_t handle);
void release_communicator(gcommComm_t handle) noexcept;
}  // namespace gradcomm::comm

namespace gradcomm::kernels {
GradScaler& acquire_grad_scaler(gcommGradScaler_t handle);
void release_grad_scaler(gcommGradScaler_t handle) noexcept;
}  // namespace gradcomm::kernels
