// NCCL version gating, without nccl.h (for the environment report and the C API).
// gradcomm may load an NCCL older or newer than the one it was built against;
// features are enabled by the loaded version, never by the built one alone.
#pragma once

#include <string>

namespace gradcomm {

// NCCL_VERSION_CODE-style numbers (major*10000 + minor*100 + patch).
int nccl_built_version() noexcept;
int nccl_loaded_version() noexcept;  // 0 if NCCL cannot be loaded (nccl_library.hpp)
std::string nccl_version_string(int code);

enum class NcclFeature {
  kNonBlockingInit,  // ncclCommInitRankConfig with blocking = 0: 2.14
  kCommSplit,        // ncclCommSplit: 2.18
  kCommShrink,       // ncclCommShrink: 2.27
};
bool nccl_has(NcclFeature feature) noexcept;

// What loading NCCL gave (nccl_library.hpp): its version and file, or why it
// could not be loaded. Never throws; loads NCCL on first use.
struct NcclLoadReport {
  int version = 0;  // 0: not loaded
  std::string path;
  std::string error;
};
NcclLoadReport nccl_load_report() noexcept;
const char* nccl_feature_name(NcclFeature feature) noexcept;
int nccl_feature_min_version(NcclFeature feature) noexcept;

}  // namespace gradcomm
