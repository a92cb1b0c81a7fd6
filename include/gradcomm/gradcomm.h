/*
 * gradcomm — a CUDA/NCCL gradient-communication engine. Public C API (C99).
 *
 * Conventions, for every function in this header and the headers it includes:
 *  - Every function returns a gcommStatus_t (except the few string getters, which
 *    never fail). On failure, gcommGetLastError() returns a message with the detail;
 *    the objects named in the call are left unchanged.
 *  - No C++ exception and no CUDA sticky error ever crosses this boundary.
 *  - Out-pointers must not be NULL.
 *  - Config structs are versioned: declare them with their ..._INITIALIZER macro,
 *    then change the fields you need (see gcommLogConfig_t for the pattern).
 *  - Thread safety is stated per object in each header; the functions of this
 *    file are all safe to call from any thread.
 */
#ifndef GRADCOMM_GRADCOMM_H
#define GRADCOMM_GRADCOMM_H

#include <stddef.h>
#include <stdint.h>

#include "gradcomm/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @name Version
 *  GCOMM_VERSION_CODE is major*10000 + minor*100 + patch. @{ */
#define GCOMM_VERSION_MAJOR 0
#define GCOMM_VERSION_MINOR 1
#define GCOMM_VERSION_PATCH 0
#define GCOMM_VERSION_NUMBER(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define GCOMM_VERSION_CODE \
  GCOMM_VERSION_NUMBER(GCOMM_VERSION_MAJOR, GCOMM_VERSION_MINOR, GCOMM_VERSION_PATCH)
/** @} */

/** Result of every gradcomm call. The values are part of the ABI and never change. */
typedef enum gcommStatus {
  gcommSuccess = 0,          /**< The call did what it says. */
  gcommInvalidArgument = 1,  /**< An argument was wrong (NULL, out of range, bad config). */
  gcommInvalidState = 2,     /**< The object is not in a state that allows this call. */
  gcommOutOfMemory = 3,      /**< Host or device memory could not be had. */
  gcommCudaError = 4,        /**< A CUDA call failed. */
  gcommNcclError = 5,        /**< An NCCL call failed. */
  gcommTimeout = 6,          /**< An operation did not complete within its timeout. */
  gcommRemoteError = 7,      /**< A peer rank failed or sent something invalid. */
  gcommAborted = 8,          /**< The object was aborted; it only accepts destroy. */
  gcommNotSupported = 9,     /**< Not supported by this build, device or NCCL version. */
  gcommInternalError = 10,   /**< A bug in gradcomm: please report it with the message. */
  gcommNumStatuses = 11
} gcommStatus_t;

/** Element type of gradient buffers. The values are part of the ABI. */
typedef enum gcommDataType {
  gcommFloat32 = 0,
  gcommFloat16 = 1,
  gcommBfloat16 = 2,
  gcommNumDataTypes = 3
} gcommDataType_t;

/** Where an object lives: the host, or one CUDA device (by ordinal). */
typedef enum gcommDeviceKind { gcommDeviceHost = 0, gcommDeviceCuda = 1 } gcommDeviceKind_t;

typedef struct gcommDevice {
  gcommDeviceKind_t kind;
  int ordinal; /**< CUDA device ordinal; ignored (and set to -1) for the host. */
} gcommDevice_t;

/** The host as a device descriptor. */
static inline gcommDevice_t gcommHostDevice(void) {
  gcommDevice_t d;
  d.kind = gcommDeviceHost;
  d.ordinal = -1;
  return d;
}

/** CUDA device @p ordinal as a device descriptor. */
static inline gcommDevice_t gcommCudaDevice(int ordinal) {
  gcommDevice_t d;
  d.kind = gcommDeviceCuda;
  d.ordinal = ordinal;
  return d;
}

/** A buffer of gradient elements: @p count elements of @p dtype at @p data.
 *  @p data may be NULL only when @p count is 0. */
typedef struct gcommTensor {
  void* data;
  size_t count;
  gcommDataType_t dtype;
} gcommTensor_t;

/** @name Limits
 *  Checked by every call before it reads a caller's array or buffer, so that an
 *  absurd count is refused with gcommInvalidArgument instead of being followed
 *  into memory that is not there. @{ */
/** The most tensors one call takes in a list (a reducer's gradients, the tensor
 *  lists of the kernel functions). */
#define GCOMM_MAX_TENSORS ((size_t)1 << 24)
/** No non-empty buffer may reach past this address (2^57): no supported platform
 *  maps memory there (x86-64 with 5-level paging ends user space at 2^56, AArch64
 *  at 2^52), so a count that reaches it is a mistake. Pointers with tag bits in
 *  the top byte (AArch64 TBI/MTE, HWASan) are therefore refused: untag them first. */
#define GCOMM_ADDRESS_LIMIT ((uint64_t)1 << 57)
/** @} */

/** A CUDA stream (binary-compatible with cudaStream_t). NULL is the legacy default
 *  stream. For host objects a stream is only an ordering token. */
typedef struct CUstream_st* gcommStream_t;

/** @name Versioned config structs
 *  Every config struct starts with these three fields. The ..._INITIALIZER macro
 *  fills them; a struct not made by it (wrong magic) is refused with
 *  gcommInvalidArgument. A struct from an older, smaller version of this header is
 *  accepted: the fields it lacks take their defaults. @{ */
#define GCOMM_CONFIG_MAGIC 0x67636f6dU /* "gcom" */
#define GCOMM_CONFIG_HEADER(type) sizeof(type), GCOMM_CONFIG_MAGIC, GCOMM_VERSION_CODE
/** @} */

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
 *  one loaded at run time (features newer than the loaded NCCL are disabled). */
GCOMM_API gcommStatus_t gcommGetNcclVersion(int* built, int* loaded);

/** A human-readable report of the environment: gradcomm, CUDA runtime and driver,
 *  NCCL (built and loaded), the GPUs seen (or that none is).
 *  Writes at most @p size bytes including the terminating NUL into @p buffer
 *  (which may be NULL when @p size is 0) and, if @p required is not NULL, the size
 *  needed for the whole report. A report that does not fit is cut at a character
 *  boundary and the call still succeeds; compare *required with @p size. */
GCOMM_API gcommStatus_t gcommGetEnvironmentReport(char* buffer, size_t size, size_t* required);

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

/* The layers' APIs. */
/* @layer-headers: each layer adds its #include line below. */
#include "gradcomm/memory.h"
#include "gradcomm/comm.h"
#include "gradcomm/kernels.h"
#include "gradcomm/reducer.h"

#endif /* GRADCOMM_GRADCOMM_H */
