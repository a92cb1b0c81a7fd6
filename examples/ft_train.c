/* Training through failures with gradcomm's C API (docs/fault-tolerance.md).
 *
 * Each process is one member of a fault-tolerant job whose membership server is
 * gradcomm-store (its address in GRADCOMM_STORE). The members train a linear
 * model y = w.x by SGD on data of their own (each rank draws its batch from the
 * step, its rank and the world size), averaging the gradients with one
 * all-reduce a step. Every step ends with a vote: it is applied on every member
 * or on none. A member that dies or freezes ends its generation; the survivors
 * go on in the next one, averaging over the live world. A process that joins
 * (a restarted one) receives the parameters from the survivors of its first
 * generation (gcommMembershipSyncState), and the step counter from the server.
 *
 * At the end each member prints its committed steps, its loss, a hash of its
 * parameters (equal on every member) and its counters; every --check steps the
 * members compare their parameters with gcommCommCheckDivergence.
 *
 *   gradcomm-store --port 29400 &
 *   GRADCOMM_STORE=127.0.0.1:29400 gradcomm_example_ft --min-ranks 3 --steps 200 &   (three times)
 *
 * For the tests, members fail on purpose (each option may be given up to 8 times):
 *   --die S:R         rank R of the first generation kills itself (SIGKILL) when the
 *                     job has committed S steps, before that step's all-reduce
 *   --die-during S:R  the same, 5 ms into that step's all-reduce (give --payload)
 *   --freeze S:R:T    the same, stopped (SIGSTOP) for T seconds instead: a child
 *                     process sends it SIGCONT
 *   --die-syncing R   rank R of a generation with newcomers kills itself as it
 *                     starts sending or receiving the state
 *   --payload MIB     all-reduce MIB more of data each step (a larger collective)
 * and for the lab's chaos run (bench/netlab/chaos.py):
 *   --state-mib MIB   MIB more of state (as an optimizer's would be) for newcomers
 *                     to receive; a newcomer prints how long that took
 *   --log-steps       a line per committed step, with the wall-clock time
 * --gpu keeps what crosses the wire (gradients, payload, state) on GPU 0: every
 * member on one GPU, over cuda-ipc (exit 77, skipped, without a GPU).
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <gradcomm/gradcomm.h>

enum { DIM = 64, BATCH = 32 };

static float uniform(uint32_t* s) { /* xorshift32 in [-1, 1) */
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return (float)((*s >> 8) * (1.0 / 8388608.0)) - 1.0f;
}

/* The batch of `rank` of `world` at job step `step`: the gradient of the squared
 * error, summed over the batch, into grad; returns the batch's mean loss. */
static float batch_gradient(const float* w, uint64_t step, int rank, int world, float* grad) {
  uint32_t truth = 12345u,
           data = (uint32_t)(step * 2654435761u) ^ (uint32_t)(rank * 40503u + world * 977u) ^ 1u;
  float w_true[DIM], x[DIM], loss = 0.0f;
  int i, b;
  for (i = 0; i < DIM; ++i) w_true[i] = uniform(&truth);
  memset(grad, 0, DIM * sizeof(float));
  for (b = 0; b < BATCH; ++b) {
    float y = 0.0f, p = 0.0f, err;
    for (i = 0; i < DIM; ++i) {
      x[i] = uniform(&data);
      y += w_true[i] * x[i];
      p += w[i] * x[i];
    }
    y += 0.1f * uniform(&data); /* label noise: the loss has a floor, as real data's does */
    err = p - y;
    loss += 0.5f * err * err;
    for (i = 0; i < DIM; ++i) grad[i] += err * x[i];
  }
  return loss / BATCH;
}

/* The mean loss on a held-out set (1024 samples, the same for every run). */
static float eval_loss(const float* w) {
  float grad[DIM], sum = 0.0f;
  int b;
  for (b = 0; b < 32; ++b) sum += batch_gradient(w, 1000000007ull + (uint64_t)b, 0, 1, grad);
  return sum / 32.0f;
}

static uint64_t params_hash(const float* w) {
  const unsigned char* p = (const unsigned char*)w;
  uint64_t h = 1469598103934665603ull;
  size_t i;
  for (i = 0; i < DIM * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

enum { MAX_FAULTS = 8 };
typedef enum { DIE, DIE_DURING, FREEZE, DIE_SYNCING } FaultKind;
typedef struct {
  FaultKind kind;
  long step, rank, seconds;
  int done;
} Fault;

/* SIGKILL from a child process `ms` milliseconds from now. */
static void kill_me_in(long ms) {
  const pid_t me = getpid();
  fflush(stdout);
  if (fork() == 0) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&t, NULL);
    kill(me, SIGKILL);
    _exit(0);
  }
}

/* SIGSTOP for `seconds`: a child wakes this process up, as a debugger or an
 * overloaded machine would. */
static void freeze_for(long seconds) {
  const pid_t me = getpid();
  fflush(stdout);
  if (fork() == 0) {
    sleep((unsigned)seconds);
    kill(me, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
}

/* With --gpu, `host` mirrored on the device: copies in either direction (the
 * legacy default stream orders them after the collectives on stream NULL). */
static int to_device(void* device, const void* host, size_t bytes) {
  return device == host || cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}
static int to_host(void* host, const void* device, size_t bytes) {
  return device == host || cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}
static void* on_device(size_t bytes) {
  void* p = NULL;
  if (bytes > 0 && cudaMalloc(&p, bytes) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes);
    exit(1);
  }
  return p;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_ms(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, NULL);
}

int main(int argc, char** argv) {
  gcommMembershipConfig_t config = GCOMM_MEMBERSHIP_CONFIG_INITIALIZER;
  gcommMembershipStats_t stats = GCOMM_MEMBERSHIP_STATS_INITIALIZER;
  gcommMembership_t m;
  gcommComm_t comm;
  gcommMembershipView_t view;
  float w[DIM], grad[DIM], loss = 0.0f, lr = 0.05f;
  uint64_t step = 0, steps = 200;
  long step_ms = 0, check_every = 20, payload_mib = 0, state_mib = 0;
  int log_steps = 0, gpu = 0;
  double vote_s = 0.0, vote_started = 0.0;
  long votes = 0;
  float *w_wire = w, *grad_wire = grad, *payload_wire = NULL;
  unsigned char* state_wire = NULL;
  unsigned char* extra_state = NULL;
  gcommMembershipStats_t before = GCOMM_MEMBERSHIP_STATS_INITIALIZER;
  Fault faults[MAX_FAULTS];
  int a, f, nfaults = 0, committed;
  float* payload = NULL;
  char change[2048];

  for (a = 1; a < argc; ++a) {
    const char* next = a + 1 < argc ? argv[a + 1] : NULL;
    if (strcmp(argv[a], "--steps") == 0 && next) {
      steps = strtoull(argv[++a], NULL, 10);
    } else if (strcmp(argv[a], "--min-ranks") == 0 && next) {
      config.min_ranks = atoi(argv[++a]);
    } else if (strcmp(argv[a], "--timeout") == 0 && next) {
      config.timeout_s = atof(argv[++a]);
    } else if (strcmp(argv[a], "--quorum-timeout") == 0 && next) {
      config.quorum_timeout_s = atof(argv[++a]);
    } else if (strcmp(argv[a], "--step-ms") == 0 && next) {
      step_ms = atol(argv[++a]);
    } else if (strcmp(argv[a], "--check") == 0 && next) {
      check_every = atol(argv[++a]);
    } else if (strcmp(argv[a], "--transport") == 0 && next) {
      ++a;
      config.transport = strcmp(argv[a], "shm") == 0      ? gcommTransportShm
                         : strcmp(argv[a], "socket") == 0 ? gcommTransportSocket
                                                          : gcommTransportAuto;
    } else if (strcmp(argv[a], "--state-mib") == 0 && next) {
      state_mib = atol(argv[++a]);
    } else if (strcmp(argv[a], "--name") == 0 && next) {
      config.name = argv[++a];
    } else if (strcmp(argv[a], "--gpu") == 0) {
      gpu = 1;
    } else if (strcmp(argv[a], "--log-steps") == 0) {
      log_steps = 1;
    } else if (strcmp(argv[a], "--payload") == 0 && next) {
      payload_mib = atol(argv[++a]);
    } else if (nfaults < MAX_FAULTS && next &&
               ((strcmp(argv[a], "--die") == 0 &&
                 sscanf(next, "%ld:%ld", &faults[nfaults].step, &faults[nfaults].rank) == 2 &&
                 (faults[nfaults].kind = DIE, 1)) ||
                (strcmp(argv[a], "--die-during") == 0 &&
                 sscanf(next, "%ld:%ld", &faults[nfaults].step, &faults[nfaults].rank) == 2 &&
                 (faults[nfaults].kind = DIE_DURING, 1)) ||
                (strcmp(argv[a], "--freeze") == 0 &&
                 sscanf(next, "%ld:%ld:%ld", &faults[nfaults].step, &faults[nfaults].rank,
                        &faults[nfaults].seconds) == 3 &&
                 (faults[nfaults].kind = FREEZE, 1)) ||
                (strcmp(argv[a], "--die-syncing") == 0 && sscanf(next, "%ld", &faults[nfaults].rank) == 1 &&
                 (faults[nfaults].kind = DIE_SYNCING, 1)))) {
      faults[nfaults++].done = 0;
      ++a;
    } else {
      fprintf(stderr,
              "usage: %s [--steps N] [--min-ranks K] [--timeout S] [--quorum-timeout S] [--step-ms MS] "
              "[--check N] [--transport auto|shm|socket] [--payload MIB] [--state-mib MIB] [--log-steps] "
              "[--name NAME] [--gpu] [--die STEP:RANK] [--die-during STEP:RANK] "
              "[--freeze STEP:RANK:SECONDS] [--die-syncing RANK]\n",
              argv[0]);
      return 2;
    }
  }
  memset(w, 0, sizeof(w));
  if (log_steps) setvbuf(stdout, NULL, _IOLBF, 0); /* a killed member's last lines are kept */
  if (state_mib > 0) {                             /* the same bytes on every original member */
    size_t i;
    extra_state = (unsigned char*)malloc((size_t)state_mib << 20);
    if (extra_state == NULL) return 1;
    for (i = 0; i < ((size_t)state_mib << 20); ++i) extra_state[i] = (unsigned char)(i * 31u);
  }
  if (payload_mib > 0) {
    payload = (float*)calloc((size_t)payload_mib << 18, sizeof(float));
    if (payload == NULL) return 1;
  }
  payload_wire = payload;
  state_wire = extra_state;
  if (gpu) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      printf("skipped: --gpu needs a GPU\n");
      return 77;
    }
    config.device.kind = gcommDeviceCuda;
    config.device.ordinal = 0;
    w_wire = (float*)on_device(sizeof(w));
    grad_wire = (float*)on_device(sizeof(grad));
    payload_wire = (float*)on_device(((size_t)payload_mib << 18) * sizeof(float));
    state_wire = (unsigned char*)on_device((size_t)state_mib << 20);
    if ((payload_wire != NULL &&
         cudaMemset(payload_wire, 0, ((size_t)payload_mib << 18) * sizeof(float)) != cudaSuccess) ||
        (state_wire != NULL && !to_device(state_wire, extra_state, (size_t)state_mib << 20))) {
      fprintf(stderr, "copying to the GPU failed\n");
      return 1;
    }
  }
  if (getenv("TORCHELASTIC_RESTART_COUNT") != NULL && atoi(getenv("TORCHELASTIC_RESTART_COUNT")) > 0)
    printf("restart %d by torchrun's agent\n", atoi(getenv("TORCHELASTIC_RESTART_COUNT")));
  if (gcommMembershipJoin(&config, &m) != gcommSuccess) {
    fprintf(stderr, "cannot join: %s\n", gcommGetLastError());
    return 1;
  }
  while (step < steps) {
    int ok = 1;
    char why[512] = "";
    if (gcommMembershipQuorum(m, &comm, &view) != gcommSuccess) {
      fprintf(stderr, "no quorum: %s\n", gcommGetLastError());
      gcommMembershipLeave(m);
      return 3;
    }
    if (view.changed) {
      gcommMembershipGetChange(m, change, sizeof(change), NULL);
      printf("generation %u: rank %d of %d at step %llu: %s\n", view.generation, view.rank, view.world_size,
             (unsigned long long)view.committed_steps, change);
      fflush(stdout);
      step = view.committed_steps;
      /* Newcomers take the survivors' parameters (view.holders of them send). */
      void* state[2] = {w_wire, state_wire};
      size_t state_bytes[2] = {sizeof(w), (size_t)state_mib << 20};
      const size_t spans = extra_state != NULL ? 2 : 1;
      const int newcomer = view.rank >= view.holders;
      for (f = 0; f < nfaults; ++f)
        if (faults[f].kind == DIE_SYNCING && view.holders < view.world_size && !faults[f].done) {
          faults[f].done = 1; /* only in the first generation with newcomers this process sees */
          if (view.rank != faults[f].rank) continue;
          printf("rank %d dies as it brings the newcomers up to date\n", view.rank);
          fflush(stdout);
          raise(SIGKILL);
        }
      if (newcomer && state_wire != NULL)
        gpu ? (void)cudaMemset(state_wire, 0, (size_t)state_mib << 20)
            : (void)memset(state_wire, 0, (size_t)state_mib << 20);
      gcommMembershipGetStats(m, &before);
      if (!to_device(w_wire, w, sizeof(w)) ||
          gcommMembershipSyncState(m, state, state_bytes, spans, NULL) != gcommSuccess ||
          !to_host(w, w_wire, sizeof(w))) {
        ok = 0;
        snprintf(why, sizeof(why), "%s", gcommGetLastError());
      } else if (newcomer) {
        gcommMembershipGetStats(m, &stats);
        printf("caught up: received %llu bytes of state from %d holder(s) in %.3f s\n",
               (unsigned long long)(stats.state_bytes_received - before.state_bytes_received), view.holders,
               stats.state_sync_s - before.state_sync_s);
      }
    }
    for (f = 0; f < nfaults; ++f) {
      Fault* x = &faults[f];
      if (x->kind == DIE_SYNCING || x->done || view.generation != 1 || (long)step != x->step ||
          view.rank != x->rank)
        continue;
      x->done = 1;
      if (x->kind == DIE) raise(SIGKILL);
      if (x->kind == DIE_DURING) kill_me_in(5);
      if (x->kind == FREEZE) {
        printf("rank %d freezes for %ld s at step %llu\n", view.rank, x->seconds, (unsigned long long)step);
        freeze_for(x->seconds);
      }
    }
    if (step_ms > 0) sleep_ms(step_ms);
    loss = batch_gradient(w, step, view.rank, view.world_size, grad);
    if (ok && payload != NULL &&
        gcommAllReduce(comm, payload_wire, payload_wire, (size_t)payload_mib << 18, gcommFloat32, gcommSum,
                       NULL) != gcommSuccess) {
      ok = 0;
      snprintf(why, sizeof(why), "%s", gcommGetLastError());
    }
    if (ok &&
        (!to_device(grad_wire, grad, sizeof(grad)) ||
         gcommAllReduce(comm, grad_wire, grad_wire, DIM, gcommFloat32, gcommSum, NULL) != gcommSuccess ||
         !to_host(grad, grad_wire, sizeof(grad)))) {
      ok = 0;
      snprintf(why, sizeof(why), "%s", gcommGetLastError());
    }
    vote_started = now_s();
    if (gcommMembershipCommit(m, ok, ok ? NULL : why, &committed) != gcommSuccess) {
      fprintf(stderr, "refused: %s\n", gcommGetLastError());
      gcommMembershipLeave(m);
      return 4;
    }
    vote_s += now_s() - vote_started;
    ++votes;
    if (!committed) {
      printf("step %llu discarded (%s)\n", (unsigned long long)step + 1, ok ? "another member failed" : why);
      continue;
    }
    {
      int i;
      const float scale = lr / (float)(BATCH * view.world_size); /* the mean over the live world's samples */
      for (i = 0; i < DIM; ++i) w[i] -= scale * grad[i];
    }
    ++step;
    if (log_steps) {
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      printf("committed step %llu at %.3f, world %d\n", (unsigned long long)step,
             now.tv_sec + now.tv_nsec * 1e-9, view.world_size);
    }
    if (check_every > 0 && step % (uint64_t)check_every == 0) {
      const void* data[2] = {w_wire, state_wire};
      size_t bytes[2] = {sizeof(w), (size_t)state_mib << 20}, mismatched = 0;
      int64_t first[256];
      if (view.world_size <= 256 && to_device(w_wire, w, sizeof(w)) &&
          gcommCommCheckDivergence(comm, data, bytes, extra_state != NULL ? 2 : 1, NULL, first,
                                   &mismatched) == gcommSuccess &&
          mismatched != 0) {
        fprintf(stderr, "DIVERGED at step %llu\n", (unsigned long long)step);
        return 5;
      }
    }
  }
  gcommMembershipGetStats(m, &stats);
  printf(
      "rank %d of %d: committed %llu steps, loss %.6f, params %016llx, generations %llu, failures survived "
      "%llu, steps discarded %llu, recovery %.3f s, eval loss %.8f, vote %.1f us\n",
      view.rank, view.world_size, (unsigned long long)step, loss, (unsigned long long)params_hash(w),
      (unsigned long long)stats.generations, (unsigned long long)stats.failures_survived,
      (unsigned long long)stats.steps_discarded, stats.recovery_s, eval_loss(w),
      votes > 0 ? 1e6 * vote_s / (double)votes : 0.0);
  gcommMembershipLeave(m);
  free(payload);
  free(extra_state);
  if (gpu) {
    cudaFree(w_wire);
    cudaFree(grad_wire);
    cudaFree(payload_wire);
    cudaFree(state_wire);
  }
  return 0;
}
