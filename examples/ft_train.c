/* Training through failures with gradcomm's C API (docs/fault-tolerance.md).
 *
 * Each process is one member of a fault-tolerant job whose membership server is
 * gradcomm-store (its address in GRADCOMM_STORE). The members train a linear
 * model y = w.x by SGD on data of their own (each rank draws its batch from the
 * step, its rank and the world size), averaging the gradients with one
 * all-reduce a step. Every step ends with a vote: it is applied on every member
 * or on none. A member that dies or freezes ends its generation; the survivors
 * go on in the next one, averaging over the live world. A process that joins
 * (a restarted one) receives the parameters from rank 0 of its first generation,
 * a survivor, by a broadcast, and the step counter from the server.
 *
 * At the end each member prints its committed steps, its loss, a hash of its
 * parameters (equal on every member) and its counters; every --check steps the
 * members compare their parameters with gcommCommCheckDivergence.
 *
 *   gradcomm-store --port 29400 &
 *   GRADCOMM_STORE=127.0.0.1:29400 gradcomm_example_ft --min-ranks 3 --steps 200 &   (three times)
 *
 * For the tests, a member can fail on purpose, once, in the job's first
 * generation: --die S:R kills (SIGKILL) the process that is rank R when the job
 * has committed S steps, just before that step's all-reduce; --freeze S:R:T stops
 * it there (SIGSTOP) for T seconds (a child process sends it SIGCONT).
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
  uint32_t truth = 12345u, data = (uint32_t)(step * 2654435761u) ^ (uint32_t)(rank * 40503u + world * 977u) ^ 1u;
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
    err = p - y;
    loss += 0.5f * err * err;
    for (i = 0; i < DIM; ++i) grad[i] += err * x[i];
  }
  return loss / BATCH;
}

static uint64_t params_hash(const float* w) {
  const unsigned char* p = (const unsigned char*)w;
  uint64_t h = 1469598103934665603ull;
  size_t i;
  for (i = 0; i < DIM * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static int parse_pair(const char* text, long* a, long* b) {
  return sscanf(text, "%ld:%ld", a, b) == 2;
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
  long die_step = -1, die_rank = -1, freeze_step = -1, freeze_rank = -1, freeze_s = 0, step_ms = 0, check_every = 20;
  int a, committed;
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
    } else if (strcmp(argv[a], "--die") == 0 && next && parse_pair(argv[a + 1], &die_step, &die_rank)) {
      ++a;
    } else if (strcmp(argv[a], "--freeze") == 0 && next &&
               sscanf(argv[a + 1], "%ld:%ld:%ld", &freeze_step, &freeze_rank, &freeze_s) == 3) {
      ++a;
    } else {
      fprintf(stderr,
              "usage: %s [--steps N] [--min-ranks K] [--timeout S] [--quorum-timeout S] [--step-ms MS] "
              "[--check N] [--transport auto|shm|socket] [--die STEP:RANK] [--freeze STEP:RANK:SECONDS]\n",
              argv[0]);
      return 2;
    }
  }
  memset(w, 0, sizeof(w));
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
      /* A newcomer takes the survivors' parameters: rank 0 is the oldest member. */
      if (gcommBroadcast(comm, w, w, DIM, gcommFloat32, 0, NULL) != gcommSuccess) {
        ok = 0;
        snprintf(why, sizeof(why), "%s", gcommGetLastError());
      }
    }
    if (view.generation == 1 && (long)step == die_step && view.rank == die_rank) raise(SIGKILL);
    if (view.generation == 1 && (long)step == freeze_step && view.rank == freeze_rank) {
      printf("rank %d freezes for %ld s at step %llu\n", view.rank, freeze_s, (unsigned long long)step);
      freeze_for(freeze_s);
      freeze_step = -1;
    }
    if (step_ms > 0) sleep_ms(step_ms);
    loss = batch_gradient(w, step, view.rank, view.world_size, grad);
    if (ok && gcommAllReduce(comm, grad, grad, DIM, gcommFloat32, gcommSum, NULL) != gcommSuccess) {
      ok = 0;
      snprintf(why, sizeof(why), "%s", gcommGetLastError());
    }
    if (gcommMembershipCommit(m, ok, ok ? NULL : why, &committed) != gcommSuccess) {
      fprintf(stderr, "refused: %s\n", gcommGetLastError());
      gcommMembershipLeave(m);
      return 4;
    }
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
    if (check_every > 0 && step % (uint64_t)check_every == 0) {
      const void* data[1] = {w};
      size_t bytes[1] = {sizeof(w)}, mismatched = 0;
      int64_t first[256];
      if (view.world_size <= 256 &&
          gcommCommCheckDivergence(comm, data, bytes, 1, NULL, first, &mismatched) == gcommSuccess &&
          mismatched != 0) {
        fprintf(stderr, "DIVERGED at step %llu\n", (unsigned long long)step);
        return 5;
      }
    }
  }
  gcommMembershipGetStats(m, &stats);
  printf("rank %d of %d: committed %llu steps, loss %.6f, params %016llx, generations %llu, failures survived "
         "%llu, steps discarded %llu, recovery %.3f s\n",
         view.rank, view.world_size, (unsigned long long)step, loss, (unsigned long long)params_hash(w),
         (unsigned long long)stats.generations, (unsigned long long)stats.failures_survived,
         (unsigned long long)stats.steps_discarded, stats.recovery_s);
  gcommMembershipLeave(m);
  return 0;
}
