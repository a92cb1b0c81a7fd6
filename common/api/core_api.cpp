// C API: status names, last error, data types, devices, logging.
#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/env.hpp"

using namespace gradcomm;

extern "C" {

GCOMM_API const char* gcommGetStatusName(gcommStatus_t status) {
  const char* name = status_name(status);
  if (name != nullptr) return name;
  set_last_error(cat("gcommGetStatusName: ", static_cast<int>(status),
                     " is not a gcommStatus_t value (valid: 0..", gcommNumStatuses - 1, ")"));
  return "gcommUnknownStatus";
}

GCOMM_API const char* gcommGetStatusString(gcommStatus_t status) {
  const char* text = status_string(status);
  if (text != nullptr) return text;
  set_last_error(cat("gcommGetStatusString: ", static_cast<int>(status),
                     " is not a gcommStatus_t value (valid: 0..", gcommNumStatuses - 1, ")"));
  return "unknown status";
}

GCOMM_API const char* gcommGetLastError(void) {
  return last_error();
}

GCOMM_API void gcommClearLastError(void) {
  clear_last_error();
}

GCOMM_API gcommStatus_t gcommDataTypeSize(gcommDataType_t dtype, size_t* bytes) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(bytes);
    *bytes = dtype_size(checked_dtype(dtype, "dtype"));
  });
}

GCOMM_API const char* gcommDataTypeName(gcommDataType_t dtype) {
  return is_valid_dtype(dtype) ? dtype_name(dtype) : "unknown";
}

GCOMM_API gcommStatus_t gcommGetCudaDeviceCount(int* count) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(count);
    *count = cuda_device_count();
  });
}

GCOMM_API gcommStatus_t gcommSetLogConfig(const gcommLogConfig_t* config) {
  return GCOMM_API_CALL({
    if (config == nullptr) {
      reset_log_config();
      return;
    }
    const gcommLogConfig_t defaults = GCOMM_LOG_CONFIG_INITIALIZER;
    gcommLogConfig_t c = read_config(config, defaults, "gcommLogConfig_t");
    int level = static_cast<int>(c.level);
    require(level == -1 || (level >= gcommLogNone && level <= gcommLogTrace),
            "gcommLogConfig_t.level: ", level,
            " is not a gcommLogLevel_t (0..3, or GCOMM_LOG_LEVEL_FROM_ENV)");
    LogLevel effective = level == -1 ? knobs::debug_level() : static_cast<LogLevel>(level);
    set_log_config(effective, c.callback, c.user_data);
  });
}

}  // extern "C"
