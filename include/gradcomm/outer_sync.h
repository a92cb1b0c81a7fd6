/*
 * gradcomm outer synchronization (docs/outer-sync.md): training on slow links by
 * synchronizing rarely (DiLoCo). Each rank takes H inner optimizer steps on its
 * own data without any communication; then the ranks average their
 * pseudo-gradients (the outer parameters minus their own) through a reducer, with
 * any of gradcomm's wires (f32, f16/bf16, int8, fp8, fp4), and every rank applies
 * the same outer optimizer step (Nesterov SGD) to the outer parameters and takes
 * them as its parameters. With fragments > 1 the parameters are cut into that many
 * fragments whose syncs take turns, one every H / fragments inner steps (each
 * fragment still every H), so the link carries a fragment at a time (streaming
 * DiLoCo, without its overlap of a sync with the next inner steps).
 *
 *   gcommOuterSyncCreate(comm, params, n, &config, &sync);  // every rank, same params
 *   for each inner step:
 *     forward, backward, the inner optimizer's step on params (no gradient all-reduce)
 *     gcommOuterSyncStep(sync, stream, &synced);            // communicates on some steps
 *
 * The parameters are f32 on the communicator's device; between steps they are the
 * caller's. The outer state (the outer parameters, the outer momentum, the inner
 * step count and each fragment's compression state) is saved and loaded as bytes.
 * One thread at a time per object; destroy it before its communicator.
 */
#ifndef GRADCOMM_OUTER_SYNC_H
#define GRADCOMM_OUTER_SYNC_H

#include "gradcomm/comm.h"
#include "gradcomm/reducer.h"
#include "gradcomm/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gcommOuterSync* gcommOuterSync_t;

/** Outer synchronization configuration (versioned config struct, version 1). */
typedef struct gcommOuterSyncConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint32_t sync_every;     /**< 100: H, inner steps between two syncs of a fragment (>= fragments) */
  uint32_t fragments;      /**< 1: the parameters cut into this many fragments (whole tensors, in
                                registration order, about equal sizes), synced in turn */
  float outer_lr;          /**< 0.7: the outer learning rate (> 0) */
  float outer_momentum;    /**< 0.9: the outer momentum, in [0, 1) */
  int nesterov;            /**< 1: Nesterov momentum (DiLoCo's outer optimizer); 0: heavy ball */
  int wire_dtype;          /**< GCOMM_WIRE_SAME_AS_GRAD (f32), gcommFloat16 or gcommBfloat16: the
                                pseudo-gradients' wire when compression is NULL */
  const char* compression; /**< NULL: none; else a compression's text form for the pseudo-gradients
                                (docs/compression.md): "int8", "fp8", "fp4:block_size=64" */
  size_t bucket_cap_bytes; /**< 25 MiB: the pseudo-gradients' reducer's buckets */
  uint32_t overlap_steps;  /**< 0: a sync is applied by the step that starts it. tau >= 1 (streaming
                                DiLoCo): the pseudo-gradients are taken after the step that starts it,
                                averaged while the next tau inner steps run (on the communicator's lane,
                                or stream), and applied after the tau-th; at most sync_every / fragments */
  float mix;               /**< 0.5: with overlap_steps >= 1, the weight kept of the parameters as the
                                tau steps left them when the outer update lands:
                                param = mix * param + (1 - mix) * outer; in [0, 1) */
} gcommOuterSyncConfig_t;

#define GCOMM_OUTER_SYNC_CONFIG_INITIALIZER                                                            \
  {                                                                                                    \
    GCOMM_CONFIG_HEADER(gcommOuterSyncConfig_t), 100, 1, 0.7f, 0.9f, 1, GCOMM_WIRE_SAME_AS_GRAD, NULL, \
        (size_t)25 << 20, 0, 0.5f                                                                      \
  }

/** Counters since creation (or since the loaded state's creation, for inner_steps). */
typedef struct gcommOuterSyncStats {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t inner_steps;   /**< gcommOuterSyncStep calls */
  uint64_t syncs;         /**< fragment syncs applied */
  uint64_t skipped_syncs; /**< fragment syncs whose averaged pseudo-gradient held Inf/NaN: nothing was
                               applied and the parameters were left as the inner steps made them */
  uint64_t values;        /**< f32 values of the parameters */
  uint64_t bytes_sent;    /**< bytes this rank sent for the syncs, where the transport counts them
                               (gcommCommBytesSent: socket, shm); 0 elsewhere */
} gcommOuterSyncStats_t;

#define GCOMM_OUTER_SYNC_STATS_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommOuterSyncStats_t), 0, 0, 0, 0, 0 }

/** Registers @p num_params f32 parameters (data, count) on the communicator's
 *  device. Every rank calls it with the same shapes; rank 0's values are broadcast
 *  to every rank and become the outer parameters. */
GCOMM_API gcommStatus_t gcommOuterSyncCreate(gcommComm_t comm, const gcommTensor_t* params, size_t num_params,
                                             const gcommOuterSyncConfig_t* config, gcommOuterSync_t* sync);
/** Waits for its work, then frees it. */
GCOMM_API gcommStatus_t gcommOuterSyncDestroy(gcommOuterSync_t sync);
/** After each inner optimizer step, on every rank: counts it and, on the steps where
 *  a fragment is due, syncs it (its pseudo-gradients averaged, the outer step, the
 *  parameters written) in order on @p stream. With overlap_steps tau >= 1 a due
 *  fragment's sync is started (its pseudo-gradients taken and handed to the
 *  communicator) and lands tau calls later. @p synced (may be NULL): the number of
 *  fragments whose outer step this call applied (0 or 1). Applying reads the averaged
 *  pseudo-gradient's Inf/NaN flag, which waits for the stream on a GPU (once per sync).
 *  Keep the parameters' memory as it is while a sync is in flight. */
GCOMM_API gcommStatus_t gcommOuterSyncStep(gcommOuterSync_t sync, gcommStream_t stream, int* synced);
GCOMM_API gcommStatus_t gcommOuterSyncGetStats(gcommOuterSync_t sync, gcommOuterSyncStats_t* stats);
/** The outer state as bytes (size 0: only *required); the same on every rank except
 *  the compressions' error feedback, which is each rank's own. A sync in flight is
 *  waited for (its average, not its application: that still lands on its step) and
 *  saved with its averaged pseudo-gradient. */
GCOMM_API gcommStatus_t gcommOuterSyncSaveState(gcommOuterSync_t sync, void* buffer, size_t size,
                                                size_t* required);
/** Loads a state saved by an object of the same shapes, fragments, overlap_steps and
 *  compression (refused otherwise, changing nothing). The parameters are not written:
 *  load them as the caller saved them. A sync of this object still in flight is
 *  waited for and dropped; one in flight in the state lands on its step. */
GCOMM_API gcommStatus_t gcommOuterSyncLoadState(gcommOuterSync_t sync, const void* data, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* GRADCOMM_OUTER_SYNC_H */
