/*
 * gradcomm — training through failures (docs/fault-tolerance.md).
 *
 * A fault-tolerant job has a membership server that outlives every rank: the
 * gradcomm-store program (or gcommStoreServerStart in a process of your own).
 * Each process joins the job as a member; at every step boundary the live members
 * agree, through the server, on a numbered generation (the live set, in rank
 * order) and get a communicator of that generation; every step ends with a vote
 * that commits it on every member or on none. A member that dies, freezes or
 * leaves ends its generation; the survivors get the next one, without it, at the
 * next step boundary; a new process joins the same way.
 *
 *   gcommMembershipJoin(&config, &m);
 *   for (;;) {
 *     gcommMembershipQuorum(m, &comm, &view);   // the same comm until a change
 *     ok = (compute and gcommAllReduce(comm, ...) == gcommSuccess);
 *     gcommMembershipCommit(m, ok, NULL, &committed);
 *     if (committed) apply the step (average over view.world_size);
 *   }
 *   gcommMembershipLeave(m);
 *
 * Thread safety: one thread at a time per membership.
 */
#ifndef GRADCOMM_MEMBERSHIP_H
#define GRADCOMM_MEMBERSHIP_H

#include "gradcomm/comm.h"
#include "gradcomm/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The membership server (what gradcomm-store runs) ---- */

typedef struct gcommStoreServer* gcommStoreServer_t;

/** Starts a membership server listening on @p port (0: any free port) on every
 *  interface of @p host's address family (NULL: "0.0.0.0"), serving on threads
 *  of this process until gcommStoreServerStop. It serves any number of jobs,
 *  kept apart by their job key, and hosts each generation's rendezvous. */
GCOMM_API gcommStatus_t gcommStoreServerStart(const char* host, int port, gcommStoreServer_t* server);
/** The port it listens on. */
GCOMM_API gcommStatus_t gcommStoreServerPort(gcommStoreServer_t server, int* port);
/** Closes every member's connection and stops the server. */
GCOMM_API gcommStatus_t gcommStoreServerStop(gcommStoreServer_t server);

/* ---- A member of a fault-tolerant job ---- */

typedef struct gcommMembership* gcommMembership_t;

/** Membership configuration (versioned config struct, version 1). */
typedef struct gcommMembershipConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  const char* store;          /**< "host:port" of the membership server; NULL: GRADCOMM_STORE */
  const char* job_key;        /**< NULL: GRADCOMM_JOB_KEY, else "gradcomm" */
  const char* name;           /**< this process in messages; NULL: "<hostname>:<pid>" */
  int min_ranks;              /**< the first generation forms once this many members ask (>= 1) */
  int32_t reserved_v1;        /**< leave 0 */
  double quorum_timeout_s;    /**< a member of the last generation that has not asked for the
                                   next quorum this long after the first did is excluded (a frozen
                                   or partitioned process); <= 0: 1 s */
  double timeout_s;           /**< the communicators' timeout and the commit timeout (a vote waits
                                   this long for the others'); a quorum is waited for up to
                                   2 * timeout_s + quorum_timeout_s + 5 s (a newcomer waits for the
                                   running generation's next step boundary); <= 0:
                                   GRADCOMM_TIMEOUT_S, else 300 s */
  gcommDevice_t device;       /**< the communicators' device (default: host) */
  gcommTransport_t transport; /**< the communicators' transport (default: auto) */
  int32_t reserved_v1b;       /**< leave 0 */
} gcommMembershipConfig_t;

#define GCOMM_MEMBERSHIP_CONFIG_INITIALIZER                                                                \
  {                                                                                                        \
    GCOMM_CONFIG_HEADER(gcommMembershipConfig_t), NULL, NULL, NULL, 1, 0, 0.0, 0.0, {gcommDeviceHost, -1}, \
        gcommTransportAuto, 0                                                                              \
  }

/** Where this member stands (filled by gcommMembershipQuorum). */
typedef struct gcommMembershipView {
  uint32_t generation;      /**< the live set's number: 1, 2, ... (every change adds one) */
  int rank;                 /**< this member's rank in it */
  int world_size;           /**< how many live members it has: average over this */
  int changed;              /**< 1: a new generation (and communicator) since the last call */
  int holders;              /**< ranks 0..holders-1 hold the job's state (they were in the last
                                 generation); ranks from holders on are newcomers, which
                                 gcommMembershipSyncState brings up to date. In the first
                                 generation, or when none of the last survived, every rank */
  uint64_t committed_steps; /**< steps the job committed before this generation's next */
} gcommMembershipView_t;

/** Counters of this member (versioned struct, version 1: set it with
 *  GCOMM_MEMBERSHIP_STATS_INITIALIZER before asking). */
typedef struct gcommMembershipStats {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t generations;          /**< generations this member belonged to */
  uint64_t failures_survived;    /**< generations it entered after one ended by a failure */
  uint64_t steps_committed;      /**< its votes that committed */
  uint64_t steps_discarded;      /**< its votes that did not (a failure during the step) */
  double recovery_s;             /**< time from a discarded step to the next generation's communicator */
  uint64_t state_bytes_sent;     /**< sent to newcomers by gcommMembershipSyncState */
  uint64_t state_bytes_received; /**< received from the holders by gcommMembershipSyncState */
  double state_sync_s;           /**< time in gcommMembershipSyncState calls that moved bytes */
} gcommMembershipStats_t;

#define GCOMM_MEMBERSHIP_STATS_INITIALIZER \
  { GCOMM_CONFIG_HEADER(gcommMembershipStats_t), 0, 0, 0, 0, 0.0, 0, 0, 0.0 }

/** Connects to the membership server and joins the job (no communicator yet). */
GCOMM_API gcommStatus_t gcommMembershipJoin(const gcommMembershipConfig_t* config,
                                            gcommMembership_t* membership);
/** The current generation's communicator in @p comm, and this member's place in
 *  @p view (may be NULL). Free while nothing changed; after a failed or
 *  reconfiguring step it agrees the next generation with the live members
 *  (waiting as config.timeout_s says) and builds its communicator. The membership owns the
 *  communicator: do not destroy it. The one it replaces is destroyed, and its
 *  handle is refused by every later call (gcommInvalidArgument), so a stale handle
 *  is never used silently; while a reducer still uses it this call fails with
 *  gcommInvalidState, changing nothing (gcommMembershipChangePending).
 *  gcommInvalidState: this member was excluded (it froze past the quorum timeout)
 *  and can never take part again: leave, and join as a new member. */
GCOMM_API gcommStatus_t gcommMembershipQuorum(gcommMembership_t membership, gcommComm_t* comm,
                                              gcommMembershipView_t* view);
/** Votes on the step: @p ok = 1 if its collectives succeeded here (@p why, may
 *  be NULL, says what failed otherwise). @p committed receives 1 when every
 *  member of the generation voted ok: apply the step. 0: discard it (every
 *  member got 0); the communicator was aborted and the next
 *  gcommMembershipQuorum builds the next generation's. */
GCOMM_API gcommStatus_t gcommMembershipCommit(gcommMembership_t membership, int ok, const char* why,
                                              int* committed);
/** @p pending receives 1 when the next gcommMembershipQuorum makes a new
 *  generation (the last step failed, a member left or waits to join): the time to
 *  destroy the reducers on the communicator (saving their compression state),
 *  which gcommMembershipQuorum refuses to replace while they use it. */
GCOMM_API gcommStatus_t gcommMembershipChangePending(gcommMembership_t membership, int* pending);
/** Brings newcomers up to date: call it on every member after a
 *  gcommMembershipQuorum whose view says changed, with the same @p n spans of
 *  state (parameters, optimizer state, compression state: anything that must be
 *  equal on every rank) on the communicator's device, written by work on
 *  @p stream; each span's bytes must be even (arrays of 2-, 4- or 8-byte
 *  elements). The holders (view.holders) send, the newcomers receive: the spans go
 *  in chunks of 4 MiB whose senders rotate over the holders, so several peers feed
 *  each newcomer at once. Nothing moves when nobody is new. A failure (a member dies meanwhile) is returned:
 * vote not ok on that step. The step counter comes from view.committed_steps. */
GCOMM_API gcommStatus_t gcommMembershipSyncState(gcommMembership_t membership, void* const* data,
                                                 const size_t* bytes, size_t n, gcommStream_t stream);
/** What changed at the last new generation ("rank 2 (host:pid at ...) lost its
 *  connection to the store: did its process die?"), output-string convention. */
GCOMM_API gcommStatus_t gcommMembershipGetChange(gcommMembership_t membership, char* buffer, size_t size,
                                                 size_t* required);
GCOMM_API gcommStatus_t gcommMembershipGetStats(gcommMembership_t membership, gcommMembershipStats_t* stats);
/** Destroys the communicator, leaves the job (the others' generation ends at
 *  their next step), and frees the membership. */
GCOMM_API gcommStatus_t gcommMembershipLeave(gcommMembership_t membership);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GRADCOMM_MEMBERSHIP_H */
