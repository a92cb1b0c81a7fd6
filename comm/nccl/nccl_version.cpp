// NCCL version numbers and feature gates that need no NCCL: built in every
// configuration (a build without CUDA reports through them too).
#include "comm/nccl/nccl_version.hpp"

#include "common/error.hpp"

namespace gradcomm {

std::string nccl_version_string(int code) {
  return cat(code / 10000, ".", (code / 100) % 100, ".", code % 100);
}

int nccl_feature_min_version(NcclFeature feature) noexcept {
  switch (feature) {
    case NcclFeature::kNonBlockingInit:
      return 21400;
    case NcclFeature::kCommSplit:
      return 21800;
    case NcclFeature::kCommShrink:
      return 22700;
  }
  return 0;
}

const char* nccl_feature_name(NcclFeature feature) noexcept {
  switch (feature) {
    case NcclFeature::kNonBlockingInit:
      return "non-blocking init";
    case NcclFeature::kCommSplit:
      return "ncclCommSplit";
    case NcclFeature::kCommShrink:
      return "ncclCommShrink";
  }
  return "?";
}

}  // namespace gradcomm
