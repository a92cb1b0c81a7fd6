// Every environment knob gradcomm reads is declared here, in one place. Values
// are parsed on first use; an override is logged at INFO, a malformed value is
// logged at WARN and the default is kept, except where a knob says otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gradcomm {

enum class LogLevel : int;

// Raw accessors (unset or empty -> nullopt / default).
std::optional<std::string> env_string(const char* name);
int64_t env_int(const char* name, int64_t default_value, int64_t min_value, int64_t max_value);
// env_int's rule for a value already read (`text`: nullopt when unset or empty),
// for settings read through an injected environment.
int64_t env_int_value(const char* name, const std::optional<std::string>& text, int64_t default_value,
                      int64_t min_value, int64_t max_value);
double env_double(const char* name, double default_value, double min_value, double max_value);
// env_double's rule for a value already read (as env_int_value).
double env_double_value(const char* name, const std::optional<std::string>& text, double default_value,
                        double min_value, double max_value);

namespace knobs {
// GRADCOMM_DEBUG: NONE, WARN (default), INFO, TRACE. Read on every call (cheap), so
// tests can change it; log.cpp caches the level.
LogLevel debug_level();
// GRADCOMM_TIMEOUT_S: timeout of init and of every collective, seconds (default
// 300; inf: no limit). A malformed, zero or negative value throws
// gcommInvalidArgument naming the variable (unlike the other knobs, which warn).
double timeout_seconds();
// GRADCOMM_JOB_KEY (the rendezvous store's job key, default "gradcomm") and the
// launchers' variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
// OMPI_COMM_WORLD_*, SLURM_PROCID/NTASKS/LOCALID) are read by
// comm/bootstrap/launch_env.cpp through an injectable lookup, so that its tests need
// not change the process environment.
}  // namespace knobs

}  // namespace gradcomm
