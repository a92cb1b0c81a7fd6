/*
 * gradcomm memory layer: a stream-ordered caching allocator (C99).
 *
 * An allocator is bound to one device for its whole life and keeps the memory it
 * gets from its upstream (cudaMalloc, cudaHostAlloc or aligned host allocation)
 * in a cache, so that a malloc/free pair on a hot path costs a lock and a lookup
 * instead of a driver call. Embedders may use it on its own.
 *
 * Stream contract (the same as cudaMallocAsync/cudaFreeAsync):
 *  - gcommAllocatorMalloc(a, n, s, &p): p may be used by work enqueued on stream s
 *    after the call. Using it on another stream needs the caller's own ordering
 *    (events) plus gcommAllocatorRecordStream(a, p, other).
 *  - gcommAllocatorFree(a, p, s): all uses of p are ordered before the current end
 *    of stream s, except uses on streams named by RecordStream (and the allocating
 *    stream, if it differs from s). No call waits for the device: the block is
 *    reusable by later work on s at once, and on other streams only after an event
 *    recorded on every stream that used it has completed.
 *  - Streams are gcommStream_t (cudaStream_t) of the allocator's device. NULL is
 *    the legacy default stream. For host memory a stream is only an ordering
 *    token: host work is synchronous.
 *  - Only gcommAllocatorReleaseCached, gcommAllocatorDestroy, and a malloc that
 *    runs out of memory may wait for streams (for blocks still in use on them).
 *
 * Thread contract: every function may be called from any thread, concurrently,
 * on the same allocator (one lock per allocator), except gcommAllocatorDestroy,
 * which must not race with any other call on the same allocator. Every call that
 * touches CUDA switches to the allocator's device and restores the caller's
 * current device before returning; no call ever touches another device.
 */
#ifndef GRADCOMM_MEMORY_H
#define GRADCOMM_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "gradcomm/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What memory an allocator hands out. The values are part of the ABI. */
typedef enum gcommMemoryKind {
  gcommMemoryDefault = 0,    /**< Device memory for a CUDA device, host memory for the host. */
  gcommMemoryDevice = 1,     /**< cudaMalloc on the allocator's CUDA device. */
  gcommMemoryPinnedHost = 2, /**< cudaHostAlloc, in the CUDA device's context (needs a CUDA device). */
  gcommMemoryHost = 3,       /**< Plain host memory (256-byte aligned); no CUDA call at all. */
  gcommNumMemoryKinds = 4
} gcommMemoryKind_t;

/** "No limit" for the size fields of gcommAllocatorConfig_t. */
#define GCOMM_ALLOCATOR_UNLIMITED UINT64_MAX

/** Allocator configuration (versioned config struct, version 1). */
typedef struct gcommAllocatorConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  /** Default gcommMemoryDefault. */
  gcommMemoryKind_t kind;
  /** Reserved, set to 0 (keeps the next fields 8-byte aligned). */
  uint32_t reserved0;
  /** The most bytes the allocator reserves from its upstream, cached or not. A
   *  malloc that would exceed it fails with gcommOutOfMemory (after emptying the
   *  cache) although the device may have memory left: use it to share a device.
   *  Must not be 0. Default GCOMM_ALLOCATOR_UNLIMITED. */
  uint64_t pool_limit;
  /** After a free, when reserved bytes exceed this, wholly free segments are
   *  given back to the upstream until they do not (without waiting for any
   *  stream). 0 keeps nothing cached. Default GCOMM_ALLOCATOR_UNLIMITED (keep
   *  everything until gcommAllocatorReleaseCached). */
  uint64_t release_threshold;
  /** Cached blocks of at least this size are never split, and requests smaller
   *  than it never take them; requests of at least this size take a cached block
   *  only if it wastes less than 20 MiB. Lower it when large, varying sizes
   *  fragment the cache. At least 20 MiB. Default GCOMM_ALLOCATOR_UNLIMITED. */
  uint64_t max_split_size;
} gcommAllocatorConfig_t;

#define GCOMM_ALLOCATOR_CONFIG_INITIALIZER                                                         \
  {                                                                                                \
    GCOMM_CONFIG_HEADER(gcommAllocatorConfig_t), gcommMemoryDefault, 0, GCOMM_ALLOCATOR_UNLIMITED, \
        GCOMM_ALLOCATOR_UNLIMITED, GCOMM_ALLOCATOR_UNLIMITED                                       \
  }

/** One statistic: its current value, its peak since creation or the last
 *  gcommAllocatorResetPeakStats, and the cumulative increases and decreases. */
typedef struct gcommAllocatorStat {
  uint64_t current;
  uint64_t peak;
  uint64_t total_allocated;
  uint64_t total_freed;
} gcommAllocatorStat_t;

/** Allocator statistics (versioned like a config struct: declare it with
 *  GCOMM_ALLOCATOR_STATS_INITIALIZER; the library fills the fields that both its
 *  version and the caller's know). Block sizes are rounded sizes. */
typedef struct gcommAllocatorStats {
  size_t size;
  uint32_t magic;
  uint32_t version;
  gcommAllocatorStat_t allocated_bytes;  /**< Bytes of blocks held by callers. */
  gcommAllocatorStat_t requested_bytes;  /**< Bytes callers asked for (before rounding). */
  gcommAllocatorStat_t reserved_bytes;   /**< Bytes of segments taken from the upstream. */
  gcommAllocatorStat_t allocated_blocks; /**< Blocks held by callers. */
  gcommAllocatorStat_t active_blocks;    /**< Held blocks plus freed blocks still waiting for streams. */
  gcommAllocatorStat_t segments;         /**< Segments taken from the upstream. */
  uint64_t malloc_calls;                 /**< Mallocs of more than 0 bytes, failed ones included. */
  uint64_t free_calls;                   /**< Frees of a non-NULL pointer that succeeded. */
  uint64_t cache_hits;                   /**< Mallocs served from the cache, with no upstream call. */
  uint64_t upstream_allocs;              /**< Successful upstream allocations (cudaMalloc, ...). */
  uint64_t upstream_frees;               /**< Upstream deallocations (cudaFree, ...). */
  uint64_t ooms;                         /**< Mallocs that failed with gcommOutOfMemory. */
  uint64_t cache_flushes;   /**< Times the cache was emptied (out-of-memory retry or ReleaseCached). */
  uint64_t events_recorded; /**< Events recorded to order cross-stream reuse. */
} gcommAllocatorStats_t;

#define GCOMM_ALLOCATOR_STAT_ZERO_ \
  { 0, 0, 0, 0 }
#define GCOMM_ALLOCATOR_STATS_INITIALIZER                                                               \
  {                                                                                                     \
    GCOMM_CONFIG_HEADER(gcommAllocatorStats_t), GCOMM_ALLOCATOR_STAT_ZERO_, GCOMM_ALLOCATOR_STAT_ZERO_, \
        GCOMM_ALLOCATOR_STAT_ZERO_, GCOMM_ALLOCATOR_STAT_ZERO_, GCOMM_ALLOCATOR_STAT_ZERO_,             \
        GCOMM_ALLOCATOR_STAT_ZERO_, 0, 0, 0, 0, 0, 0, 0, 0                                              \
  }

/** Creates an allocator for @p device (gcommHostDevice() or gcommCudaDevice(i)).
 *  @p config may be NULL (defaults). Reserves nothing yet; for a CUDA device it
 *  only checks that the device is visible. */
GCOMM_API gcommStatus_t gcommAllocatorCreate(gcommDevice_t device, const gcommAllocatorConfig_t* config,
                                             gcommAllocator_t* allocator);

/** Destroys the allocator and gives all its memory back to the upstream. Refused
 *  with gcommInvalidState (the allocator stays usable) while blocks are still
 *  allocated: the message gives their count and bytes. May wait for streams that
 *  freed blocks are still waiting for. A destroyed handle is refused by every
 *  function with gcommInvalidArgument. */
GCOMM_API gcommStatus_t gcommAllocatorDestroy(gcommAllocator_t allocator);

/** Allocates @p bytes for use on @p stream (see the stream contract above).
 *  *ptr is at least 256-byte aligned. @p bytes == 0 succeeds with *ptr = NULL
 *  and changes nothing. A size too large to round is gcommInvalidArgument.
 *  When no memory can be had even after emptying the cache, the call fails with
 *  gcommOutOfMemory and a message giving the requested bytes, the device, the
 *  allocated, reserved and free bytes, and the setting to change. */
GCOMM_API gcommStatus_t gcommAllocatorMalloc(gcommAllocator_t allocator, size_t bytes, gcommStream_t stream,
                                             void** ptr);

/** Frees @p ptr (returned by gcommAllocatorMalloc of this allocator) at the
 *  current end of @p stream. NULL is a no-op. A pointer this allocator does not
 *  hold (never allocated, already freed, inside a block) is gcommInvalidArgument
 *  and changes nothing; a pointer freed and then handed out again cannot be told
 *  from a live one. */
GCOMM_API gcommStatus_t gcommAllocatorFree(gcommAllocator_t allocator, void* ptr, gcommStream_t stream);

/** Declares that @p ptr is also used by work on @p stream, so that its free
 *  waits for that work (torch's Tensor.record_stream). NULL is a no-op. */
GCOMM_API gcommStatus_t gcommAllocatorRecordStream(gcommAllocator_t allocator, void* ptr,
                                                   gcommStream_t stream);

/** Copies the statistics into *stats (declared with
 *  GCOMM_ALLOCATOR_STATS_INITIALIZER). */
GCOMM_API gcommStatus_t gcommAllocatorGetStats(gcommAllocator_t allocator, gcommAllocatorStats_t* stats);

/** A human-readable table of the statistics, like torch.cuda.memory_summary().
 *  Size-query pattern of gcommGetEnvironmentReport: writes at most @p size bytes
 *  including the NUL into @p buffer (NULL allowed when @p size is 0) and, if
 *  @p required is not NULL, the size of the whole summary. */
GCOMM_API gcommStatus_t gcommAllocatorGetSummary(gcommAllocator_t allocator, char* buffer, size_t size,
                                                 size_t* required);

/** Gives every wholly free cached segment back to the upstream (empty cache).
 *  Waits for streams that freed blocks are still waiting for. */
GCOMM_API gcommStatus_t gcommAllocatorReleaseCached(gcommAllocator_t allocator);

/** Sets every statistic's peak to its current value. */
GCOMM_API gcommStatus_t gcommAllocatorResetPeakStats(gcommAllocator_t allocator);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GRADCOMM_MEMORY_H */
