// Checked NCCL calls (comm/nccl/ only: nothing else includes nccl.h).
#pragma once

#include <nccl.h>

#include "comm/nccl/nccl_version.hpp"
#include "common/error.hpp"

namespace gradcomm {

[[noreturn]] void throw_nccl_error(ncclResult_t result, const char* expr, const char* file, int line);

}  // namespace gradcomm

#define GCOMM_NCCL_CHECK(expr)                                                                          \
  do {                                                                                                  \
    ncclResult_t gcomm_res_ = (expr);                                                                   \
    if (gcomm_res_ != ncclSuccess) ::gradcomm::throw_nccl_error(gcomm_res_, #expr, __FILE__, __LINE__); \
  } while (0)
