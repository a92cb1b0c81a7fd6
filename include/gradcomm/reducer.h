/*
 * gradcomm reducer: what a framework calls during backward. Gradients are
 * registered once; each step, the framework marks them ready as backward
 * produces them, and gradcomm packs complete buckets (one launch each),
 * all-reduces them and runs each bucket's fused epilogue (unpack, cast back,
 * multiply by 1/(world_size * loss_scale), the Inf/NaN flag) on its own stream
 * while backward goes on and the next buckets communicate. finalize() orders the
 * caller's stream after it all and runs the grad scaler's update. No host
 * synchronization anywhere unless asked for.
 *
 * A step:
 *   gcommReducerBeginStep(r, sync)         sync = 0: gradient accumulation, nothing is sent
 *   gcommReducerMarkReady(r, i, stream)    once per gradient, in any order, after the
 *                                          work that produced it was enqueued on `stream`
 *   gcommReducerFinalize(r, stream, &skip) the averaged gradients are ready on `stream`
 *
 * Thread and stream contract:
 *  - A reducer is driven by one thread at a time (its rank's thread); calls are
 *    serialized internally, so hooks running on several threads are safe.
 *  - On a CUDA communicator, packing, the collectives and the epilogue run on a
 *    stream the reducer owns, ordered after the streams named in mark-ready calls
 *    with events; the scaler's update runs on the stream given to finalize.
 *  - From mark-ready until finalize returns, a gradient belongs to the reducer:
 *    neither read nor write it (its bucket may be written back at any time).
 *  - On a host communicator with peers, a bucket's pack, all-reduce and epilogue
 *    run on the communicator's own thread (its lane), so they overlap the
 *    caller's backward; finalize waits for them. A collective the caller issues
 *    on that communicator mid-step waits for the lane first (program order).
 *    GRADCOMM_REDUCER_HOST_THREAD=0 runs everything in the calling thread.
 *  - Destroy the reducer before its communicator and its scaler.
 *
 * Bucket plan: gradients in reverse registration order, one open bucket per
 * dtype, a small first bucket, buckets capped by wire bytes (docs/reducer.md).
 * After the first synced step the plan is rebuilt once in the order rank 0 saw
 * the gradients become ready (broadcast, so every rank gets the same plan); that
 * step's finalize waits for the broadcast on the host, once.
 */
#ifndef GRADCOMM_REDUCER_H
#define GRADCOMM_REDUCER_H

#include "gradcomm/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** wire_dtype value: send each gradient in its own dtype. */
#define GCOMM_WIRE_SAME_AS_GRAD (-1)

/** What finalize does with a gradient that was never marked ready in a synced step. */
typedef enum gcommUnusedGrads {
  gcommUnusedError = 0, /**< finalize fails with gcommInvalidState listing the indices */
  gcommUnusedAsZero = 1 /**< the gradient contributes zero and receives the others' average */
} gcommUnusedGrads_t;

/** What a synced step leaves on each rank. The values are part of the ABI. */
typedef enum gcommReducerMode {
  gcommReducerAllReduce = 0, /**< every rank gets every averaged gradient (DDP) */
  gcommReducerSharded = 1    /**< each bucket is reduce-scattered: every rank gets only its shard of
                                  each bucket, 1/world of it (ZeRO, FSDP, distributed optimizers);
                                  see gcommReducerGetShard and gcommReducerAllGatherParams */
} gcommReducerMode_t;

/** How the bucket cap is chosen (docs/reducer.md "Buckets sized for the link").
 *  The values are part of the ABI. */
typedef enum gcommBucketAutotune {
  gcommBucketAutotuneAuto = 0, /**< on for a host communicator with peers whose bucket_cap_bytes and
                                    first_bucket_bytes are the defaults (not with grad_as_bucket_view or
                                    sharded mode); GRADCOMM_REDUCER_BUCKET_AUTOTUNE=0/1 decides instead
                                    when set. Every rank takes rank 0's decision at the first synced
                                    step (the probe and the all-gather are collectives) */
  gcommBucketAutotuneOn = 1,   /**< always (refused on a GPU, with grad_as_bucket_view, sharded) */
  gcommBucketAutotuneOff = 2   /**< keep bucket_cap_bytes */
} gcommBucketAutotune_t;

/** Reducer configuration (versioned config struct, version 2: bucket_autotune). */
typedef struct gcommReducerConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  size_t bucket_cap_bytes;   /**< 25 MiB: buckets close when their wire bytes reach it */
  size_t first_bucket_bytes; /**< 1 MiB: the first bucket of each dtype, so communication starts early */
  int wire_dtype;            /**< GCOMM_WIRE_SAME_AS_GRAD, or gcommFloat16 / gcommBfloat16 / gcommFloat32 */
  int grad_as_bucket_view;   /**< 0; 1: gradcomm allocates the gradients inside its buckets
                                  (register them with data = NULL, get their addresses with
                                  gcommReducerGradData); packing then costs nothing */
  int average;               /**< 1: divide by the world size; 0: sum */
  int unused_grads;          /**< gcommUnusedGrads_t, gcommUnusedError */
  int rebuild_buckets;       /**< 1: rebuild the plan once after the first synced step (not with views) */
  int mode;                  /**< gcommReducerMode_t, gcommReducerAllReduce (was reserved_v1, which had
                                  to be 0: the same layout and meaning) */
  gcommGradScaler_t scaler;  /**< NULL, or a scaler on the communicator's device: the epilogue
                                   multiplies by its 1/scale and finalize runs its update */
  /* version 2 */
  int bucket_autotune; /**< gcommBucketAutotune_t, gcommBucketAutotuneAuto: after synced step 4 the
                            bucket cap is chosen from the link and the gradients' arrival measured on
                            steps 2-4, the same on every rank (gcommReducerGetBucketAutotune) */
  int reserved_v2;     /**< 0 */
} gcommReducerConfig_t;

#define GCOMM_REDUCER_CONFIG_INITIALIZER                                                                   \
  {                                                                                                        \
    GCOMM_CONFIG_HEADER(gcommReducerConfig_t), (size_t)25 << 20, (size_t)1 << 20, GCOMM_WIRE_SAME_AS_GRAD, \
        0, 1, gcommUnusedError, 1, 0, NULL, gcommBucketAutotuneAuto, 0                                     \
  }

/** Counters since creation. */
typedef struct gcommReducerStats {
  uint64_t synced_steps;       /**< finalized synced steps */
  uint64_t accumulation_steps; /**< finalized no-sync steps */
  uint64_t buckets_launched;   /**< all-reduces issued */
  size_t num_buckets;          /**< in the current plan */
  size_t wire_bytes_per_step;  /**< bytes each rank contributes per synced step */
  size_t grad_bytes;           /**< bytes of the registered gradients */
  int rebuilt;                 /**< 1 once the plan was rebuilt in the observed order */
  int reserved;
} gcommReducerStats_t;

/** Registers @p num_grads gradients (data, count, dtype) in parameter order on the
 *  communicator's device. With grad_as_bucket_view every data must be NULL. */
GCOMM_API gcommStatus_t gcommReducerCreate(gcommComm_t comm, const gcommTensor_t* grads, size_t num_grads,
                                           const gcommReducerConfig_t* config, gcommReducer_t* reducer);
/** Waits for the reducer's work, then frees it. */
GCOMM_API gcommStatus_t gcommReducerDestroy(gcommReducer_t reducer);

/** Starts a step. @p sync = 0: an accumulation step (mark-ready calls are checked,
 *  nothing is sent; the next synced step reduces the accumulated sum). */
GCOMM_API gcommStatus_t gcommReducerBeginStep(gcommReducer_t reducer, int sync);
/** Gradient @p index is complete once the work enqueued so far on @p stream is done. */
GCOMM_API gcommStatus_t gcommReducerMarkReady(gcommReducer_t reducer, size_t index, gcommStream_t stream);
/** Ends the step: the averaged (and unscaled) gradients are ready on @p stream.
 *  @p skip_step: NULL (nothing waits), or it receives 1 if the step saw Inf/NaN and
 *  must be skipped (this synchronizes @p stream). On an unused-gradient error
 *  (gcommUnusedError) the step is still completed as with gcommUnusedAsZero (the
 *  missing gradients count as zero, so the other ranks neither hang nor diverge:
 *  every rank holds the same gradients and loss scale), then gcommInvalidState
 *  lists them; do not apply that step. The reducer is ready for the next one. */
GCOMM_API gcommStatus_t gcommReducerFinalize(gcommReducer_t reducer, gcommStream_t stream, int* skip_step);
/** The last synced step's flag, on the reducer's device (> 0: Inf/NaN seen). Valid
 *  until the reducer is destroyed; read it after the finalize stream. */
GCOMM_API gcommStatus_t gcommReducerFoundInf(gcommReducer_t reducer, const float** device_flag);

/** The global L2 norm of the last synced step's gradients (averaged and unscaled:
 *  after finalize, before the next gcommReducerBeginStep), computed after the work
 *  on @p stream so far; later work on @p stream waits for it. *device_norm (may be
 *  NULL) receives a scalar of the reducer's, on its device, overwritten by the next
 *  call. Deterministic. In sharded mode it is a collective (every rank calls it):
 *  each rank takes the norm of its shard's pieces and the partial norms are
 *  all-gathered and combined in rank order, so every rank gets the same bits, the
 *  norm of the whole averaged gradient. A step with Inf/NaN gives Inf or NaN. */
GCOMM_API gcommStatus_t gcommReducerGradNorm(gcommReducer_t reducer, gcommStream_t stream,
                                             const float** device_norm);
/** gcommReducerGradNorm, then every gradient element this rank's step result
 *  covers (every gradient; in sharded mode its shard's pieces) is multiplied by
 *  max_norm / (norm + 1e-6) when that is below 1 (torch.nn.utils.clip_grad_norm_).
 *  An Inf or NaN norm scales nothing (the step is skipped anyway). No host sync. */
GCOMM_API gcommStatus_t gcommReducerClipGradNorm(gcommReducer_t reducer, float max_norm, gcommStream_t stream,
                                                 const float** device_norm);

/** The address of gradient @p index (gradcomm's own with grad_as_bucket_view). */
GCOMM_API gcommStatus_t gcommReducerGradData(gcommReducer_t reducer, size_t index, void** data);
/** Points gradient @p index at new memory (same count and dtype) between steps.
 *  Refused with grad_as_bucket_view (gradcomm owns those), during a step, and when
 *  the new memory would overlap another gradient's (the message names both).
 *
 *  The memory contract: the reducer reads and writes each gradient at its
 *  registered address from its gcommReducerMarkReady to the end of the finalize
 *  stream's work. Memory freed while still registered is not detected by
 *  gcommReducerMarkReady (it reads freed memory: a crash or silent corruption);
 *  callers whose framework may replace gradient memory (PyTorch's
 *  zero_grad(set_to_none=True), an optimizer assigning .grad) use
 *  gcommReducerMarkReadyAt, or keep the gradients in place. */
GCOMM_API gcommStatus_t gcommReducerSetGradData(gcommReducer_t reducer, size_t index, void* data);
/** Points every gradient at new memory at once, between steps: @p data has
 *  @p num_grads entries (the number registered). The new addresses are checked as
 *  a whole (gradients may trade places, which one call at a time would refuse as a
 *  passing overlap); on any error nothing changes. */
GCOMM_API gcommStatus_t gcommReducerSetAllGradData(gcommReducer_t reducer, void* const* data,
                                                   size_t num_grads);
/** gcommReducerMarkReady with a guard: @p data is where the caller's gradient is
 *  now. If the reducer has gradient @p index elsewhere (its memory was replaced
 *  since registration), the call fails with gcommInvalidArgument naming both
 *  addresses and marks nothing, instead of reading memory that may be freed. One
 *  comparison: cheap enough to use always. */
GCOMM_API gcommStatus_t gcommReducerMarkReadyAt(gcommReducer_t reducer, size_t index, const void* data,
                                                gcommStream_t stream);

GCOMM_API gcommStatus_t gcommReducerGetStats(gcommReducer_t reducer, gcommReducerStats_t* stats);
/** The bucket plan, one line per bucket, into @p buffer (NUL-terminated, truncated
 *  to @p size); @p required (may be NULL) receives the full length + 1. The output
 *  string convention of every header (the parameters were named buf, capacity,
 *  needed before 0.1: the same positions and types, so callers are unaffected). */
GCOMM_API gcommStatus_t gcommReducerDescribe(gcommReducer_t reducer, char* buffer, size_t size,
                                             size_t* required);

/* ---- Step timing and the step trace (docs/observability.md) ---- */

/** How the last measured synced step went (versioned struct, version 1: set it
 *  with GCOMM_REDUCER_STEP_TIMING_INITIALIZER before asking). Times in
 *  microseconds from the step's gcommReducerBeginStep. "Backward" ends, on a host
 *  communicator, at the last gcommReducerMarkReady call (or at finalize when no
 *  gradient was marked); on a GPU, where the finalize call's stream reaches
 *  finalize. Host communicators: host clock, measured when finalize returns. GPU:
 *  CUDA events, read once the step's work has completed (queried, never waited
 *  for), so the figures describe an earlier step than the last finalized one. */
typedef struct gcommReducerStepTiming {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t step;             /**< the synced step measured (1: the first); 0: none measured yet */
  uint64_t measured_steps;   /**< synced steps measured since the reducer was created */
  double step_us;            /**< begin to the end of finalize's work */
  double backward_us;        /**< begin to the end of backward (see above) */
  double comm_us;            /**< the step's collectives, summed */
  double overlapped_comm_us; /**< the part of comm_us that ran before backward ended */
  double overlap;            /**< overlapped_comm_us / comm_us, 0..1 (0 when nothing was sent) */
  uint64_t stride;           /**< one synced step in stride is measured (1: every one; see below) */
} gcommReducerStepTiming_t;

#define GCOMM_REDUCER_STEP_TIMING_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommReducerStepTiming_t), 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 1 }

/** Turns step timing on (1) or off (0). Default: on for a host communicator (a
 *  clock read per mark-ready call and a few per bucket), off on a GPU (two CUDA
 *  event records per collective); GRADCOMM_REDUCER_TIMING=0/1 overrides the
 *  default. The steps a trace records are timed whatever the switch says. On, its
 *  cost is held to 0.5% of a step (or 5 us, whichever is more) by measuring one
 *  synced step in `stride`, set from the last measured step's cost (on a GPU, its
 *  event records); turning it on measures the next step. */
GCOMM_API gcommStatus_t gcommReducerSetTiming(gcommReducer_t reducer, int enable);
/** The last measured synced step (timing->step == 0 when none was measured yet). */
GCOMM_API gcommStatus_t gcommReducerGetStepTiming(gcommReducer_t reducer, gcommReducerStepTiming_t* timing);

/** Records a Chrome trace (the JSON chrome://tracing and https://ui.perfetto.dev
 *  open) of the next @p steps synced steps (1..100000) into @p path: per bucket when
 *  its last gradient was marked ready, pack, the collective, the epilogue; PowerSGD
 *  phases; finalize and the scaler update. %r in @p path becomes the rank, %h the
 *  host, %p the pid. The file is written when the last of those steps is measured,
 *  at gcommReducerStopTrace, or when the reducer is destroyed. GRADCOMM_TRACE_FILE
 *  (with GRADCOMM_TRACE_STEPS, default 20, and GRADCOMM_TRACE_START, the first
 *  synced step traced, default 1) starts one at creation without a code change. */
GCOMM_API gcommStatus_t gcommReducerStartTrace(gcommReducer_t reducer, const char* path, uint64_t steps);
/** Writes the trace now with the steps measured so far (a GPU's are waited for)
 *  and ends it, between steps. Succeeds doing nothing when no trace is running
 *  (one that took all its steps was written already). */
GCOMM_API gcommStatus_t gcommReducerStopTrace(gcommReducer_t reducer);

/* ---- Buckets sized for the link ---- */

/** Where the bucket autotune is. The values are part of the ABI. */
typedef enum gcommBucketAutotuneState {
  gcommBucketAutotuneStateOff = 0,       /**< not asked for (the cap is bucket_cap_bytes) */
  gcommBucketAutotuneStateMeasuring = 1, /**< before synced step 4's finalize */
  gcommBucketAutotuneStateChosen = 2,    /**< the cap below was chosen and is in use */
  gcommBucketAutotuneStateSkipped = 3    /**< asked for, but nothing to tune (one rank, gradients within the
                                         first bucket, a compression enabled, a rank whose measured steps
                                         all left gradients unmarked); the INFO log says which */
} gcommBucketAutotuneState_t;

/** What the bucket autotune measured and chose (versioned struct, version 1).
 *  The predictions are when the last bucket ends, from the end of the previous
 *  synced step, from every rank's measurements combined (each gradient's latest
 *  arrival, the slowest link): the same on every rank. link_* and backward_us are
 *  this rank's own. */
typedef struct gcommBucketAutotuneReport {
  size_t size;
  uint32_t magic;
  uint32_t version;
  gcommBucketAutotuneState_t state;
  uint64_t chosen_at_step;        /**< the synced step whose finalize chose (0: not yet) */
  size_t bucket_cap_bytes;        /**< in use now */
  size_t first_bucket_bytes;      /**< in use now */
  size_t configured_cap_bytes;    /**< the config's bucket_cap_bytes */
  double link_alpha_us;           /**< a collective's fixed cost on this rank's probe */
  double link_bytes_per_s;        /**< an all-reduce's bytes per second beyond it */
  double backward_us;             /**< from the first to the last mark (medians per gradient) */
  double predicted_us;            /**< with the chosen cap */
  double predicted_configured_us; /**< with the configured cap */
} gcommBucketAutotuneReport_t;

#define GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER                                                         \
  {                                                                                                      \
    GCOMM_CONFIG_HEADER(gcommBucketAutotuneReport_t), gcommBucketAutotuneStateOff, 0, 0, 0, 0, 0.0, 0.0, \
        0.0, 0.0, 0.0                                                                                    \
  }

GCOMM_API gcommStatus_t gcommReducerGetBucketAutotune(gcommReducer_t reducer,
                                                      gcommBucketAutotuneReport_t* report);

/* ---- Stragglers: which rank the others wait for, and why (docs/observability.md) ---- */

/** What a framework may tell the reducer about a step, when it happens (any time;
 *  the first of each kind after the last synced step's end counts). Without them,
 *  everything before the gradients were ready counts as compute. */
typedef enum gcommStepMark {
  gcommStepMarkOptimizerDone = 1, /**< the optimizer step of the last step's result ended */
  gcommStepMarkForwardStart = 2,  /**< the forward of this step begins (its batch is loaded) */
} gcommStepMark_t;

GCOMM_API gcommStatus_t gcommReducerNoteStepMark(gcommReducer_t reducer, gcommStepMark_t mark);

/** Where a late rank lost its time. The values are part of the ABI. */
typedef enum gcommLatePhase {
  gcommLateNone = 0,
  gcommLateOptimizer = 1, /**< from the last step's end to its optimizer's end */
  gcommLateData = 2,      /**< from there to its forward's start: loading the batch */
  gcommLateCompute = 3,   /**< from there to its last gradient: forward and backward */
  gcommLateLink = 4,      /**< its gradients were ready on time; the others waited for its bytes */
} gcommLatePhase_t;

/** Straggler attribution. Each rank keeps its own account of every synced step
 *  (its ready time, its marks, how long it waited on each peer); once every
 *  GRADCOMM_STRAGGLER_WINDOW synced steps (default 10; 0: off) the accounts are
 *  all-gathered inside gcommReducerFinalize and every rank judges them alike: a
 *  rank is late in a step by at least GRADCOMM_STRAGGLER_MIN_MS (default 20) or
 *  a tenth of the step, and the window names the rank late on more than half of
 *  its steps. Every rank takes rank 0's window and threshold at the first synced
 *  step (the windows are synced steps 2-11, 12-21, ...). Rank 0 logs a WARN line
 *  when the verdict changes. Waits on peers (the link phase) are known on the
 *  socket and shm transports. */
typedef struct gcommStragglerReport {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t windows;        /**< windows judged so far (0: none yet; the fields below are empty) */
  uint64_t named_windows;  /**< ... that named a late rank */
  uint64_t first_step;     /**< the last window's synced steps, first ... */
  uint64_t last_step;      /**< ... and last */
  int late_rank;           /**< late on most of the window's steps; -1: none was */
  int late_steps;          /**< the steps it was late on */
  int window_steps;        /**< the steps in the window */
  gcommLatePhase_t phase;  /**< where it lost the time, most often */
  double late_ms;          /**< the median of its lateness over those steps */
  int last_step_late_rank; /**< the window's last step alone: who was late (-1: none) */
  gcommLatePhase_t last_step_phase;
  double last_step_late_ms;
  double clock_offset_us; /**< this rank's steady clock minus rank 0's, from the step ends */
} gcommStragglerReport_t;

#define GCOMM_STRAGGLER_REPORT_INITIALIZER                                                     \
  {                                                                                            \
    GCOMM_CONFIG_HEADER(gcommStragglerReport_t), 0, 0, 0, 0, -1, 0, 0, gcommLateNone, 0.0, -1, \
        gcommLateNone, 0.0, 0.0                                                                \
  }

/** The last window's verdict (report->windows == 0 before the first window ends). */
GCOMM_API gcommStatus_t gcommReducerGetStragglerReport(gcommReducer_t reducer,
                                                       gcommStragglerReport_t* report);

/** Where the last window's non-finite gradients came from. Each rank flags its
 *  own gradients as the reducer packs them, before any reduction (not with
 *  grad_as_bucket_view, nor the gradients PowerSGD carries), and the flags travel
 *  with the straggler window's accounts (GRADCOMM_STRAGGLER_WINDOW: off turns this
 *  off too). Rank 0 logs a WARN line when one rank's gradient is the source on two
 *  or more steps of a window. */
typedef struct gcommNonFiniteReport {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t windows;    /**< windows judged so far (0: none yet) */
  uint64_t first_step; /**< the last window's synced steps, first ... */
  uint64_t last_step;  /**< ... and last */
  int nonfinite_steps; /**< steps of the window on which some rank's own gradient was Inf/NaN */
  int source_rank;     /**< the source on most of them (-1: none): this rank ... */
  int source_grad;     /**< ... and its first non-finite gradient (registration index) */
  int source_steps;    /**< steps on which that rank's gradient was a source */
  int alone_steps;     /**< ... of which the only rank with a non-finite gradient */
} gcommNonFiniteReport_t;

#define GCOMM_NONFINITE_REPORT_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommNonFiniteReport_t), 0, 0, 0, 0, -1, -1, 0, 0 }

GCOMM_API gcommStatus_t gcommReducerGetNonFiniteReport(gcommReducer_t reducer,
                                                       gcommNonFiniteReport_t* report);

/* ---- Compression: how the buckets cross the wire (docs/compression.md) ---- */

/** A reducer sends its buckets with one compression strategy. Every reducer starts
 *  with gcommCompressionNone; another is enabled once, between steps, by its kind
 *  and config struct (or by text), and wraps the plain all-reduce for whatever it
 *  does not compress. The values are part of the ABI. */
typedef enum gcommCompression {
  gcommCompressionNone = 0,     /**< "none": the plain all-reduce (f32, or f16/bf16 by wire_dtype) */
  gcommCompressionPowerSgd = 1, /**< "powersgd": low rank (gcommPowerSgdConfig_t, gcommPowerSgdStats_t) */
  gcommCompressionInt8 = 2,     /**< "int8": blockwise int8 with error feedback (gcommInt8Config_t,
                                     gcommInt8Stats_t) */
  gcommCompressionFp8 = 3,      /**< "fp8": blockwise fp8 (e4m3 or e5m2) with error feedback
                                     (gcommFp8Config_t, gcommFp8Stats_t) */
  gcommCompressionFp4 = 4       /**< "fp4": blockwise 4-bit e2m1 with error feedback
                                     (gcommFp4Config_t, gcommFp4Stats_t) */
} gcommCompression_t;

/** Turns compression @p kind on, between steps; every rank must make the same call.
 *  @p config: that kind's config struct (made by its _INITIALIZER), or NULL for its
 *  defaults. @p grad_rows: each gradient's first dimension (0: not a matrix), for
 *  kinds that need shapes (PowerSGD requires it); NULL otherwise. Refused, changing
 *  nothing, when a compression is already on, mid-step, or where the kind does not
 *  apply (the message says why). A failure past the checks (out of memory while its
 *  buffers are made) leaves the reducer failed, as any failure after which ranks
 *  could disagree. The plan is not rebuilt afterwards. */
GCOMM_API gcommStatus_t gcommReducerEnableCompression(gcommReducer_t reducer, gcommCompression_t kind,
                                                      const void* config, const size_t* grad_rows);
/** gcommReducerEnableCompression configured by text: "int8", or the kind's name, a
 *  colon and comma-separated key=value pairs named as its config fields:
 *  "powersgd:rank=2,start_iter=0", "int8:block_size=128". Unknown keys and bad
 *  values are refused, naming the keys the kind knows. */
GCOMM_API gcommStatus_t gcommReducerEnableCompressionText(gcommReducer_t reducer, const char* spec,
                                                          const size_t* grad_rows);
/** The compression in use (gcommCompressionNone until one is enabled). */
GCOMM_API gcommStatus_t gcommReducerGetCompression(gcommReducer_t reducer, gcommCompression_t* kind);
/** The statistics of compression @p kind, into that kind's stats struct (set with its
 *  _STATS_INITIALIZER first). gcommInvalidState when @p kind is not the one in use. */
GCOMM_API gcommStatus_t gcommReducerGetCompressionStats(gcommReducer_t reducer, gcommCompression_t kind,
                                                        void* stats);
/** The compression in use and its statistics as one JSON object,
 *  {"kind": "int8", "stats": {"compressed_steps": 12, ...}} (the stats named as the
 *  stats struct's fields), with the output string convention of
 *  gcommReducerDescribe. */
GCOMM_API gcommStatus_t gcommReducerDescribeCompression(gcommReducer_t reducer, char* buffer, size_t size,
                                                        size_t* required);
/** The compression's state (step counter, error feedback, PowerSGD's Q) as
 *  device-independent bytes into @p buffer, between steps; @p required receives the
 *  size (@p buffer may be NULL with size 0 to ask it). gcommInvalidState with no
 *  compression on. */
GCOMM_API gcommStatus_t gcommReducerSaveCompressionState(gcommReducer_t reducer, void* buffer, size_t size,
                                                         size_t* required);
/** Restores a state saved by the same rank of a reducer with the same gradients, plan
 *  and compression config, or a shared state (gcommReducerSaveCompressionStatePart)
 *  saved by any rank of such a reducer (its residuals are then zero); anything else
 *  is refused, changing nothing. */
GCOMM_API gcommStatus_t gcommReducerLoadCompressionState(gcommReducer_t reducer, const void* data,
                                                         size_t bytes);

/** Which part of the compression state gcommReducerSaveCompressionStatePart saves. */
typedef enum gcommCompressionStatePart {
  /** This rank's whole state: what gcommReducerSaveCompressionState saves. */
  gcommCompressionStateAll = 0,
  /** What every rank holds alike: the step counter and PowerSGD's Q, no residual.
   *  The same bytes on every rank of a job between steps, and the same size on a
   *  fresh reducer of the same gradients and config: what a newcomer to a
   *  fault-tolerant job receives from the holders (docs/fault-tolerance.md). */
  gcommCompressionStateShared = 1,
} gcommCompressionStatePart_t;

/** gcommReducerSaveCompressionState, of the part @p part. */
GCOMM_API gcommStatus_t gcommReducerSaveCompressionStatePart(gcommReducer_t reducer,
                                                             gcommCompressionStatePart_t part, void* buffer,
                                                             size_t size, size_t* required);
/** Loads this process's whole state saved by its reducer of an earlier membership
 *  generation (docs/fault-tolerance.md): the same gradients and config, another world
 *  size or rank. What does not depend on the world is kept (the step counter,
 *  PowerSGD's Q and residual, the int8/fp8 wire's own residual of each bucket it
 *  quantizes in both worlds); what does is reset (the int8/fp8 owner's residual of
 *  the shard it owned: the shards are redrawn for the new world). A state of the
 *  same world loads as with gcommReducerLoadCompressionState. A shared state
 *  (gcommCompressionStateShared, any rank's) sets the shared part and keeps this
 *  reducer's residuals: how every member adopts one rank's shared part, e.g. after a
 *  discarded step that some members' reducers finished and others did not. */
GCOMM_API gcommStatus_t gcommReducerCarryCompressionState(gcommReducer_t reducer, const void* data,
                                                          size_t bytes);

/* PowerSGD (docs/powersgd.md): for f32 gradients, with grad_rows (the gradient is
 * viewed as rows x count/rows). The bucket plan is rebuilt with the compressed
 * gradients outside the buckets. With grad_as_bucket_view every gradient's address
 * may change (contents kept; the old addresses are freed): read them again with
 * gcommReducerGradData; enabling then first waits for the whole device, since work
 * on any stream may still use the gradients at their old addresses. Refused in
 * sharded mode. */

/** PowerSGD configuration (versioned config struct, version 1). */
typedef struct gcommPowerSgdConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  int rank;                    /**< 4: the approximation's rank, 1..32 */
  float min_compression_rate;  /**< 2: compress an n x m gradient only if (n + m) r * rate < n m */
  uint64_t start_iter;         /**< 10: synced steps all-reduced whole before compression starts */
  int error_feedback;          /**< 1: add what the last approximation missed (E) before compressing */
  int warm_start;              /**< 1: reuse Q across steps; 0: a fresh seeded Q every step */
  float orthogonalization_eps; /**< 1e-8: columns of P with a smaller norm become zero */
  int reserved_v1;             /**< leave 0 */
  uint64_t seed;               /**< seeds the initial Q (identical on every rank, host or GPU) */
} gcommPowerSgdConfig_t;

#define GCOMM_POWERSGD_CONFIG_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommPowerSgdConfig_t), 4, 2.0f, 10, 1, 1, 1e-8f, 0, 0x5eed }

/** PowerSGD statistics (versioned output struct, version 1). */
typedef struct gcommPowerSgdStats {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t compressed_steps;              /**< synced steps that were compressed */
  uint64_t compressed_matrices;           /**< gradients compressed */
  uint64_t uncompressed_tensors;          /**< gradients sent whole (in the normal buckets) */
  uint64_t bytes_last_step;               /**< P and Q bytes each rank sent in the last compressed step */
  uint64_t uncompressed_bytes_equivalent; /**< the compressed gradients' bytes as an f32 all-reduce */
} gcommPowerSgdStats_t;

#define GCOMM_POWERSGD_STATS_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommPowerSgdStats_t), 0, 0, 0, 0, 0 }

/* The int8 wire (docs/reducer.md, "The int8 wire"): every bucket whose wire is f32
 * is quantized to int8 blocks (one f32 scale per block), exchanged with an
 * all-to-all, summed in f32 by the rank that owns each chunk, quantized again and
 * all-gathered; about 0.26x the bytes of an f32 all-reduce with 256-value blocks.
 * Other buckets (f16/bf16 wire, or too small for W chunks of whole blocks to save
 * bytes) are all-reduced as before. Refused with grad_as_bucket_view and in sharded
 * mode. Allocated when enabled: the error feedback (4 bytes per quantized value,
 * plus 8/W for the owner's), three int8 staging buffers and one f32 buffer the size
 * of the largest bucket. A step that finalize completes but refuses (unmarked
 * gradients with gcommUnusedError) still updates the error feedback, as on the ranks
 * that cannot know. */

/** int8 wire configuration (versioned config struct, version 1). */
typedef struct gcommInt8Config {
  size_t size;
  uint32_t magic;
  uint32_t version;
  int block_size;      /**< 256: values per scale, a power of two in 32..4096 */
  int error_feedback;  /**< 1: add what the last step's codes lost (E) before quantizing */
  uint64_t start_iter; /**< 0: synced steps after enabling all-reduced in f32 before quantization starts
                            (the count is part of the saved state) */
} gcommInt8Config_t;

#define GCOMM_INT8_CONFIG_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommInt8Config_t), 256, 1, 0 }

/** int8 wire statistics (versioned output struct, version 1). */
typedef struct gcommInt8Stats {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t compressed_steps;     /**< synced steps that were quantized */
  uint64_t compressed_buckets;   /**< buckets of the plan that are (f32 wire, large enough) */
  uint64_t bytes_last_step;      /**< bytes this rank sent for them in the last quantized step */
  uint64_t f32_allreduce_bytes;  /**< what an f32 ring all-reduce of the same buckets sends per rank */
  uint64_t error_feedback_bytes; /**< memory held by the error feedback */
} gcommInt8Stats_t;

#define GCOMM_INT8_STATS_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommInt8Stats_t), 0, 0, 0, 0, 0 }

/* The fp8 wire (docs/compression.md, "fp8"): the int8 wire's round with fp8 codes
 * (OCP FP8: e4m3, 3 mantissa bits, largest 448, no infinities; or e5m2, 2 mantissa
 * bits, largest 57344), one f32 scale per block (max |v| / the format's largest
 * value), the nearest code with ties to even, subnormals kept. The same bytes as
 * int8 (one per value plus the scales); a relative error per value instead of one
 * relative to the block's largest. Refused with grad_as_bucket_view and in sharded
 * mode; the int8 wire's memory and Inf/NaN rules. */

/** The fp8 wire's number format. The values are part of the ABI. */
typedef enum gcommFp8Format {
  gcommFp8E4M3 = 0, /**< "e4m3": 4 exponent bits, 3 mantissa bits: finer steps, range 2^-9..448 */
  gcommFp8E5M2 = 1  /**< "e5m2": 5 exponent bits, 2 mantissa bits: coarser steps, range 2^-16..57344 */
} gcommFp8Format_t;

/** fp8 wire configuration (versioned config struct, version 1). */
typedef struct gcommFp8Config {
  size_t size;
  uint32_t magic;
  uint32_t version;
  int format;          /**< gcommFp8Format_t, gcommFp8E4M3 */
  int block_size;      /**< 256: values per scale, a power of two in 32..4096 */
  int error_feedback;  /**< 1: add what the last step's codes lost (E) before quantizing */
  int reserved_v1;     /**< leave 0 */
  uint64_t start_iter; /**< 0: synced steps after enabling all-reduced in f32 before quantization starts */
} gcommFp8Config_t;

#define GCOMM_FP8_CONFIG_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommFp8Config_t), gcommFp8E4M3, 256, 1, 0, 0 }

/** fp8 wire statistics: the int8 wire's struct and fields (the same round, other codes). */
typedef gcommInt8Stats_t gcommFp8Stats_t;
#define GCOMM_FP8_STATS_INITIALIZER GCOMM_INT8_STATS_INITIALIZER

/* The fp4 wire (docs/compression.md, "fp4"): the int8 wire's round with 4-bit codes,
 * two a byte: e2m1, the OCP MX / NVFP4 element format (0, 0.5, 1, 1.5, 2, 3, 4, 6
 * and their negatives), one f32 scale per block (max |v| / 6), the nearest code with
 * ties to even. About half the int8 wire's bytes (0.14x an f32 all-reduce with
 * blocks of 64) for about 25x its error per step: a wire for slow links, with
 * error feedback on. Refused with grad_as_bucket_view and in sharded mode; the int8
 * wire's memory and Inf/NaN rules. */

/** fp4 wire configuration (versioned config struct, version 1). */
typedef struct gcommFp4Config {
  size_t size;
  uint32_t magic;
  uint32_t version;
  int block_size;      /**< 64: values per scale, a power of two in 32..4096 */
  int error_feedback;  /**< 1: add what the last step's codes lost (E) before quantizing */
  uint64_t start_iter; /**< 0: synced steps after enabling all-reduced in f32 before quantization starts */
} gcommFp4Config_t;

#define GCOMM_FP4_CONFIG_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommFp4Config_t), 64, 1, 0 }

/** fp4 wire statistics: the int8 wire's struct and fields (the same round, other codes). */
typedef gcommInt8Stats_t gcommFp4Stats_t;
#define GCOMM_FP4_STATS_INITIALIZER GCOMM_INT8_STATS_INITIALIZER

/* ------------------------------------------------------------------------- */
/* Sharded gradients (mode gcommReducerSharded)                               */
/* ------------------------------------------------------------------------- */

/** One gradient's part of this rank's shard of a bucket: elements
 *  [grad_offset, grad_offset + count) of gradient @p grad, at element
 *  @p shard_offset of the shard. */
typedef struct gcommShardPiece {
  size_t grad;
  size_t grad_offset;
  size_t count;
  size_t shard_offset;
} gcommShardPiece_t;

/** This rank's shard of bucket @p bucket (0 .. num_buckets-1, launch order) in
 *  sharded mode. @p shard (may be NULL) receives the contiguous shard in the wire
 *  buffer (data, elements, wire dtype; padding included, never part of a piece):
 *  after finalize it holds the reduced values before the epilogue (averaged, not
 *  unscaled) unless the gradients are bucket views, where it holds them after.
 *  @p pieces receives up to @p max_pieces pieces in shard order; @p num_pieces (may
 *  be NULL) receives how many there are (ask with max_pieces 0). After a synced
 *  step the gradients' elements in these pieces hold the result of the step (the
 *  other elements keep this rank's own gradient); a distributed optimizer updates
 *  exactly these parameter elements. The layout is fixed when the reducer is
 *  created: sharded mode never rebuilds the plan (rebuild_buckets is ignored). */
GCOMM_API gcommStatus_t gcommReducerGetShard(gcommReducer_t reducer, size_t bucket, gcommTensor_t* shard,
                                             gcommShardPiece_t* pieces, size_t max_pieces,
                                             size_t* num_pieces);

/** Registers the parameters (sharded mode): params[i] has gradient i's count and
 *  dtype, on the communicator's device. A staging buffer of the buckets' layout is
 *  allocated once, here; call again to re-point them. */
GCOMM_API gcommStatus_t gcommReducerSetParams(gcommReducer_t reducer, const gcommTensor_t* params,
                                              size_t num_params);

/** All-gathers the parameters of bucket @p bucket (GCOMM_ALL_BUCKETS: every bucket,
 *  in launch order) between steps: every rank contributes the elements of its
 *  shard's pieces and every rank's parameters end equal. Ordered after the work on
 *  @p stream so far; later work on @p stream waits for it. Every rank must call it
 *  with the same buckets in the same order; one bucket at a time lets the next
 *  forward pass start on the first buckets while the others are in flight. */
GCOMM_API gcommStatus_t gcommReducerAllGatherParams(gcommReducer_t reducer, size_t bucket,
                                                    gcommStream_t stream);
#define GCOMM_ALL_BUCKETS ((size_t)-1)

#ifdef __cplusplus
}
#endif

#endif /* GRADCOMM_REDUCER_H */
