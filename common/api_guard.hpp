// The exception firewall: every exported C function runs its body through
// api_call(), which catches everything, maps it to a status and records the
// last-error message. Nothing thrown inside ever reaches a C caller.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm {

template <class Body>
gcommStatus_t api_call(const char* function, Body&& body) noexcept {
  try {
    body();
    return gcommSuccess;
  } catch (const Error& e) {
    set_last_error(cat(function, ": ", e.message()));
    log_line(LogLevel::kInfo, LogSub::CALL,
             cat(function, " failed (", status_name(e.status()), "): ", e.message()));
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(function) + ": out of host memory");  // no allocation beyond the message's
    return gcommOutOfMemory;
  } catch (...) {
    try {
      const Error e = as_error(std::current_exception());
      set_last_error(cat(function, ": ", e.message()));
      return e.status();
    } catch (...) {
      set_last_error(std::string(function) + ": out of host memory");
      return gcommOutOfMemory;
    }
  }
}

}  // namespace gradcomm

// In an exported function: `return GCOMM_API_CALL({ ...body... });`
#define GCOMM_API_CALL(...) ::gradcomm::api_call(__func__, [&]() __VA_ARGS__)
