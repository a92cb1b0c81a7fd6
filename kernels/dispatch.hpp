// Runs an operation's host twin or, for a CUDA target, its CUDA path with the
// target's device current (restored after): the one switch of the kernel families
// that validate in their own file (powersgd/, quant/).
#pragma once

#include "common/device.hpp"
#include "kernels/ops.hpp"

namespace gradcomm::kernels {

template <class Host, class Cuda>
void dispatch(const Target& t, Host&& host_op, Cuda&& cuda_op) {
  if (t.cuda()) {
    DeviceGuard guard(t.device);
    cuda_op();
  } else {
    host_op();
  }
}

}  // namespace gradcomm::kernels
