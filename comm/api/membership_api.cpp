// C API of fault-tolerant jobs (include/gradcomm/membership.h): the membership
// server, and a member that builds each generation's communicator over the
// server's rendezvous for it.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "comm/api/handles.hpp"
#include "comm/api/publish.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/bootstrap/store_protocol.hpp"
#include "comm/membership/membership_client.hpp"
#include "comm/membership/membership_server.hpp"
#include "comm/transports.hpp"
#include "common/api/out_string.hpp"
#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/dtype.hpp"
#include "common/env.hpp"
#include "common/handle_registry.hpp"
#include "common/log.hpp"
#include "gradcomm/membership.h"

using namespace gradcomm;
using namespace gradcomm::comm;
using namespace gradcomm::comm::membership;

struct gcommStoreServer {
  MembershipServer server;
  explicit gcommStoreServer(const MembershipServerOptions& o) : server(o) {}
};

struct gcommMembership {
  std::unique_ptr<MembershipClient> client;
  std::string job_key;
  double timeout_s = 300;
  double quorum_wait_s = 605;  // how long one quorum may take (see next_generation)
  gcommDevice_t device{};
  gcommTransport_t transport = gcommTransportAuto;
  gcommComm_t comm = nullptr;  // the current generation's, owned
  QuorumOutcome generation;    // the current generation (status != success: none)
  bool need_quorum = true;
  bool after_failure = false;  // the last generation ended by a failure
  std::chrono::steady_clock::time_point failed_at{};
  gcommMembershipStats_t stats = GCOMM_MEMBERSHIP_STATS_INITIALIZER;
  std::string change;
};

namespace {

HandleRegistry<gcommStoreServer>& servers() {
  static HandleRegistry<gcommStoreServer> registry("gcommStoreServer_t");
  return registry;
}

HandleRegistry<gcommMembership>& memberships() {
  static HandleRegistry<gcommMembership> registry("gcommMembership_t");
  return registry;
}

// "host:port", "[v6]:port". Throws gcommInvalidArgument naming `source`.
void split_address(const std::string& text, const char* source, std::string& host, int& port) {
  const size_t colon = text.rfind(':');
  require(colon != std::string::npos && colon > 0 && colon + 1 < text.size(), source, " is '", text,
          "'; it must be host:port (the address gradcomm-store printed)");
  host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  const long p = std::strtol(text.c_str() + colon + 1, &end, 10);
  require(end != nullptr && *end == '\0' && p > 0 && p < 65536, source, " is '", text,
          "': the port must be 1..65535");
  port = static_cast<int>(p);
}

std::string default_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return cat(host[0] != '\0' ? host : "host", ":", ::getpid());
}

// Ends the current communicator: aborted after a failure (no shutdown barrier
// waits for a dead or frozen rank), closed in order otherwise.
// A reducer still on it is refused, changing nothing: it must go first (its
// compression state saved for the next generation's reducer).
void drop_communicator(gcommMembership& m, bool abort) {
  if (m.comm == nullptr) return;
  try {  // asked first: a refusal changes nothing (before, the communicator was aborted)
    refuse_to_destroy_communicator(m.comm);
  } catch (const Error& e) {
    fail(
        gcommInvalidState, "generation ", m.generation.generation, "'s communicator cannot go yet (",
        e.message(),
        "): destroy its reducers first (gcommReducerSaveCompressionState keeps their state for the next "
        "generation's) and end any group on it, then call this again; gcommMembershipChangePending says when "
        "a change comes");
  }
  if (abort) (void)gcommCommAbort(m.comm);
  (void)gcommCommDestroy(m.comm);  // cannot refuse: asked above
  m.comm = nullptr;
}

// Agrees the next generation and builds its communicator, retrying while members
// fail during the build (each retry is a new generation), until the timeout.
void next_generation(gcommMembership& m) {
  drop_communicator(m, m.after_failure || m.generation.status != gcommSuccess);
  // A newcomer waits for the running generation's next step boundary: at worst a
  // step that hangs until its collectives time out, a vote that waits as long,
  // and the quorum timeout.
  const Deadline deadline = deadline_after(m.quorum_wait_s);
  std::string last_failure;
  for (;;) {
    const double left = net::seconds_left(deadline);
    if (left <= 0)
      fail(gcommTimeout, "no generation could be formed and built within ", m.quorum_wait_s, " s",
           last_failure.empty() ? std::string() : cat("; the last attempt: ", last_failure));
    QuorumOutcome q = m.client->quorum(left);
    if (q.status != gcommSuccess) {
      m.generation.status = q.status;
      throw Error(q.status, q.change);
    }
    bootstrap::LaunchConfig launch;
    launch.rank = q.rank;
    launch.world_size = q.world;
    launch.master_addr = m.client->host();
    launch.master_port = q.rendezvous_port;
    launch.job_key = cat(m.job_key, "#", q.generation);
    launch.device = m.device;
    launch.transport = m.transport;
    launch.timeout_s = std::min(m.timeout_s, std::max(1.0, net::seconds_left(deadline)));
    launch.external_store = true;
    launch.source = cat("generation ", q.generation, " of job '", m.job_key, "' at ", m.client->address());
    try {
      m.comm = publish_communicator(make_transport_from_store(launch), m.timeout_s);
    } catch (const Error& e) {
      // A member failed while the generation was being built: ask for the next one.
      last_failure = e.message();
      GCOMM_WARN("membership: generation ", q.generation, " could not be built (", e.message(),
                 "); asking for the next one");
      m.after_failure = true;
      continue;
    }
    m.generation = q;
    m.change = q.change;
    {
      Communicator& c = acquire_communicator(m.comm);
      c.note_in_flight_record(cat("membership of job '", m.job_key, "': generation ", q.generation, ", rank ",
                                  q.rank, " of ", q.world, " (", q.members, "): ", q.change));
      release_communicator(m.comm);
    }
    ++m.stats.generations;
    if (m.after_failure && m.stats.generations > 1) {
      ++m.stats.failures_survived;
      m.stats.recovery_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - m.failed_at).count();
    }
    m.after_failure = false;
    m.need_quorum = false;
    GCOMM_INFO(INIT, "membership of job '", m.job_key, "': generation ", q.generation, ", rank ", q.rank,
               " of ", q.world, " (", q.members, "): ", q.change);
    return;
  }
}

// Newcomers receive the state: chunk k of the spans, laid end to end, comes from
// holder k % holders, a round of chunks at a time in one group, so every holder
// sends while every newcomer receives from all of them.
void sync_state(gcommMembership& m, void* const* data, const size_t* bytes, size_t n, gcommStream_t stream) {
  constexpr size_t kMaxSpans = size_t{1} << 24;
  constexpr size_t kChunkBytes = size_t{4} << 20;
  require(n <= kMaxSpans, "n is ", n, ": at most ", kMaxSpans, " spans");
  require(n == 0 || (data != nullptr && bytes != nullptr), "data and bytes must not be NULL when n (", n,
          ") is not 0");
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] == 0) continue;
    require(data[i] != nullptr, "data[", i, "] is NULL but bytes[", i, "] is ", bytes[i]);
    require(bytes[i] % 2 == 0, "bytes[", i, "] is ", bytes[i],
            ": state spans are arrays of 2-, 4- or 8-byte elements");
    // Before a byte moves: a span reaching past any memory would fail only in a
    // later round, after earlier chunks were written.
    require(within_address_limit(data[i], bytes[i] / 2, gcommFloat16), "data[", i, "]: ", bytes[i],
            " bytes from ", data[i], " reach past the highest address memory can have (GCOMM_ADDRESS_LIMIT)");
  }
  if (m.comm == nullptr || m.need_quorum)
    fail(gcommInvalidState, "no generation to bring up to date: call gcommMembershipQuorum first");
  const int holders = m.generation.holders, world = m.generation.world, rank = m.generation.rank;
  if (holders >= world) return;
  struct Chunk {
    size_t span, offset, bytes;
  };
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < n; ++i)
    for (size_t off = 0; off < bytes[i]; off += kChunkBytes)
      chunks.push_back({i, off, std::min(kChunkBytes, bytes[i] - off)});
  const auto started = std::chrono::steady_clock::now();
  const size_t per_round = std::max<size_t>(static_cast<size_t>(holders), 16);
  uint64_t sent = 0, received = 0;
  for (size_t first = 0; first < chunks.size(); first += per_round) {
    if (gcommGroupStart() != gcommSuccess) fail(gcommInternalError, gcommGetLastError());
    gcommStatus_t s = gcommSuccess;
    std::string why;
    for (size_t k = first; k < std::min(first + per_round, chunks.size()) && s == gcommSuccess; ++k) {
      const Chunk& c = chunks[k];
      char* p = static_cast<char*>(data[c.span]) + c.offset;
      const int source = static_cast<int>(k % static_cast<size_t>(holders));
      if (rank == source) {
        for (int r = holders; r < world && s == gcommSuccess; ++r) {
          s = gcommSend(m.comm, p, c.bytes / 2, gcommFloat16, r, stream);
          sent += c.bytes;
        }
      } else if (rank >= holders) {
        s = gcommRecv(m.comm, p, c.bytes / 2, gcommFloat16, source, stream);
        received += c.bytes;
      }
      if (s != gcommSuccess) why = gcommGetLastError();
    }
    const gcommStatus_t ended = gcommGroupEnd();
    if (s == gcommSuccess && ended != gcommSuccess) {
      s = ended;
      why = gcommGetLastError();
    }
    if (s != gcommSuccess) fail(s, "bringing the newcomers up to date: ", why);
  }
  if (stream != nullptr && gcommCommSynchronize(m.comm) != gcommSuccess)
    fail(gcommRemoteError, "bringing the newcomers up to date: ", gcommGetLastError());
  m.stats.state_bytes_sent += sent;
  m.stats.state_bytes_received += received;
  m.stats.state_sync_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (rank >= holders)
    GCOMM_INFO(INIT, "membership of job '", m.job_key, "': received ", received, " bytes of state from ",
               holders, holders == 1 ? " holder" : " holders");
}

}  // namespace

extern "C" {

GCOMM_API gcommStatus_t gcommStoreServerStart(const char* host, int port, gcommStoreServer_t* server) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(server);
    require(port >= 0 && port < 65536, "port ", port, " is not 0..65535");
    MembershipServerOptions o;
    if (host != nullptr) o.host = host;
    o.port = port;
    require(!o.host.empty(), "host is empty: use NULL for every IPv4 interface");
    auto* s = new gcommStoreServer(o);
    servers().add(s);
    *server = s;
  });
}

GCOMM_API gcommStatus_t gcommStoreServerPort(gcommStoreServer_t server, int* port) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(port);
    *port = servers().get(server)->server.port();
  });
}

GCOMM_API gcommStatus_t gcommStoreServerStop(gcommStoreServer_t server) {
  return GCOMM_API_CALL({ servers().destroy(server); });
}

GCOMM_API gcommStatus_t gcommMembershipJoin(const gcommMembershipConfig_t* config,
                                            gcommMembership_t* membership) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(membership);
    const gcommMembershipConfig_t defaults = GCOMM_MEMBERSHIP_CONFIG_INITIALIZER;
    const gcommMembershipConfig_t c = read_config(config, defaults, "gcommMembershipConfig_t");
    const bootstrap::EnvLookup env = bootstrap::process_environment();
    std::string store;
    const char* source = "config.store";
    if (c.store != nullptr) {
      store = c.store;
    } else if (auto s = env("GRADCOMM_STORE")) {
      store = *s;
      source = "GRADCOMM_STORE";
    }
    require(!store.empty(),
            "no membership server named: set config.store or GRADCOMM_STORE to the host:port "
            "that gradcomm-store printed (docs/fault-tolerance.md)");
    MemberOptions o;
    split_address(store, source, o.host, o.port);
    o.job_key = c.job_key != nullptr ? std::string(c.job_key) : env("GRADCOMM_JOB_KEY").value_or("gradcomm");
    require(!o.job_key.empty() && o.job_key.size() <= bootstrap::kMaxNameBytes / 2,
            "the job key must have 1..", bootstrap::kMaxNameBytes / 2, " bytes");
    o.name = c.name != nullptr ? std::string(c.name) : default_name();
    require(o.name.size() <= 256, "config.name has ", o.name.size(), " bytes; the limit is 256");
    require(c.min_ranks >= 1, "config.min_ranks is ", c.min_ranks, "; it must be >= 1");
    require(!std::isnan(c.quorum_timeout_s) && !std::isnan(c.timeout_s), "a timeout is NaN");
    const double timeout = c.timeout_s > 0 ? c.timeout_s : knobs::timeout_seconds();
    o.job.min_ranks = c.min_ranks;
    o.job.quorum_timeout_s = c.quorum_timeout_s > 0 ? std::min(c.quorum_timeout_s, 3600.0) : 1.0;
    o.job.commit_timeout_s = std::min(timeout, 3.0e6);
    require(c.device.kind == gcommDeviceHost || c.device.kind == gcommDeviceCuda,
            "config.device.kind is not valid");
    auto m = std::make_unique<gcommMembership>();
    m->job_key = o.job_key;
    m->timeout_s = timeout;
    m->quorum_wait_s = 2 * timeout + o.job.quorum_timeout_s + 5.0;
    m->device = c.device;
    m->transport = transport_or_env(c.transport);
    require(
        m->transport != gcommTransportMpi,
        "the MPI transport cannot serve a fault-tolerant job: its world is fixed by the MPI launcher, and a "
        "lost rank aborts the whole MPI job in most MPI implementations (MPI's fault-tolerance extension, "
        "ULFM, "
        "is not standard); use auto, socket, shm, cuda-ipc or nccl (each generation gets its own "
        "communicator "
        "through gradcomm-store)");
    require(m->transport == gcommTransportAuto || find_transport(m->transport) != nullptr, "transport ",
            static_cast<int>(m->transport), " is not a gcommTransport_t");
    m->generation.status = gcommInvalidState;
    m->client = std::make_unique<MembershipClient>(o, deadline_after(std::min(timeout, 300.0)));
    memberships().add(m.get());
    *membership = m.release();
  });
}

GCOMM_API gcommStatus_t gcommMembershipQuorum(gcommMembership_t membership, gcommComm_t* comm,
                                              gcommMembershipView_t* view) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(comm);
    gcommMembership& m = *memberships().get(membership);
    const bool changed = m.need_quorum || m.comm == nullptr;
    if (changed) next_generation(m);
    *comm = m.comm;
    if (view != nullptr) {
      view->generation = m.generation.generation;
      view->rank = m.generation.rank;
      view->world_size = m.generation.world;
      view->holders = m.generation.holders;
      view->changed = changed ? 1 : 0;
      view->committed_steps = m.generation.committed_steps;
    }
  });
}

GCOMM_API gcommStatus_t gcommMembershipCommit(gcommMembership_t membership, int ok, const char* why,
                                              int* committed) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(committed);
    gcommMembership& m = *memberships().get(membership);
    if (m.comm == nullptr || m.need_quorum)
      fail(gcommInvalidState,
           "no generation to vote in: call gcommMembershipQuorum first (after every step that did not "
           "commit)");
    std::string reason = why != nullptr ? std::string(why).substr(0, 2000) : std::string("(no reason given)");
    CommitOutcome c = m.client->vote(m.generation.generation, ok != 0, reason);
    if (c.status != gcommSuccess) {
      // Refused (excluded, or a vote for a generation that is over): the vote's own
      // reason. The communicator is aborted, not destroyed: a reducer may still use
      // it (before, its destroy refused and that became the error); the next
      // quorum or Leave destroys it.
      (void)gcommCommAbort(m.comm);
      m.after_failure = true;
      m.need_quorum = true;
      throw Error(c.status, c.reason);
    }
    if (c.committed) {
      ++m.stats.steps_committed;
      m.generation.committed_steps = c.committed_steps;
    } else {
      ++m.stats.steps_discarded;
      m.after_failure = true;
      m.failed_at = std::chrono::steady_clock::now();
      (void)gcommCommAbort(m.comm);  // no later call on it can succeed quietly
      GCOMM_INFO(INIT, "membership of job '", m.job_key, "': step ", c.committed_steps + 1,
                 " discarded on every member: ", c.reason);
    }
    if (c.reconfigure) m.need_quorum = true;
    *committed = c.committed ? 1 : 0;
  });
}

GCOMM_API gcommStatus_t gcommMembershipChangePending(gcommMembership_t membership, int* pending) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(pending);
    const gcommMembership& m = *memberships().get(membership);
    *pending = m.need_quorum || m.comm == nullptr ? 1 : 0;
  });
}

GCOMM_API gcommStatus_t gcommMembershipSyncState(gcommMembership_t membership, void* const* data,
                                                 const size_t* bytes, size_t n, gcommStream_t stream) {
  return GCOMM_API_CALL({ sync_state(*memberships().get(membership), data, bytes, n, stream); });
}

GCOMM_API gcommStatus_t gcommMembershipGetChange(gcommMembership_t membership, char* buffer, size_t size,
                                                 size_t* required) {
  return GCOMM_API_CALL({ copy_out_string(memberships().get(membership)->change, buffer, size, required); });
}

GCOMM_API gcommStatus_t gcommMembershipGetStats(gcommMembership_t membership, gcommMembershipStats_t* stats) {
  return GCOMM_API_CALL({
    gcommMembership& m = *memberships().get(membership);
    check_versioned_out(stats, "gcommMembershipStats_t", "GCOMM_MEMBERSHIP_STATS_INITIALIZER");
    write_versioned_out(m.stats, stats, "gcommMembershipStats_t", "GCOMM_MEMBERSHIP_STATS_INITIALIZER");
  });
}

GCOMM_API gcommStatus_t gcommMembershipLeave(gcommMembership_t membership) {
  return GCOMM_API_CALL({
    // A healthy generation closes in order (the others leave at the same step, or
    // fail their next collective and abort, which ends this one's barrier). Dropped
    // before the handle goes: a communicator still used refuses, changing nothing.
    gcommMembership& live = *memberships().get(membership);
    drop_communicator(live, live.after_failure || live.need_quorum);
    std::unique_ptr<gcommMembership> m(memberships().remove(membership));
    m->client->bye();
  });
}

}  // extern "C"
