// The one error type of gradcomm's internals: a status and a message. Internals
// throw it; the C API firewall (api_guard.hpp) turns it into a status and the
// thread-local last-error message.
#pragma once

#include <exception>
#include <sstream>
#include <string>
#include <utility>

#include "gradcomm/types.h"

namespace gradcomm {

class Error : public std::exception {
 public:
  Error(gcommStatus_t status, std::string message) : status_(status), message_(std::move(message)) {}
  gcommStatus_t status() const noexcept { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }

 private:
  gcommStatus_t status_;
  std::string message_;
};

// Concatenates anything printable with operator<<.
template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(gcommStatus_t status, Args&&... args) {
  throw Error(status, cat(std::forward<Args>(args)...));
}

// Throws gcommInvalidArgument with the message unless cond holds.
template <class... Args>
void require(bool cond, Args&&... args) {
  if (!cond) fail(gcommInvalidArgument, std::forward<Args>(args)...);
}

// Pointer-argument check used by every C API function (api_call adds the
// function's name to the message).
#define GCOMM_REQUIRE_NOT_NULL(ptr) \
  ::gradcomm::require((ptr) != nullptr, "argument '" #ptr "' must not be NULL")

// A caught exception as gradcomm's Error, as the C API reports it: an Error as it
// is, std::bad_alloc as gcommOutOfMemory, anything else gcommInternalError. For a
// catch (...) whose cleanup must run whatever was thrown: any exception half-way
// through a call can leave state (a peer protocol, a byte stream) out of step.
Error as_error(const std::exception_ptr& thrown);

const char* status_name(gcommStatus_t status) noexcept;    // nullptr if unknown
const char* status_string(gcommStatus_t status) noexcept;  // nullptr if unknown

// The function a checked call expression calls, for messages (which never show
// source expressions): "cudaMalloc(&p, n * 4)" -> "cudaMalloc",
// "nccl().AllReduce(a, b, ...)" -> "ncclAllReduce", "::cudaFree(p)" -> "cudaFree".
std::string called_function(const char* expr);

// The thread-local last-error message.
void set_last_error(const std::string& message) noexcept;
const char* last_error() noexcept;
void clear_last_error() noexcept;

}  // namespace gradcomm
