#include "comm/nccl/nccl_check.hpp"

#include <cuda_runtime_api.h>

#include <mutex>

#include "comm/nccl/nccl_library.hpp"
#include "common/log.hpp"

namespace gradcomm {

void throw_nccl_error(ncclResult_t result, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();
  // Only reached after an NCCL call returned, so NCCL is loaded.
  const NcclLibrary& lib = nccl();
  const char* detail = lib.last_error(nullptr);
  // "nccl().CommCount(...)" is named as NCCL names it: "ncclCommCount".
  std::string msg =
      cat(called_function(expr), " failed: ", lib.GetErrorString(result), " at ", file, ":", line);
  if (detail[0] != '\0') msg += cat(" (NCCL: ", detail, ")");
  GCOMM_INFO(CALL, msg);
  gcommStatus_t status = gcommNcclError;
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) status = gcommInvalidArgument;
  if (result == ncclRemoteError) status = gcommRemoteError;
  throw Error(status, msg);
}

int nccl_built_version() noexcept {
  return NCCL_VERSION_CODE;
}

int nccl_loaded_version() noexcept {
  static int version = [] {
    const NcclLibrary* lib = nccl_if_loaded(nullptr);
    if (lib == nullptr) return 0;
    int v = lib->version;
    if (v < NCCL_VERSION_CODE) {
      GCOMM_WARN("loaded NCCL ", nccl_version_string(v), " is older than the NCCL ",
                 nccl_version_string(NCCL_VERSION_CODE),
                 " gradcomm was built against; features newer than the loaded NCCL are disabled");
    }
    return v;
  }();
  return version;
}

bool nccl_has(NcclFeature feature) noexcept {
  int min = nccl_feature_min_version(feature);
  return nccl_loaded_version() >= min && nccl_built_version() >= min;
}

}  // namespace gradcomm
