/*
 * gradcomm public C API: the library itself (version, status names, last error,
 * data types, devices, NCCL version, environment report, logging).
 */
#ifndef GRADCOMM_CORE_H
#define GRADCOMM_CORE_H

#include "gradcomm/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Version, status and last error                                            */
/* ------------------------------------------------------------------------- */

/** The version of the loaded library as GCOMM_VERSION_CODE (compare with the
 *  macro to detect a header/library mismatch). */
GCOMM_API gcommStatus_t gcommGetVersion(int* version);

/** "major.minor.patch" of the loaded library. Never NULL. */
GCOMM_API const char* gcommGetVersionString(void);

/** The enumerator's name, e.g. "gcommTimeout". For a value outside the enum it
 *  returns "gcommUnknownStatus" and sets the last-error message. Never NULL. */
GCOMM_API const char* gcommGetStatusName(gcommStatus_t status);

/** A one-line description of the status, e.g. "operation timed out". Never NULL. */
GCOMM_API const char* gcommGetStatusString(gcommStatus_t status);

/** The detailed message of the last failed gradcomm call on this thread, or ""
 *  if none failed yet. Successful calls do not clear it. The pointer stays valid
 *  until the next gradcomm call on this thread. Never NULL. */
GCOMM_API const char* gcommGetLastError(void);

/** Clears this thread's last-error message. */
GCOMM_API void gcommClearLastError(void);

/* ------------------------------------------------------------------------- */
/* Data types and devices                                                    */
/* ------------------------------------------------------------------------- */

/** Bytes per element of @p dtype. */
GCOMM_API gcommStatus_t gcommDataTypeSize(gcommDataType_t dtype, size_t* bytes);

/** "f32", "f16" or "bf16"; "unknown" for a value outside the enum. Never NULL. */
GCOMM_API const char* gcommDataTypeName(gcommDataType_t dtype);

/** Number of usable CUDA devices. A machine without a GPU or without a driver is
 *  not an error: *count is 0 and the call succeeds. */
GCOMM_API gcommStatus_t gcommGetCudaDeviceCount(int* count);

/** NCCL versions as NCCL_VERSION_CODE: the one gradcomm was built against, and the
 *  one loaded at run time (features newer than the loaded NCCL are disabled).
 *  NCCL is loaded on first use, not when libgradcomm.so is (docs/install.md says
 *  where it is looked for); this call loads it, and returns gcommNotSupported with
 *  every place searched when it cannot be found. */
GCOMM_API gcommStatus_t gcommGetNcclVersion(int* built, int* loaded);

/** A human-readable report of the environment: gradcomm, CUDA runtime and driver,
 *  NCCL (built and loaded), the GPUs seen (or that none is).
 *  Writes at most @p size bytes including the terminating NUL into @p buffer
 *  (which may be NULL when @p size is 0) and, if @p required is not NULL, the size
 *  needed for the whole report. A report that does not fit is cut at a character
 *  boundary and the call still succeeds; compare *required with @p size. */
GCOMM_API gcommStatus_t gcommGetEnvironmentReport(char* buffer, size_t size, size_t* required);

/** The same facts as one JSON object (buffer rules as gcommGetEnvironmentReport):
 *  {"gradcomm", "cuda_built" (false for a GRADCOMM_CUDA=OFF build), "cuda_runtime",
 *   "cuda_driver" (null when none),
 *   "nccl": {"built", "loaded", "path", "error"}, "gpus": [{"ordinal", "name", "sm",
 *   "memory_mib", "multiprocessors", "pci_bus_id"}], "no_gpu_reason"}. */
GCOMM_API gcommStatus_t gcommGetEnvironmentJson(char* buffer, size_t size, size_t* required);

/* ------------------------------------------------------------------------- */
/* Logging                                                                   */
/* ------------------------------------------------------------------------- */

/** Log levels. GRADCOMM_DEBUG=WARN|INFO|TRACE (or NONE) sets the initial level. */
typedef enum gcommLogLevel {
  gcommLogNone = 0,
  gcommLogWarn = 1,
  gcommLogInfo = 2,
  gcommLogTrace = 3
} gcommLogLevel_t;

/** Receives each log line (without trailing newline). Called from any gradcomm
 *  thread; it must be thread-safe and must not call back into gradcomm. */
typedef void (*gcommLogCallback_t)(gcommLogLevel_t level, const char* line, void* user_data);

/** Logging configuration (versioned config struct, version 1). */
typedef struct gcommLogConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  /** Lines above this level are dropped. Default: from GRADCOMM_DEBUG, else WARN. */
  gcommLogLevel_t level;
  /** Where lines go. Default NULL: standard error. */
  gcommLogCallback_t callback;
  void* user_data;
} gcommLogConfig_t;

/** Level -1 in the initializer means "keep the level from GRADCOMM_DEBUG". */
#define GCOMM_LOG_LEVEL_FROM_ENV ((gcommLogLevel_t)-1)
#define GCOMM_LOG_CONFIG_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommLogConfig_t), GCOMM_LOG_LEVEL_FROM_ENV, NULL, NULL }

/** Sets the process-wide logging configuration. NULL restores the defaults. */
GCOMM_API gcommStatus_t gcommSetLogConfig(const gcommLogConfig_t* config);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GRADCOMM_CORE_H */
