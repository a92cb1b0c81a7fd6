// Plain POSIX TCP sockets for the rendezvous store and the socket transport. Every socket is non-blocking
// and close-on-exec, every wait is a poll() bounded by a deadline, and sends
// never raise SIGPIPE: a peer that is slow, silent or gone costs at most the
// deadline, never a hang.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/deadline.hpp"

namespace gradcomm::comm::net {

using gradcomm::Clock;
using gradcomm::Deadline;
using gradcomm::deadline_after;  // common/deadline.hpp: saturated

double seconds_left(Deadline deadline);  // >= 0
int poll_ms_until(Deadline deadline);    // for poll(): remaining milliseconds, rounded up
std::string errno_text(int err);
// "host:port", with brackets around an IPv6 address.
std::string host_port(const std::string& host, int port);
// A duration for messages: "5", "1.5", "0.25", "30", "300" (two significant digits below 10 s).
std::string seconds_text(double seconds);

// Owns a file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close() noexcept;

 private:
  int fd_ = -1;
};

struct Endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string text;  // "1.2.3.4:29500" or "[::1]:29500", for messages
};

// "addr:port" of a socket address, numeric.
std::string endpoint_text(const sockaddr* addr, socklen_t len);

// The numeric host of a connected socket's local end (the address this machine
// uses to reach that peer), "" if unknown.
std::string local_host(const Socket& s);

// Resolves host:port (a name or a numeric address). Returns false and fills
// `error` when it cannot; `retryable` says whether the failure may be transient
// (a name server that did not answer).
bool resolve(const std::string& host, int port, std::vector<Endpoint>& out, std::string& error,
             bool& retryable);

// Listens on `port` (0: the kernel picks one) on every interface of the address
// family of `host` (IPv6 sockets accept IPv4 too), like torchrun's store, so peers
// reach it through whichever address MASTER_ADDR names. Throws gcommInvalidArgument
// (port in use, bad host). `bound_port` receives the port; `loopback` an address
// of this machine that reaches the listener. `who` names the listener in the
// refusal, `when_taken` says what to do when the port is taken.
constexpr const char* kRankZeroPortTaken =
    "another job, an earlier run or a torch.distributed store holds it: choose another MASTER_PORT, or set "
    "GRADCOMM_MASTER_PORT for gradcomm's store alone";
Socket listen_on(const std::string& host, int port, int& bound_port, std::string& loopback,
                 const char* who = "rank 0", const char* when_taken = kRankZeroPortTaken);

// Accepts one pending connection (invalid Socket if none); `peer` gets its address.
Socket accept_one(const Socket& listener, std::string& peer);

// Connects to host:port, retrying refused and unreachable attempts with a growing
// pause until the deadline. Returns an invalid Socket (and the last failure in
// `error`) if no attempt succeeded in time; `fatal` is set when retrying cannot
// help (a name that does not resolve).
Socket connect_until(const std::string& host, int port, Deadline deadline, std::string& error, bool& fatal);

enum class IoResult { kOk, kTimeout, kClosed, kError };

// Sends all `n` bytes / receives exactly `n` bytes before the deadline. On
// anything but kOk, `error` says what happened.
IoResult send_all(const Socket& s, const void* data, size_t n, Deadline deadline, std::string& error);
IoResult recv_exact(const Socket& s, void* data, size_t n, Deadline deadline, std::string& error);

}  // namespace gradcomm::comm::net
