#include "comm/socket/peer_mesh.hpp"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "comm/bootstrap/store_protocol.hpp"
#include "comm/bootstrap/store_state.hpp"
#include "comm/exchange/little_endian.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/warn_limiter.hpp"

namespace gradcomm::comm::sock {

using namespace bootstrap;
using namespace net;

namespace {

constexpr uint32_t kHelloMagic = 0x4D534347;  // "GCSM"
constexpr uint32_t kAckMagic = 0x4B534347;    // "GCSK"
constexpr uint32_t kMeshVersion = 1;
constexpr size_t kHelloBytes = 28;
constexpr size_t kAckBytes = 8;
// How long an accepted connection may take to say hello before it is dropped.
constexpr double kHelloSeconds = 5;

struct Hello {
  uint64_t job = 0;
  int world = 0, from = 0, to = 0;
};

void encode(const Hello& h, uint8_t* out) {
  put_u32(out, kHelloMagic);
  put_u32(out + 4, kMeshVersion);
  put_u64(out + 8, h.job);
  put_u32(out + 16, static_cast<uint32_t>(h.world));
  put_u32(out + 20, static_cast<uint32_t>(h.from));
  put_u32(out + 24, static_cast<uint32_t>(h.to));
}

// "" if the hello is for this rank of this job, else why not.
std::string check(const uint8_t* in, const Hello& expect, int& from) {
  if (get_u32(in) != kHelloMagic) return "not a gradcomm socket-transport hello";
  if (get_u32(in + 4) != kMeshVersion)
    return cat("mesh protocol version ", get_u32(in + 4), ", not ", kMeshVersion);
  if (get_u64(in + 8) != expect.job) return "another job key";
  int world = static_cast<int>(get_u32(in + 16));
  from = static_cast<int>(get_u32(in + 20));
  int to = static_cast<int>(get_u32(in + 24));
  if (world != expect.world) return cat("world size ", world, ", not ", expect.world);
  if (to != expect.to) return cat("it wants rank ", to, ", this is rank ", expect.to);
  if (from <= expect.to || from >= expect.world)
    return cat("rank ", from, " should not connect to rank ", expect.to);
  return "";
}

std::string io_failure(IoResult r, const std::string& error) {
  return r == IoResult::kTimeout ? "no answer in time" : error;
}

// Splits "host port" as published.
void parse_address(const std::vector<uint8_t>& bytes, int rank, std::string& host, int& port) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  port = -1;
  in >> host >> port;
  if (host.empty() || port <= 0 || port > 65535)
    fail(gcommRemoteError, "rank ", rank, " published a malformed socket address '",
         std::string(bytes.begin(), bytes.end()), "'");
}

}  // namespace

std::vector<Socket> connect_peer_mesh(Bootstrap& boot, const std::string& master_addr,
                                      const std::string& job_key) {
  const int me = boot.rank(), n = boot.size();
  std::vector<Socket> peers(n);
  if (n == 1) return peers;
  const Deadline deadline = boot.deadline();

  // 1. Listen and publish.
  int port = 0;
  std::string loopback;
  Socket listener = listen_on(master_addr, 0, port, loopback);
  // Rank 0 is at MASTER_ADDR when it runs the store (its own route to the store is
  // loopback); with a store elsewhere, every rank is where its route to the store starts.
  std::string host = me == 0 && !boot.external_store() ? master_addr : boot.store().local_host();
  if (host.empty()) host = master_addr;
  std::string mine = cat(host, " ", port);
  std::vector<std::vector<uint8_t>> all =
      boot.store().gather("socket/addresses", std::vector<uint8_t>(mine.begin(), mine.end()), deadline);

  // 2. Connect to every lower rank.
  const uint64_t job = job_key_tag(job_key);
  for (int q = 0; q < me; ++q) {
    std::string peer_host;
    int peer_port = 0;
    parse_address(all[q], q, peer_host, peer_port);
    std::string error;
    bool fatal = false;
    Socket s = connect_until(peer_host, peer_port, deadline, error, fatal);
    const std::string where = host_port(peer_host, peer_port);
    if (!s.valid())
      fail(fatal ? gcommRemoteError : gcommTimeout, "rank ", me, " could not connect to rank ", q, " at ",
           where, ": ", error, " (a firewall between the hosts, or rank ", q, " gone?)");
    uint8_t hello[kHelloBytes];
    encode(Hello{job, n, me, q}, hello);
    IoResult r = send_all(s, hello, sizeof(hello), deadline, error);
    uint8_t ack[kAckBytes];
    if (r == IoResult::kOk) r = recv_exact(s, ack, sizeof(ack), deadline, error);
    if (r != IoResult::kOk)
      fail(r == IoResult::kTimeout ? gcommTimeout : gcommRemoteError, "rank ", me, " connected to rank ", q,
           " at ", where, " but got no acknowledgement: ", io_failure(r, error));
    if (get_u32(ack) != kAckMagic || static_cast<int>(get_u32(ack + 4)) != q)
      fail(gcommRemoteError, "the process at ", where, " is not rank ", q, " of this job");
    peers[q] = std::move(s);
  }

  // 3. Accept every higher rank. Connections that are not the job's are said a
  // few at a time (a port scanner must not fill the log).
  WarnLimiter dropped(cat("rank ", me, ": "), "connections to its socket transport dropped");
  int missing = n - 1 - me;
  while (missing > 0) {
    pollfd p{listener.fd(), POLLIN, 0};
    int rc = ::poll(&p, 1, poll_ms_until(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0 || Clock::now() >= deadline) {
      std::vector<int> absent;
      for (int q = me + 1; q < n; ++q)
        if (!peers[q].valid()) absent.push_back(q);
      fail(gcommTimeout, rank_list(absent), " never connected to rank ", me, "'s socket at ",
           host_port(host, port), " (their own errors say why)");
    }
    if (rc < 0) fail(gcommInternalError, "poll() failed: ", errno_text(errno));
    std::string peer_text;
    Socket s = accept_one(listener, peer_text);
    if (!s.valid()) continue;
    uint8_t hello[kHelloBytes];
    std::string error;
    Deadline hello_deadline = std::min(deadline, deadline_after(kHelloSeconds));
    IoResult r = recv_exact(s, hello, sizeof(hello), hello_deadline, error);
    int from = -1;
    std::string why = r == IoResult::kOk ? check(hello, Hello{job, n, 0, me}, from) : io_failure(r, error);
    if (why.empty() && peers[from].valid()) why = cat("rank ", from, " is already connected");
    if (!why.empty()) {
      dropped.warn(Clock::now(),
                   cat("dropped a connection from ", peer_text, " to its socket transport: ", why));
      continue;
    }
    uint8_t ack[kAckBytes];
    put_u32(ack, kAckMagic);
    put_u32(ack + 4, static_cast<uint32_t>(me));
    r = send_all(s, ack, sizeof(ack), deadline, error);
    if (r != IoResult::kOk) {
      GCOMM_WARN("rank ", me, ": rank ", from, " connected from ", peer_text,
                 " but left before the acknowledgement: ", io_failure(r, error));
      continue;
    }
    peers[from] = std::move(s);
    --missing;
  }
  GCOMM_INFO(INIT, "rank ", me, " of ", n, ": socket transport connected to its ", n - 1, " peer(s)");
  return peers;
}

}  // namespace gradcomm::comm::sock
