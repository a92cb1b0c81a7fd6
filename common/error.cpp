#include "common/error.hpp"

#include <cctype>
#include <new>

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

Error as_error(const std::exception_ptr& thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const Error& e) {
    return e;
  } catch (const std::bad_alloc&) {
    return Error(gcommOutOfMemory, "out of host memory");
  } catch (const std::exception& e) {
    return Error(gcommInternalError, cat("internal error: ", e.what()));
  } catch (...) {
    return Error(gcommInternalError, "internal error: unknown exception");
  }
}

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

const char* last_error() noexcept {
  return last_error_storage().c_str();
}

void clear_last_error() noexcept {
  last_error_storage().clear();
}

std::string called_function(const char* expr) {
  const std::string e = expr != nullptr ? expr : "";
  auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
  std::string prefix;  // an accessor call before the function, "nccl()."
  for (size_t i = 0; i < e.size();) {
    const size_t start = i;
    while (i < e.size() && is_name(e[i])) ++i;
    std::string name = e.substr(start, i - start);
    const size_t colons = name.rfind("::");
    if (colons != std::string::npos) name = name.substr(colons + 2);
    if (i == start) {
      ++i;
    } else if (i < e.size() && e[i] == '(') {
      if (e.compare(i, 3, "().") == 0) {
        prefix = name;
        i += 3;
        continue;
      }
      return prefix + name;
    }
  }
  return e;
}

}  // namespace gradcomm
