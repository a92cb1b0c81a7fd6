/*
 * gradcomm public C API: the shared types (status, dtype, reduction op, device, tensor, stream,
 * opaque handles, limits, config-struct header). A leaf: it includes no other
 * gradcomm header but export.h, and every other header includes it.
 */
#ifndef GRADCOMM_TYPES_H
#define GRADCOMM_TYPES_H

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
#define GCOMM_VERSION_NUMBER(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define GCOMM_VERSION_CODE GCOMM_VERSION_NUMBER(GCOMM_VERSION_MAJOR, GCOMM_VERSION_MINOR, GCOMM_VERSION_PATCH)
/** @} */

/** Result of every gradcomm call. The values are part of the ABI and never change. */
typedef enum gcommStatus {
  gcommSuccess = 0,         /**< The call did what it says. */
  gcommInvalidArgument = 1, /**< An argument was wrong (NULL, out of range, bad config). */
  gcommInvalidState = 2,    /**< The object is not in a state that allows this call. */
  gcommOutOfMemory = 3,     /**< Host or device memory could not be had. */
  gcommCudaError = 4,       /**< A CUDA call failed. */
  gcommNcclError = 5,       /**< An NCCL call failed. */
  gcommTimeout = 6,         /**< An operation did not complete within its timeout. */
  gcommRemoteError = 7,     /**< A peer rank failed or sent something invalid. */
  gcommAborted = 8,         /**< The object was aborted; it only accepts destroy. */
  gcommNotSupported = 9,    /**< Not supported by this build, device or NCCL version. */
  gcommInternalError = 10,  /**< A bug in gradcomm: please report it with the message. */
  gcommNumStatuses = 11
} gcommStatus_t;

/** Element type of gradient buffers. The values are part of the ABI. */
typedef enum gcommDataType {
  gcommFloat32 = 0,
  gcommFloat16 = 1,
  gcommBfloat16 = 2,
  gcommNumDataTypes = 3
} gcommDataType_t;

/** Reduction operators (of the collectives, and of the host transports' reduction
 *  kernels). Values are part of the ABI. */
typedef enum gcommRedOp {
  gcommSum = 0,
  gcommAvg = 1, /**< sum / world size */
  gcommMax = 2,
  gcommMin = 3,
  gcommNumRedOps = 4
} gcommRedOp_t;

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

/** @name Opaque handles
 *  One per object kind; created and destroyed by the header that owns the kind. @{ */
typedef struct gcommAllocator* gcommAllocator_t;   /**< memory.h */
typedef struct gcommComm* gcommComm_t;             /**< comm.h */
typedef struct gcommGradScaler* gcommGradScaler_t; /**< kernels.h */
typedef struct gcommReducer* gcommReducer_t;       /**< reducer.h */
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GRADCOMM_TYPES_H */
