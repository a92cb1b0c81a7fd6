// Logging. The level comes from GRADCOMM_DEBUG (NONE, WARN (default), INFO, TRACE)
// or gcommSetLogConfig(); each line is prefixed with host, pid and rank (when known):
//   "node7:12345:3 gradcomm WARN message"
//   "node7:12345:3 gradcomm INFO [INIT] message"
// INFO and TRACE lines belong to a subsystem, chosen with GRADCOMM_DEBUG_SUBSYS as
// NCCL_DEBUG_SUBSYS chooses NCCL's: a comma-separated list of INIT, COLL, CALL,
// REDUCER, ALLOC, STORE, ENV or ALL (the default); a leading ^ keeps all but those.
// WARN lines always print. GRADCOMM_DEBUG_FILE sends the lines to files instead of
// stderr, as NCCL_DEBUG_FILE: %h is the host, %p the pid, %r the rank (the
// thread's rank under the local transport; "-" before it is known), %% a percent.
#pragma once

#include <string>

#include "common/error.hpp"
#include "gradcomm/core.h"

namespace gradcomm {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

// Bits of the subsystem mask.
enum class LogSub : unsigned { INIT = 1, COLL = 2, CALL = 4, REDUCER = 8, ALLOC = 16, STORE = 32, ENV = 64 };
constexpr unsigned kAllLogSubs = 127;

LogLevel log_level() noexcept;
unsigned log_subsystems() noexcept;  // the mask GRADCOMM_DEBUG_SUBSYS gives
inline bool log_enabled(LogLevel level, LogSub sub) noexcept {
  return static_cast<int>(log_level()) >= static_cast<int>(level) &&
         (log_subsystems() & static_cast<unsigned>(sub)) != 0;
}
// GRADCOMM_DEBUG_SUBSYS's syntax; an unknown name is reported in *error and ignored.
unsigned parse_log_subsystems(const std::string& text, std::string* error);
// GRADCOMM_DEBUG_FILE's placeholders filled in.
std::string resolve_log_path(const std::string& pattern, const std::string& host, long pid, int rank);
// This machine's host name ("?" when unknown).
std::string host_name();
// The path a per-rank file variable (GRADCOMM_FLIGHT_RECORDER_FILE,
// GRADCOMM_TRACE_FILE) names for `rank`, placeholders filled in; "" when unset.
std::string rank_file_path(const char* variable, int rank);
void set_log_config(LogLevel level, gcommLogCallback_t callback, void* user_data);
void reset_log_config();

// The rank shown in log lines: per thread (the local transport runs ranks as
// threads), else per process, else none (-1).
void set_thread_log_rank(int rank) noexcept;
void set_process_log_rank(int rank) noexcept;

// Formats and emits one line if level (and the subsystem) is enabled. Never throws.
void log_line(LogLevel level, const std::string& message) noexcept;
void log_line(LogLevel level, LogSub sub, const std::string& message) noexcept;
std::string log_prefix();

}  // namespace gradcomm

#define GCOMM_LOG_AT(level, ...)                                              \
  do {                                                                        \
    if (static_cast<int>(::gradcomm::log_level()) >= static_cast<int>(level)) \
      ::gradcomm::log_line(level, ::gradcomm::cat(__VA_ARGS__));              \
  } while (0)
// INFO and TRACE name their subsystem first: GCOMM_INFO(INIT, "rank ", r, ...).
#define GCOMM_LOG_SUB(level, sub, ...)                                                    \
  do {                                                                                    \
    if (::gradcomm::log_enabled(level, ::gradcomm::LogSub::sub))                          \
      ::gradcomm::log_line(level, ::gradcomm::LogSub::sub, ::gradcomm::cat(__VA_ARGS__)); \
  } while (0)
#define GCOMM_WARN(...) GCOMM_LOG_AT(::gradcomm::LogLevel::kWarn, __VA_ARGS__)
#define GCOMM_INFO(sub, ...) GCOMM_LOG_SUB(::gradcomm::LogLevel::kInfo, sub, __VA_ARGS__)
#define GCOMM_TRACE(sub, ...) GCOMM_LOG_SUB(::gradcomm::LogLevel::kTrace, sub, __VA_ARGS__)
