// The membership server: what the gradcomm-store program runs, in a process of its
// own so that it outlives every rank. It keeps each fault-tolerant job's members
// and generations (membership_state.hpp), answers their quorum requests and step
// votes, and hosts each generation's rendezvous store (a StoreServer on a port of
// its own), so no rank is special: killing rank 0 is survived like any other.
//
// One thread per member connection (a job has tens to hundreds), each blocked on
// its socket or on the job's condition; a waiting member's connection is watched
// every few milliseconds, so a kill is seen at once even while it waits. Jobs are
// kept apart by their job key.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap/store_server.hpp"
#include "comm/membership/membership_state.hpp"
#include "comm/net/tcp_socket.hpp"

namespace gradcomm::comm::membership {

struct MembershipServerOptions {
  std::string host = "0.0.0.0";  // selects the address family; it listens on every interface
  int port = 0;                  // 0: any free port (see port())
  double hello_timeout_s = 30;   // a connection must ask to join within this
};

class MembershipServer {
 public:
  // Listens, then serves on its own threads. Throws gcommInvalidArgument if it cannot listen.
  explicit MembershipServer(const MembershipServerOptions& options);
  ~MembershipServer();
  MembershipServer(const MembershipServer&) = delete;
  MembershipServer& operator=(const MembershipServer&) = delete;

  int port() const { return port_; }
  const std::string& address() const { return address_; }
  // Closes every connection and every rendezvous, and joins the threads. Idempotent.
  void stop() noexcept;

 private:
  struct Job {
    std::unique_ptr<MembershipState> state;
    // The last generations' rendezvous stores (the one before the newest is kept
    // while its ranks close their communicators).
    std::map<uint32_t, std::unique_ptr<bootstrap::StoreServer>> rendezvous;
  };

  void accept_loop() noexcept;
  void serve(net::Socket socket, std::string peer) noexcept;
  void serve_member(const net::Socket& socket, const std::string& peer);
  Job& job_for(const std::string& key, const JobSettings& settings);
  int open_rendezvous(const std::string& key, Job& job, uint32_t generation, int world);
  void log_changes(const std::string& key, MembershipState& state);

  MembershipServerOptions options_;
  net::Socket listener_;
  net::Socket wake_read_, wake_write_;
  int port_ = 0;
  std::string loopback_;
  std::string address_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  std::mutex lock_;  // jobs_, connections_
  std::condition_variable changed_;
  std::map<std::string, Job> jobs_;
  std::map<int, std::thread> connections_;  // by socket descriptor
  std::vector<std::thread> finished_;       // threads whose connection ended, joined at stop
};

}  // namespace gradcomm::comm::membership
