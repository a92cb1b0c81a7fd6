#include "common/log.hpp"

#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "common/env.hpp"

namespace gradcomm {

namespace {
std::atomic<int> g_level{-1};             // -1: not read from the environment yet
std::atomic<long long> g_subsystems{-1};  // likewise
std::mutex g_sink_mutex;                  // guards the callback, the files, and serializes lines
gcommLogCallback_t g_callback = nullptr;
void* g_user_data = nullptr;
std::atomic<int> g_process_rank{-1};
thread_local int t_rank = -1;

// GRADCOMM_DEBUG_FILE: read at the first line after a reset; one file per resolved
// path (per rank under the local transport), opened when it first gets a line.
bool g_file_read = false;
std::string g_file_pattern;
std::map<std::string, FILE*> g_files;
bool g_file_failed = false;

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
    default:
      return "NONE";
  }
}

struct SubName {
  LogSub sub;
  const char* name;
};
constexpr SubName kSubNames[] = {
    {LogSub::INIT, "INIT"},   {LogSub::COLL, "COLL"},   {LogSub::CALL, "CALL"}, {LogSub::REDUCER, "REDUCER"},
    {LogSub::ALLOC, "ALLOC"}, {LogSub::STORE, "STORE"}, {LogSub::ENV, "ENV"}};

const char* sub_name(LogSub sub) {
  for (const SubName& s : kSubNames)
    if (s.sub == sub) return s.name;
  return "?";
}

int current_rank() {
  return t_rank >= 0 ? t_rank : g_process_rank.load();
}

void close_files() {
  for (auto& f : g_files) std::fclose(f.second);
  g_files.clear();
  g_file_read = false;
  g_file_pattern.clear();
  g_file_failed = false;
}

// The stream a line goes to (under g_sink_mutex): a GRADCOMM_DEBUG_FILE file, else stderr.
FILE* sink(const std::string& host) {
  if (!g_file_read) {
    g_file_read = true;
    g_file_pattern = env_string("GRADCOMM_DEBUG_FILE").value_or("");
  }
  if (g_file_pattern.empty() || g_file_failed) return stderr;
  const std::string path =
      resolve_log_path(g_file_pattern, host, static_cast<long>(getpid()), current_rank());
  auto it = g_files.find(path);
  if (it != g_files.end()) return it->second;
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    g_file_failed = true;  // said once; every later line goes to stderr
    std::fprintf(stderr, "%s gradcomm WARN GRADCOMM_DEBUG_FILE: cannot write '%s'; logging to stderr\n",
                 log_prefix().c_str(), path.c_str());
    return stderr;
  }
  g_files.emplace(path, f);
  return f;
}

void emit(LogLevel level, const std::string& line) {
  static const std::string host = host_name();
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  if (g_callback != nullptr) {
    g_callback(static_cast<gcommLogLevel_t>(level), line.c_str(), g_user_data);
    return;
  }
  FILE* out = sink(host);
  const bool written = std::fprintf(out, "%s\n", line.c_str()) >= 0;
  if (out == stderr) return;
  // A crash or a hang must not lose the last lines: flushed at once. A file that
  // cannot take them (a full disk, /dev/full) is said once, like one that cannot
  // be opened, and this line and every later one go to stderr.
  if (std::fflush(out) == 0 && written && std::ferror(out) == 0) return;
  const int err = errno;
  g_file_failed = true;
  std::fprintf(stderr, "%s gradcomm WARN GRADCOMM_DEBUG_FILE: cannot write '%s' (%s); logging to stderr\n",
               log_prefix().c_str(), g_file_pattern.c_str(), std::strerror(err));
  std::fprintf(stderr, "%s\n", line.c_str());
}
}  // namespace

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::string rank_file_path(const char* variable, int rank) {
  auto pattern = env_string(variable);
  if (!pattern || pattern->empty()) return "";
  return resolve_log_path(*pattern, host_name(), static_cast<long>(getpid()), rank);
}

LogLevel log_level() noexcept {
  int level = g_level.load(std::memory_order_relaxed);
  if (level < 0) {
    level = static_cast<int>(knobs::debug_level());
    int expected = -1;
    if (!g_level.compare_exchange_strong(expected, level)) level = expected;
  }
  return static_cast<LogLevel>(level);
}

unsigned parse_log_subsystems(const std::string& text, std::string* error) {
  std::string list = text;
  const bool invert = !list.empty() && list[0] == '^';
  if (invert) list.erase(0, 1);
  unsigned mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = list.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    if (strcasecmp(name.c_str(), "ALL") == 0) {
      mask = kAllLogSubs;
      continue;
    }
    bool known = false;
    for (const SubName& s : kSubNames)
      if (strcasecmp(name.c_str(), s.name) == 0) {
        mask |= static_cast<unsigned>(s.sub);
        known = true;
      }
    if (!known && error != nullptr) *error += cat(error->empty() ? "" : ", ", "'", name, "'");
  }
  if (text.empty()) return kAllLogSubs;
  return invert ? kAllLogSubs & ~mask : mask;
}

unsigned log_subsystems() noexcept {
  long long mask = g_subsystems.load(std::memory_order_relaxed);
  if (mask < 0) {
    std::string unknown;
    try {
      mask = parse_log_subsystems(env_string("GRADCOMM_DEBUG_SUBSYS").value_or(""), &unknown);
    } catch (...) {
      mask = kAllLogSubs;
    }
    long long expected = -1;
    if (!g_subsystems.compare_exchange_strong(expected, mask)) {
      mask = expected;
    } else if (!unknown.empty()) {
      std::fprintf(stderr,
                   "%s gradcomm WARN GRADCOMM_DEBUG_SUBSYS: %s not among INIT, COLL, CALL, REDUCER, "
                   "ALLOC, STORE, ENV, ALL; ignored\n",
                   log_prefix().c_str(), unknown.c_str());
    }
  }
  return static_cast<unsigned>(mask);
}

std::string resolve_log_path(const std::string& pattern, const std::string& host, long pid, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'h')
      out += host;
    else if (c == 'p')
      out += std::to_string(pid);
    else if (c == 'r')
      out += rank >= 0 ? std::to_string(rank) : std::string("-");
    else if (c == '%')
      out += '%';
    else
      out += std::string("%") + c;  // not a placeholder: kept as written
  }
  return out;
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
  g_subsystems.store(-1);
  g_callback = nullptr;
  g_user_data = nullptr;
  close_files();
}

void set_thread_log_rank(int rank) noexcept {
  t_rank = rank;
}
void set_process_log_rank(int rank) noexcept {
  g_process_rank.store(rank);
}

std::string log_prefix() {
  static const std::string host = host_name();
  int rank = current_rank();
  std::string prefix = host + ":" + std::to_string(getpid());
  if (rank >= 0) prefix += ":" + std::to_string(rank);
  return prefix;
}

void log_line(LogLevel level, const std::string& message) noexcept {
  if (level == LogLevel::kNone || static_cast<int>(log_level()) < static_cast<int>(level)) return;
  try {
    emit(level, log_prefix() + " gradcomm " + level_name(level) + " " + message);
  } catch (...) {
    // Logging must never turn into a failure of the call that logs.
  }
}

void log_line(LogLevel level, LogSub sub, const std::string& message) noexcept {
  if (!log_enabled(level, sub)) return;
  log_line(level, cat("[", sub_name(sub), "] ", message));
}

}  // namespace gradcomm
