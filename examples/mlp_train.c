/* Data-parallel training of a two-layer MLP through gradcomm's C API: the C API
 * tutorial (docs/tutorial.md walks through it).
 *
 * R ranks (threads, on the local transport) each take 1/R of every global batch
 * (64 samples; with R = 3, slices of 21, 21 and 22, weighed by their share),
 * compute their gradients with a hand-written forward and backward, multiply them
 * by the loss scale, and hand them to a reducer that sends them as f16, averages
 * them, unscales them and updates the grad scaler. Every rank then applies the
 * same SGD step. The loss curve must match a single rank training on the whole
 * batch in f32: the program exits 1 if it does not.
 *
 * The model's math runs on the CPU. With --gpu the gradients are copied to GPU 0
 * and the reducer, its f16 wire and the scaler run there.
 *
 * Under a launcher (torchrun, mpirun, srun: WORLD_SIZE and RANK, or their Open MPI
 * and Slurm equivalents, with MASTER_ADDR and MASTER_PORT) each process is one
 * rank instead: gcommCommInitFromEnv, on the host (the socket transport) or, with
 * --gpu, on the GPU of its local rank (NCCL). The ranks sum their losses with one
 * all-reduce at the end, and rank 0 checks the curve.
 *
 * With --powersgd R the reducer compresses W1 with PowerSGD at rank R (after 10
 * plain steps); the curve must then stay within 5% of the exact one. With --int8
 * the gradients cross the wire as int8 blocks (gcommReducerEnableCompression with
 * gcommCompressionInt8: f32 buckets, error feedback); the curve must stay within 1%.
 * --int8-no-ef turns the error feedback off, to see what it buys. Both go through
 * the generic compression calls (docs/compression.md).
 *
 * With --sharded the reducer reduce-scatters instead (ZeRO-1): each rank updates
 * only the parameter elements of its shard (gcommReducerGetShard), keeps optimizer
 * state for those alone, and gcommReducerAllGatherParams gives every rank the
 * others' updates. The same ranks then train again in the all-reduce mode, and the
 * two loss curves must agree to 1e-6 relative. --adam uses Adam instead of SGD;
 * --clip M clips the gradients' global norm to M (over shards in sharded mode).
 *
 *   gradcomm_example_mlp [--ranks R] [--steps N] [--gpu] [--powersgd R | --sharded | --int8 | --int8-no-ef]
 *                        [--adam] [--clip M]
 *   torchrun --nproc-per-node 4 --no-python gradcomm_example_mlp [--steps N] [--gpu] [--powersgd R |
 * --sharded]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <gradcomm/gradcomm.h>

enum { D_IN = 16, HIDDEN = 32, D_OUT = 4, BATCH = 64, MAX_STEPS = 400 };
enum { W1, B1, W2, B2, NPARAM };
static const size_t kCount[NPARAM] = {HIDDEN * D_IN, HIDDEN, D_OUT* HIDDEN, D_OUT};

typedef struct {
  float* p[NPARAM];
} Tensors;

/* --- data and model (plain C, deterministic) -------------------------------------- */

static float uniform(unsigned* state) { /* xorshift32 in [-1, 1) */
  *state ^= *state << 13;
  *state ^= *state >> 17;
  *state ^= *state << 5;
  return (float)(*state & 0xffffff) / 8388608.0f - 1.0f;
}

static float g_x[MAX_STEPS][BATCH][D_IN], g_y[MAX_STEPS][BATCH][D_OUT];

/* Targets from a fixed random "teacher" network. */
static void make_data(int steps) {
  unsigned s = 12345;
  float teacher[D_OUT][D_IN];
  int t, b, i, o;
  for (o = 0; o < D_OUT; ++o)
    for (i = 0; i < D_IN; ++i) teacher[o][i] = uniform(&s);
  for (t = 0; t < steps; ++t)
    for (b = 0; b < BATCH; ++b) {
      for (i = 0; i < D_IN; ++i) g_x[t][b][i] = uniform(&s);
      for (o = 0; o < D_OUT; ++o) {
        float z = 0;
        for (i = 0; i < D_IN; ++i) z += teacher[o][i] * g_x[t][b][i];
        g_y[t][b][o] = tanhf(z);
      }
    }
}

static void init_params(Tensors* w) {
  unsigned s = 777;
  int k;
  size_t j;
  for (k = 0; k < NPARAM; ++k)
    for (j = 0; j < kCount[k]; ++j) w->p[k][j] = (k == B1 || k == B2) ? 0.0f : 0.3f * uniform(&s);
}

/* Forward and backward on samples [first, first + n) of step t: returns the sum of
 * their squared errors and writes d(loss)/d(param) * scale into g, where loss is
 * the mean over these n samples. */
static double forward_backward(const Tensors* w, int t, int first, int n, float scale, Tensors* g) {
  double sse = 0;
  int b, h, i, o, k;
  float norm = 2.0f * scale / (float)n; /* d/dy of the mean squared error, times the loss scale */
  for (k = 0; k < NPARAM; ++k) memset(g->p[k], 0, kCount[k] * sizeof(float));
  for (b = first; b < first + n; ++b) {
    float hid[HIDDEN], dout[D_OUT], dhid[HIDDEN];
    for (h = 0; h < HIDDEN; ++h) {
      float z = w->p[B1][h];
      for (i = 0; i < D_IN; ++i) z += w->p[W1][h * D_IN + i] * g_x[t][b][i];
      hid[h] = z > 0 ? z : 0;
    }
    for (o = 0; o < D_OUT; ++o) {
      float z = w->p[B2][o];
      for (h = 0; h < HIDDEN; ++h) z += w->p[W2][o * HIDDEN + h] * hid[h];
      sse += (double)(z - g_y[t][b][o]) * (z - g_y[t][b][o]);
      dout[o] = norm * (z - g_y[t][b][o]) / D_OUT;
    }
    for (h = 0; h < HIDDEN; ++h) dhid[h] = 0;
    for (o = 0; o < D_OUT; ++o) {
      g->p[B2][o] += dout[o];
      for (h = 0; h < HIDDEN; ++h) {
        g->p[W2][o * HIDDEN + h] += dout[o] * hid[h];
        dhid[h] += dout[o] * w->p[W2][o * HIDDEN + h];
      }
    }
    for (h = 0; h < HIDDEN; ++h) {
      if (hid[h] <= 0) continue;
      g->p[B1][h] += dhid[h];
      for (i = 0; i < D_IN; ++i) g->p[W1][h * D_IN + i] += dhid[h] * g_x[t][b][i];
    }
  }
  return sse;
}

/* --- one rank ------------------------------------------------------------------------ */

/* What the gradients cross the wire as. */
enum Wire { WIRE_F32 = 0, WIRE_F16 = 1, WIRE_INT8 = 2, WIRE_INT8_NO_EF = 3 };

/* The optimizer: SGD, or Adam with its moments for the elements this rank updates. */
typedef struct {
  int adam;
  float clip; /* > 0: clip the gradients' global norm to it */
} Optimizer;

/* A run of parameter elements this rank updates: [offset, offset + count) of
 * parameter `param`, whose optimizer state starts at `state`. The all-reduce mode
 * has one per parameter; sharded mode one per piece of its shards. */
typedef struct {
  size_t param, offset, count, state;
} Span;

typedef struct {
  int rank, ranks, steps, gpu, wire, powersgd; /* wire: a Wire; powersgd: PowerSGD's rank r, 0 = off */
  int sharded;
  Optimizer opt;
  gcommComm_t comm;
  double* sse; /* [steps], summed over ranks under the lock */
  pthread_mutex_t* lock;
  char error[512];
} RankJob;

#define CHECK(call)                                                                                    \
  do {                                                                                                 \
    gcommStatus_t s_ = (call);                                                                         \
    if (s_ != gcommSuccess) {                                                                          \
      /* The message names the C function; the status follows in brackets. */                          \
      snprintf(job->error, sizeof job->error, "%s (%s)", gcommGetLastError(), gcommGetStatusName(s_)); \
      goto done;                                                                                       \
    }                                                                                                  \
  } while (0)

/* This rank's spans: the whole of every parameter, or (sharded) the pieces of its
 * shards, with the state laid out shard after shard. Returns the count, or -1 with
 * job->error set. */
static int my_spans(RankJob* job, gcommReducer_t reducer, Span** spans, size_t* state_size) {
  gcommReducerStats_t stats;
  size_t b, k, n = 0, state = 0;
  *spans = NULL;
  if (!job->sharded) {
    *spans = malloc(NPARAM * sizeof(Span));
    for (k = 0; k < NPARAM; ++k) {
      Span sp = {k, 0, kCount[k], state};
      (*spans)[k] = sp;
      state += kCount[k];
    }
    *state_size = state;
    return NPARAM;
  }
  CHECK(gcommReducerGetStats(reducer, &stats));
  for (b = 0; b < stats.num_buckets; ++b) {
    gcommTensor_t shard;
    gcommShardPiece_t pieces[NPARAM];
    size_t count = 0;
    CHECK(gcommReducerGetShard(reducer, b, &shard, pieces, NPARAM, &count));
    if (count > NPARAM) { /* a piece per gradient at most: cannot happen */
      snprintf(job->error, sizeof job->error, "bucket %zu has %zu pieces", b, count);
      goto done;
    }
    *spans = realloc(*spans, (n + count + 1) * sizeof(Span));
    for (k = 0; k < count; ++k) {
      Span sp = {pieces[k].grad, pieces[k].grad_offset, pieces[k].count, state + pieces[k].shard_offset};
      (*spans)[n++] = sp;
    }
    state += shard.count; /* the shard's elements, padding included: 1/ranks of the bucket */
  }
  *state_size = state;
  return (int)n;
done:
  free(*spans);
  *spans = NULL;
  return -1;
}

/* SGD or Adam (step `step`, from 1) on this rank's spans. */
static void apply_update(const Optimizer* opt, const Span* spans, int n, int step, Tensors* w,
                         const Tensors* g, float* m, float* v) {
  const float lr = opt->adam ? 0.01f : 0.05f, b1 = 0.9f, b2 = 0.999f;
  const float c1 = 1.0f - powf(b1, (float)step), c2 = 1.0f - powf(b2, (float)step);
  int s;
  size_t j;
  for (s = 0; s < n; ++s) {
    float* p = w->p[spans[s].param] + spans[s].offset;
    const float* d = g->p[spans[s].param] + spans[s].offset;
    for (j = 0; j < spans[s].count; ++j) {
      size_t at = spans[s].state + j;
      if (!opt->adam) {
        p[j] -= lr * d[j];
        continue;
      }
      m[at] = b1 * m[at] + (1.0f - b1) * d[j];
      v[at] = b2 * v[at] + (1.0f - b2) * d[j] * d[j];
      p[j] -= lr * (m[at] / c1) / (sqrtf(v[at] / c2) + 1e-8f);
    }
  }
}

/* Copies every tensor of `from` to `to` (host <-> device); 0 on success. */
static int copy_all(Tensors* to, const Tensors* from, enum cudaMemcpyKind kind) {
  int k;
  for (k = 0; k < NPARAM; ++k)
    if (cudaMemcpy(to->p[k], from->p[k], kCount[k] * sizeof(float), kind) != cudaSuccess) return 1;
  return 0;
}

/* A failed CUDA copy ends the rank with a message (the example's data moves are plain copies). */
#define CHECK_COPY(ok)                                              \
  do {                                                              \
    if (!(ok)) {                                                    \
      snprintf(job->error, sizeof job->error, "cudaMemcpy failed"); \
      goto done;                                                    \
    }                                                               \
  } while (0)

static void* run_rank(void* arg) {
  RankJob* job = (RankJob*)arg;
  Tensors w, g, dev, dev_w;
  gcommTensor_t grads[NPARAM], params[NPARAM];
  Span* spans = NULL;
  float *m = NULL, *v = NULL;
  size_t state_size = 0;
  int num_spans = 0, applied = 0;
  gcommGradScaler_t scaler = NULL;
  gcommReducer_t reducer = NULL;
  gcommDevice_t device = gcommHostDevice();
  int k, t;
  /* This rank's slice of every global batch. Slices differ by one sample when the
   * ranks do not divide the batch (3 ranks: 21, 21, 22), so each rank weighs its
   * mean gradient by its share, n * ranks / BATCH: the reducer's average of the
   * weighted means is then the gradient of the global batch's mean. */
  const int first = job->rank * BATCH / job->ranks, count = (job->rank + 1) * BATCH / job->ranks - first;
  const float weight = (float)(count * job->ranks) / (float)BATCH;
  memset(&dev, 0, sizeof dev);
  memset(&dev_w, 0, sizeof dev_w);
  gcommCommDevice(job->comm, &device); /* the scaler and the gradients live where the communicator does */
  if (job->gpu) cudaSetDevice(device.ordinal);
  for (k = 0; k < NPARAM; ++k) {
    w.p[k] = malloc(kCount[k] * sizeof(float));
    g.p[k] = malloc(kCount[k] * sizeof(float));
    if (job->gpu && (cudaMalloc((void**)&dev.p[k], kCount[k] * sizeof(float)) != cudaSuccess ||
                     cudaMalloc((void**)&dev_w.p[k], kCount[k] * sizeof(float)) != cudaSuccess)) {
      snprintf(job->error, sizeof job->error, "cudaMalloc failed");
      goto done;
    }
    /* Registration order = parameter order; the reducer plans buckets in reverse. */
    grads[k].data = job->gpu ? (void*)dev.p[k] : (void*)g.p[k];
    grads[k].count = kCount[k];
    grads[k].dtype = gcommFloat32;
    params[k] = grads[k];
    params[k].data = job->gpu ? (void*)dev_w.p[k] : (void*)w.p[k];
  }
  init_params(&w); /* every rank starts from the same weights */

  {
    /* Step 1: a grad scaler and a reducer with f16 on the wire. */
    gcommGradScalerConfig_t sc = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
    gcommReducerConfig_t rc = GCOMM_REDUCER_CONFIG_INITIALIZER;
    sc.init_scale = 1024.0f;
    CHECK(gcommGradScalerCreate(device, &sc, &scaler));
    rc.scaler = scaler;
    rc.wire_dtype = job->wire == WIRE_F16 ? (int)gcommFloat16 : GCOMM_WIRE_SAME_AS_GRAD;
    rc.mode = job->sharded ? gcommReducerSharded : gcommReducerAllReduce;
    CHECK(gcommReducerCreate(job->comm, grads, NPARAM, &rc, &reducer));
  }
  if (job->sharded) /* the parameters the all-gather fills (where the communicator is) */
    CHECK(gcommReducerSetParams(reducer, params, NPARAM));
  /* The elements this rank updates, and Adam's moments for those alone: in sharded
   * mode about 1/ranks of the model (ZeRO-1's saving). */
  num_spans = my_spans(job, reducer, &spans, &state_size);
  if (num_spans < 0) goto done;
  m = calloc(state_size + 1, sizeof(float));
  v = calloc(state_size + 1, sizeof(float));
  if (job->wire == WIRE_INT8 || job->wire == WIRE_INT8_NO_EF) {
    /* Optional: the int8 wire, for the f32 buckets (here: all of them). */
    gcommInt8Config_t qc = GCOMM_INT8_CONFIG_INITIALIZER;
    qc.error_feedback = job->wire == WIRE_INT8;
    CHECK(gcommReducerEnableCompression(reducer, gcommCompressionInt8, &qc, NULL));
  }
  if (job->powersgd > 0) {
    /* Optional: PowerSGD, each weight matrix viewed as rows x cols (0: a bias, sent
     * whole). W1 (32 x 16) is worth compressing at small ranks; W2 (4 x 32) is not. */
    const size_t rows[NPARAM] = {HIDDEN, 0, D_OUT, 0};
    gcommPowerSgdConfig_t pc = GCOMM_POWERSGD_CONFIG_INITIALIZER;
    pc.rank = job->powersgd;
    CHECK(gcommReducerEnableCompression(reducer, gcommCompressionPowerSgd, &pc, rows));
  }

  for (t = 0; t < job->steps; ++t) {
    float scale = 1.0f;
    int skip = 0;
    double sse;
    CHECK(gcommGradScalerGetScale(scaler, NULL, &scale)); /* reads the device state: a sync */
    /* Step 2: begin a synced step, produce each gradient, mark it ready. */
    CHECK(gcommReducerBeginStep(reducer, 1));
    sse = forward_backward(&w, t, first, count, scale * weight, &g);
    for (k = NPARAM - 1; k >= 0; --k) { /* backward order: the last layer's gradients first */
      CHECK_COPY(!job->gpu || cudaMemcpy(dev.p[k], g.p[k], kCount[k] * sizeof(float),
                                         cudaMemcpyHostToDevice) == cudaSuccess);
      CHECK(gcommReducerMarkReady(reducer, (size_t)k, NULL));
    }
    /* Step 3: finalize; the gradients are averaged, unscaled and checked for Inf/NaN
     * (in sharded mode: this rank's shard of them; the ranks agree on the skip). */
    CHECK(gcommReducerFinalize(reducer, NULL, &skip));
    pthread_mutex_lock(job->lock);
    job->sse[t] += sse;
    pthread_mutex_unlock(job->lock);
    if (skip) continue;    /* an overflow: the scaler has backed off, skip the update */
    if (job->opt.clip > 0) /* over shards in sharded mode: every rank calls it */
      CHECK(gcommReducerClipGradNorm(reducer, job->opt.clip, NULL, NULL));
    CHECK_COPY(!job->gpu || !copy_all(&g, &dev, cudaMemcpyDeviceToHost));
    apply_update(&job->opt, spans, num_spans, ++applied, &w, &g, m, v);
    if (job->sharded) {
      /* Step 4 (sharded): every rank gets the others' updated elements. */
      CHECK_COPY(!job->gpu || !copy_all(&dev_w, &w, cudaMemcpyHostToDevice));
      CHECK(gcommReducerAllGatherParams(reducer, GCOMM_ALL_BUCKETS, NULL));
      CHECK_COPY(!job->gpu || !copy_all(&w, &dev_w, cudaMemcpyDeviceToHost));
    }
  }

done:
  if (reducer != NULL) gcommReducerDestroy(reducer); /* before the scaler and the communicator */
  if (scaler != NULL) gcommGradScalerDestroy(scaler);
  for (k = 0; k < NPARAM; ++k) {
    free(w.p[k]);
    free(g.p[k]);
    if (dev.p[k] != NULL) cudaFree(dev.p[k]);
    if (dev_w.p[k] != NULL) cudaFree(dev_w.p[k]);
  }
  free(spans);
  free(m);
  free(v);
  return NULL;
}

/* Trains on `ranks` ranks; fills loss[t] (mean squared error of step t's global batch). */
static int train(int ranks, int steps, int gpu, int wire, int powersgd, int sharded, const Optimizer* opt,
                 double* loss) {
  gcommComm_t comms[8];
  RankJob jobs[8];
  pthread_t threads[8];
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  gcommCommConfig_t cc = GCOMM_COMM_CONFIG_INITIALIZER;
  int r, t, failed = 0;
  gcommStatus_t s = gcommCommInitLocal(ranks, gpu ? gcommCudaDevice(0) : gcommHostDevice(), &cc, comms);
  if (s != gcommSuccess) {
    fprintf(stderr, "%s (%s)\n", gcommGetLastError(), gcommGetStatusName(s));
    return 1;
  }
  for (t = 0; t < steps; ++t) loss[t] = 0;
  for (r = 0; r < ranks; ++r) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    jobs[r].rank = r, jobs[r].ranks = ranks, jobs[r].steps = steps, jobs[r].gpu = gpu, jobs[r].wire = wire;
    jobs[r].powersgd = powersgd, jobs[r].sharded = sharded, jobs[r].opt = *opt;
    jobs[r].comm = comms[r], jobs[r].sse = loss, jobs[r].lock = &lock;
    pthread_create(&threads[r], NULL, run_rank, &jobs[r]);
  }
  for (r = 0; r < ranks; ++r) {
    pthread_join(threads[r], NULL);
    if (jobs[r].error[0] != '\0') {
      fprintf(stderr, "rank %d: %s\n", r, jobs[r].error);
      failed = 1;
    }
    gcommCommDestroy(comms[r]);
  }
  for (t = 0; t < steps; ++t) loss[t] /= (double)BATCH * D_OUT;
  return failed;
}

/* The world size a launcher set (0 if none), for the process-per-rank mode: the
 * library's reading of the launchers' variables (gcommGetLauncherRank), so that the
 * example and gcommCommInitFromEnv agree on who started the process; -1 when the
 * launcher's variables are malformed (the message is printed). */
static int launcher_world_size(void) {
  int rank = -1, world = 0;
  if (gcommGetLauncherRank(&rank, &world) != gcommSuccess) {
    fprintf(stderr, "the launcher's environment is not usable: %s\n", gcommGetLastError());
    return -1;
  }
  return world;
}

/* This process is one rank of `world`: trains its share; on rank 0, *is_rank0 = 1 and
 * loss[t] is the global batch's loss (summed over the ranks with one all-reduce).
 * Sharded: it trains twice, in the all-reduce mode (into reference) then sharded. */
static int train_as_process(int world, int steps, int gpu, int wire_kind, int powersgd, int sharded,
                            const Optimizer* opt, double* loss, double* reference, int* is_rank0) {
  gcommCommConfig_t cc = GCOMM_COMM_CONFIG_INITIALIZER;
  gcommComm_t comm = NULL;
  RankJob job;
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  float sums[2 * MAX_STEPS];
  void* wire = sums;
  int t, rank = 0, failed = 0, runs = sharded ? 2 : 1, run;
  size_t total = (size_t)(runs * steps);
  gcommStatus_t s;
  if (!gpu) cc.device = gcommHostDevice(); /* else cuda:<local rank> */
  s = gcommCommInitFromEnv(&cc, &comm);
  if (s != gcommSuccess) {
    fprintf(stderr, "%s (%s)\n", gcommGetLastError(), gcommGetStatusName(s));
    return 1;
  }
  gcommCommRank(comm, &rank);
  *is_rank0 = rank == 0;
  if (world > 8) {
    fprintf(stderr, "rank %d: the world size (%d) is above 8\n", rank, world);
    gcommCommDestroy(comm);
    return 1;
  }
  for (run = 0; run < runs && !failed; ++run) {
    double* curve = run + 1 < runs ? reference : loss; /* sharded: all-reduce first */
    for (t = 0; t < steps; ++t) curve[t] = 0;
    memset(&job, 0, sizeof job);
    job.rank = rank, job.ranks = world, job.steps = steps, job.gpu = gpu, job.wire = wire_kind,
    job.powersgd = powersgd;
    job.sharded = run + 1 == runs && sharded, job.opt = *opt;
    job.comm = comm, job.sse = curve, job.lock = &lock;
    run_rank(&job);
    if (job.error[0] != '\0') {
      fprintf(stderr, "rank %d: %s\n", rank, job.error);
      failed = 1;
    }
    for (t = 0; t < steps; ++t) sums[run * steps + t] = (float)curve[t];
  }
  if (!failed) {
    /* One all-reduce of every step's squared error, on the communicator's device. */
    if (gpu && cudaMalloc(&wire, sizeof sums) != cudaSuccess) wire = NULL;
    if (wire == NULL || (gpu && cudaMemcpy(wire, sums, sizeof sums, cudaMemcpyHostToDevice) != cudaSuccess) ||
        gcommAllReduce(comm, wire, wire, total, gcommFloat32, gcommSum, NULL) != gcommSuccess ||
        gcommCommSynchronize(comm) != gcommSuccess ||
        (gpu && cudaMemcpy(sums, wire, sizeof sums, cudaMemcpyDeviceToHost) != cudaSuccess)) {
      fprintf(stderr, "rank %d: summing the losses: %s\n", rank, gcommGetLastError());
      failed = 1;
    }
    if (gpu && wire != NULL) cudaFree(wire);
    for (run = 0; run < runs; ++run)
      for (t = 0; t < steps; ++t)
        (run + 1 < runs ? reference : loss)[t] = (double)sums[run * steps + t] / ((double)BATCH * D_OUT);
  }
  gcommCommDestroy(comm);
  return failed;
}

int main(int argc, char** argv) {
  int ranks = 4, steps = 200, gpu = 0, powersgd = 0, sharded = 0, i, t, bad = 0,
      world = launcher_world_size(), is_rank0 = 1, wire = WIRE_F16;
  Optimizer opt = {0, 0.0f};
  static double single[MAX_STEPS], multi[MAX_STEPS], reference[MAX_STEPS];
  double worst = 0, worst_modes = 0, tolerance;
  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc)
      ranks = atoi(argv[++i]);
    else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--gpu") == 0)
      gpu = 1;
    else if (strcmp(argv[i], "--powersgd") == 0 && i + 1 < argc)
      powersgd = atoi(argv[++i]);
    else if (strcmp(argv[i], "--sharded") == 0)
      sharded = 1;
    else if (strcmp(argv[i], "--int8") == 0)
      wire = WIRE_INT8;
    else if (strcmp(argv[i], "--int8-no-ef") == 0)
      wire = WIRE_INT8_NO_EF;
    else if (strcmp(argv[i], "--adam") == 0)
      opt.adam = 1;
    else if (strcmp(argv[i], "--clip") == 0 && i + 1 < argc)
      opt.clip = (float)atof(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--ranks 1|2|4|8] [--steps N<=%d] [--gpu] [--powersgd RANK | --sharded | --int8 | "
              "--int8-no-ef] [--adam] [--clip MAX_NORM]\n",
              argv[0], MAX_STEPS);
      return 2;
    }
  }
  if (world < 0) return 2;
  if (powersgd < 0 || powersgd > 32) {
    fprintf(stderr, "--powersgd takes PowerSGD's rank, 1..32\n");
    return 2;
  }
  if (wire != WIRE_F16 && (powersgd > 0 || sharded)) {
    fprintf(stderr,
            "--int8 combines with neither --powersgd nor --sharded (one compression strategy; no sharded "
            "int8 wire)\n");
    return 2;
  }
  if (powersgd > 0 && sharded) {
    fprintf(stderr,
            "--powersgd and --sharded do not combine (the reducer refuses PowerSGD in sharded mode)\n");
    return 2;
  }
  if (!(opt.clip >= 0.0f) || opt.clip > 1e30f) {
    fprintf(stderr, "--clip takes a positive maximum norm\n");
    return 2;
  }
  if (ranks < 1 || ranks > 8 || steps < 1 || steps > MAX_STEPS) {
    fprintf(stderr, "ranks must be 1..8 and steps 1..%d\n", MAX_STEPS);
    return 2;
  }
  if (gpu) {
    int n = 0;
    if (gcommGetCudaDeviceCount(&n) != gcommSuccess || n == 0) {
      printf("--gpu: no usable GPU here; nothing to do\n");
      return 77; /* CTest's skip code for example.mlp_gpu */
    }
  }
  make_data(steps);
  if (world > 1) {
    /* One rank per process: train, sum the losses, and let rank 0 check them. */
    if (train_as_process(world, steps, gpu, wire, powersgd, sharded, &opt, multi, reference, &is_rank0))
      return 1;
    if (!is_rank0) return 0;
    ranks = world;
    if (train(1, steps, 0, 0, 0, 0, &opt, single)) return 1;
  } else if (train(1, steps, 0, 0, 0, 0, &opt, single) ||
             (sharded && train(ranks, steps, gpu, WIRE_F16, 0, 0, &opt, reference)) ||
             train(ranks, steps, gpu, wire, powersgd, sharded, &opt, multi)) {
    return 1;
  }
  printf("step   1 rank, f32, host   %d ranks%s, %s wire%s%s%s%s, %s\n", ranks,
         world > 1 ? " (processes)" : "",
         wire == WIRE_F16    ? "f16"
         : wire == WIRE_INT8 ? "int8"
                             : "int8 (no error feedback)",
         powersgd > 0 ? ", PowerSGD" : "", sharded ? ", sharded" : "", opt.adam ? ", Adam" : ", SGD",
         opt.clip > 0 ? ", clipped" : "", gpu ? (world > 1 ? "GPUs" : "GPU 0") : "host");
  for (t = 0; t < steps; ++t) {
    double rel = fabs(multi[t] - single[t]) / single[t];
    if (rel > worst) worst = rel;
    if (sharded && fabs(multi[t] - reference[t]) / reference[t] > worst_modes)
      worst_modes = fabs(multi[t] - reference[t]) / reference[t];
    if (t % 20 == 0 || t == steps - 1) printf("%4d   %.6f            %.6f\n", t, single[t], multi[t]);
  }
  /* f16 rounding moves the curve by well under 1%; PowerSGD's low-rank approximation
   * (with error feedback) by a few percent at the ranks that compress this model. */
  tolerance = powersgd > 0 ? 0.05 : 0.01;
  bad = worst > tolerance || !(multi[steps - 1] < 0.5 * multi[0]);
  if (sharded) {
    /* The same reduced gradients and the same update per element: the sharded run
     * must retrace the all-reduce mode's curve. */
    printf(
        "sharded vs all-reduce mode, the same %d ranks: largest relative difference %.2e (limit 1e-06: %s)\n",
        ranks, worst_modes, worst_modes > 1e-6 ? "FAIL" : "ok");
    bad = bad || worst_modes > 1e-6;
  }
  /* Two criteria, each on its own line, so that a FAIL names the one that failed. */
  printf("largest relative difference of the loss curves: %.2e (limit %.0e: %s)\n", worst, tolerance,
         worst > tolerance ? "FAIL" : "ok");
  printf("loss %.4f -> %.4f (must at least halve in %d steps: %s)\n", multi[0], multi[steps - 1], steps,
         multi[steps - 1] < 0.5 * multi[0] ? "ok" : "FAIL; train more steps (--steps)");
  return bad;
}
