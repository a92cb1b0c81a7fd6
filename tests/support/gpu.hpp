// Test helpers for GPU cases: skip, with the reason, when no GPU is present.
#pragma once

#include <gtest/gtest.h>

#include "common/device.hpp"

#define GCOMM_SKIP_WITHOUT_GPU()                                               \
  do {                                                                         \
    if (!::gradcomm::gpu_available())                                          \
      GTEST_SKIP() << "no usable GPU (" << ::gradcomm::no_gpu_reason() << ")"; \
  } while (0)
