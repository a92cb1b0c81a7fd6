// A rank's connection to the rendezvous store. Requests are synchronous and
// bounded: each carries the time the store may wait for it (get, gather), and the
// reply is awaited until that deadline plus a grace period, so the store's own
// timeout message (naming the missing ranks) arrives first; if the store itself is
// gone or silent, the client's timeout names the store instead. After a lost
// connection or a missed reply the client refuses further requests.
// Used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/net/tcp_socket.hpp"

namespace gradcomm::comm::bootstrap {

using namespace net;  // comm/net/tcp_socket.hpp

struct StoreClientOptions {
  std::string host;  // the store's address (MASTER_ADDR, or rank 0's loopback)
  int port = 0;
  std::string job_key;
  int rank = 0;
  int world_size = 1;
  std::string address;      // names the store in messages; "" = "host:port"
  uint32_t generation = 0;  // of the communicator this rank is making (wire.hpp)
};

class StoreClient {
 public:
  // Connects, retrying until the deadline, and says hello. Throws gcommTimeout if
  // no store answered in time, gcommInvalidArgument if the store refused this rank
  // (another job key or world size, a rank already taken) or the address does not
  // resolve, gcommRemoteError if the peer does not speak the store protocol.
  StoreClient(const StoreClientOptions& options, Deadline deadline);

  void set(const std::string& key, const std::vector<uint8_t>& value, Deadline deadline);
  // Waits until some rank set `key` (gcommTimeout naming the key otherwise).
  std::vector<uint8_t> get(const std::string& key, Deadline deadline);
  // Every rank's contribution, in rank order, once all arrived (gcommTimeout naming
  // the missing ranks otherwise). A barrier is a gather of nothing.
  std::vector<std::vector<uint8_t>> gather(const std::string& name, const std::vector<uint8_t>& mine,
                                           Deadline deadline);
  void barrier(const std::string& name, Deadline deadline) { (void)gather(name, {}, deadline); }
  // Tells the store this rank failed, so that the others fail now instead of at
  // their timeout. Best effort, bounded (about a second); never throws.
  void abort(const std::string& reason) noexcept;
  // Leaves the job cleanly and closes. Never throws.
  void bye() noexcept;

  const std::string& address() const { return address_; }
  int rank() const { return options_.rank; }
  // The address of this machine on the route to the store (for peers to reach it).
  std::string local_host() const { return bootstrap::local_host(socket_); }

 private:
  std::vector<uint8_t> request(const std::vector<uint8_t>& frame, Deadline reply_deadline,
                               const std::string& what);

  StoreClientOptions options_;
  std::string address_;
  uint64_t tag_;
  Socket socket_;
  std::string broken_;  // why the connection cannot be used any more ("" while usable)
};

// The time the store may wait for a request, for the wire (milliseconds, >= 1).
uint32_t wire_timeout_ms(Deadline deadline);

}  // namespace gradcomm::comm::bootstrap
