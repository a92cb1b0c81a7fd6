// The rendezvous store's server, run by rank 0 on a thread of its own: one poll()
// loop over the listening socket and every connection, all non-blocking, so no
// peer can block another. A connection must say hello (with the job key) within
// hello_timeout_s and may send at most kMaxHelloBytes before that. Garbage bytes,
// a wrong job key, an oversized or malformed message, or a protocol violation
// drop that connection with a WARN line naming the peer and the reason; the job
// goes on. Requests of joined ranks go to StoreState (store_state.hpp).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "comm/net/tcp_socket.hpp"

namespace gradcomm::comm::bootstrap {

using namespace net;  // comm/net/tcp_socket.hpp

struct StoreServerOptions {
  std::string host;  // MASTER_ADDR: selects the address family (the store listens on every interface)
  int port = 0;      // 0: the kernel picks a free port (see port())
  std::string job_key;
  int world_size = 1;
  double hello_timeout_s = 30;      // a connection that has not said hello by then is dropped
  std::string address;              // names the store in messages; "" = "host:port"
  Deadline started = Clock::now();  // when the ranks began to meet ("never connected within <since then>")
  uint32_t generation = 0;          // of this job's communicator on this address (wire.hpp)
};

class StoreServer {
 public:
  // Listens, then serves on its own thread. Throws if it cannot listen.
  explicit StoreServer(const StoreServerOptions& options);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const { return port_; }
  // An address of this machine that reaches the server (127.0.0.1 or ::1).
  const std::string& loopback() const { return loopback_; }
  // Fails the job for every rank (each wait, and every later request) with
  // gcommRemoteError and `message`, from any thread: the membership server fails a
  // generation's rendezvous when one of its members is lost.
  void fail_job(const std::string& message);
  // Sends what is still queued (for at most `flush_s`), closes every connection
  // and joins the thread. Idempotent.
  void stop(double flush_s = 1.0) noexcept;

 private:
  void run() noexcept;

  StoreServerOptions options_;
  Socket listener_;
  Socket wake_read_, wake_write_;
  int port_ = 0;
  std::string loopback_;
  std::atomic<bool> stopping_{false};
  std::atomic<double> flush_s_{1.0};
  std::mutex failure_lock_;
  std::string failure_;  // set by fail(), taken by the loop
  std::thread thread_;
};

}  // namespace gradcomm::comm::bootstrap
