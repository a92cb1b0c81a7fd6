#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "common/env.hpp"

namespace gradcomm {

namespace {
std::atomic<int> g_level{-1};  // -1: not read from the environment yet
std::mutex g_sink_mutex;       // guards the callback and serializes stderr lines
gcommLogCallback_t g_callback = nullptr;
void* g_user_data = nullptr;
std::atomic<int> g_process_rank{-1};
thread_local int t_rank = -1;

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
    default: return "NONE";
  }
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}
}  // namespace

LogLevel log_level() noexcept {
  int level = g_level.load(std::memory_order_relaxed);
  if (level < 0) {
    level = static_cast<int>(knobs::debug_level());
    int expected = -1;
    if (!g_level.compare_exchange_strong(expected, level)) level = expected;
  }
  return static_cast<LogLevel>(level);
}

void set_log_config(LogLevel level, gcommLogCallback_t callback, void* user_data) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_level.store(static_cast<int>(level));
  g_callback = callback;
  g_user_data = user_data;
}

void reset_log_config() {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_level.store(-1);
  g_callback = nullptr;
  g_user_data = nullptr;
}

void set_thread_log_rank(int rank) noexcept { t_rank = rank; }
void set_process_log_rank(int rank) noexcept { g_process_rank.store(rank); }

std::string log_prefix() {
  static const std::string host = host_name();
  int rank = t_rank >= 0 ? t_rank : g_process_rank.load();
  std::string prefix = host + ":" + std::to_string(getpid());
  if (rank >= 0) prefix += ":" + std::to_string(rank);
  return prefix;
}

void log_line(LogLevel level, const std::string& message) noexcept {
  if (level == LogLevel::kNone || static_cast<int>(log_level()) < static_cast<int>(level)) return;
  try {
    std::string line = log_prefix() + " gradcomm " + level_name(level) + " " + message;
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    if (g_callback != nullptr) {
      g_callback(static_cast<gcommLogLevel_t>(level), line.c_str(), g_user_data);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  } catch (...) {
    // Logging must never turn into a failure of the call that logs.
  }
}

}  // namespace gradcomm
