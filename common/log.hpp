// Logging. The level comes from GRADCOMM_DEBUG (NONE, WARN (default), INFO, TRACE)
// or gcommSetLogConfig(); each line is prefixed with host, pid and rank (when known):
//   "node7:12345:3 gradcomm WARN message"
#pragma once

#include <string>

#include "common/error.hpp"

namespace gradcomm {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

LogLevel log_level() noexcept;
void set_log_config(LogLevel level, gcommLogCallback_t callback, void* user_data);
void reset_log_config();

// The rank shown in log lines: per thread (the local transport runs ranks as
// threads), else per process, else none (-1).
void set_thread_log_rank(int rank) noexcept;
void set_process_log_rank(int rank) noexcept;

// Formats and emits one line if level is enabled. Never throws.
void log_line(LogLevel level, const std::string& message) noexcept;
std::string log_prefix();

}  // namespace gradcomm

#define GCOMM_LOG_AT(level, ...)                                       \
  do {                                                                 \
    if (static_cast<int>(::gradcomm::log_level()) >= static_cast<int>(level)) \
      ::gradcomm::log_line(level, ::gradcomm::cat(__VA_ARGS__));        \
  } while (0)
#define GCOMM_WARN(...) GCOMM_LOG_AT(::gradcomm::LogLevel::kWarn, __VA_ARGS__)
#define GCOMM_INFO(...) GCOMM_LOG_AT(::gradcomm::LogLevel::kInfo, __VA_ARGS__)
#define GCOMM_TRACE(...) GCOMM_LOG_AT(::gradcomm::LogLevel::kTrace, __VA_ARGS__)
