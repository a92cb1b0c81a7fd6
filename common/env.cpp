#include "common/env.hpp"

#include <strings.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  return std::string(value);
}

int64_t env_int(const char* name, int64_t default_value, int64_t min_value, int64_t max_value) {
  return env_int_value(name, env_string(name), default_value, min_value, max_value);
}

int64_t env_int_value(const char* name, const std::optional<std::string>& text, int64_t default_value,
                      int64_t min_value, int64_t max_value) {
  if (!text || text->empty()) return default_value;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text->c_str(), &end, 10);
  if (errno != 0 || end == text->c_str() || *end != '\0' || value < min_value || value > max_value) {
    GCOMM_WARN(name, "='", *text, "' is not an integer in [", min_value, ", ", max_value,
               "]; using the default ", default_value);
    return default_value;
  }
  GCOMM_INFO(ENV, name, " set by environment to ", value);
  return value;
}

double env_double(const char* name, double default_value, double min_value, double max_value) {
  return env_double_value(name, env_string(name), default_value, min_value, max_value);
}

double env_double_value(const char* name, const std::optional<std::string>& text, double default_value,
                        double min_value, double max_value) {
  if (!text || text->empty()) return default_value;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text->c_str(), &end);
  if (errno != 0 || end == text->c_str() || *end != '\0' || !(value >= min_value && value <= max_value)) {
    GCOMM_WARN(name, "='", *text, "' is not a number in [", min_value, ", ", max_value,
               "]; using the default ", default_value);
    return default_value;
  }
  GCOMM_INFO(ENV, name, " set by environment to ", value);
  return value;
}

namespace knobs {

LogLevel debug_level() {
  // Not logged through GCOMM_WARN: the log level is what is being decided here.
  auto text = env_string("GRADCOMM_DEBUG");
  if (!text) return LogLevel::kWarn;
  if (strcasecmp(text->c_str(), "NONE") == 0) return LogLevel::kNone;
  if (strcasecmp(text->c_str(), "WARN") == 0) return LogLevel::kWarn;
  if (strcasecmp(text->c_str(), "INFO") == 0) return LogLevel::kInfo;
  if (strcasecmp(text->c_str(), "TRACE") == 0) return LogLevel::kTrace;
  std::fprintf(stderr,
               "%s gradcomm WARN GRADCOMM_DEBUG='%s' is not one of NONE, WARN, INFO, TRACE; using WARN\n",
               log_prefix().c_str(), text->c_str());
  return LogLevel::kWarn;
}

double timeout_seconds() {
  auto text = env_string("GRADCOMM_TIMEOUT_S");
  if (!text) return 300.0;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text->c_str(), &end);
  // A typo must not turn a 5 s timeout into the default 300 s: refused, named.
  // Huge values and inf are fine: deadlines saturate (common/deadline.hpp).
  if (end == text->c_str() || *end != '\0' || !(value >= 0.001))
    fail(
        gcommInvalidArgument, "GRADCOMM_TIMEOUT_S='", *text,
        "' is not a timeout: give seconds >= 0.001, such as 30 or 2.5 (inf: wait without limit), or unset it "
        "for 300");
  GCOMM_INFO(ENV, "GRADCOMM_TIMEOUT_S set by environment to ", value);
  return value;
}

}  // namespace knobs
}  // namespace gradcomm
