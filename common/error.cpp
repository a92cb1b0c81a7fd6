#include "common/error.hpp"

namespace gradcomm {

namespace {
struct StatusInfo {
  const char* name;
  const char* description;
};
constexpr StatusInfo kStatusInfo[gcommNumStatuses] = {
    {"gcommSuccess", "success"},
    {"gcommInvalidArgument", "invalid argument"},
    {"gcommInvalidState", "invalid state for this call"},
    {"gcommOutOfMemory", "out of memory"},
    {"gcommCudaError", "CUDA error"},
    {"gcommNcclError", "NCCL error"},
    {"gcommTimeout", "operation timed out"},
    {"gcommRemoteError", "a peer rank failed"},
    {"gcommAborted", "aborted"},
    {"gcommNotSupported", "not supported"},
    {"gcommInternalError", "internal error (a bug in gradcomm)"},
};

bool known(gcommStatus_t status) {
  return static_cast<int>(status) >= 0 && static_cast<int>(status) < gcommNumStatuses;
}

std::string& last_error_storage() {
  thread_local std::string message;
  return message;
}
}  // namespace

const char* status_name(gcommStatus_t status) noexcept {
  return known(status) ? kStatusInfo[status].name : nullptr;
}

const char* status_string(gcommStatus_t status) noexcept {
  return known(status) ? kStatusInfo[status].description : nullptr;
}

void set_last_error(const std::string& message) noexcept {
  try {
    last_error_storage() = message;
  } catch (...) {
    // Out of memory while recording an error: keep whatever fits.
    last_error_storage().clear();
  }
}

const char* last_error() noexcept { return last_error_storage().c_str(); }

void clear_last_error() noexcept { last_error_storage().clear(); }

}  // namespace gradcomm
