#include "comm/net/tcp_socket.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/error.hpp"

namespace gradcomm::comm::net {

double seconds_left(Deadline deadline) {
  double s = std::chrono::duration<double>(deadline - Clock::now()).count();
  return s > 0 ? s : 0.0;
}

int poll_ms_until(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  long long ms = (left + 999) / 1000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

std::string errno_text(int err) {
  char buf[256] = {};
  // GNU strerror_r returns the message (which may or may not be `buf`).
  return strerror_r(err, buf, sizeof(buf));
}

std::string host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') return cat("[", host, "]:", port);
  return cat(host, ":", port);
}

std::string seconds_text(double seconds) {
  if (seconds >= 10) return std::to_string(static_cast<long long>(seconds + 0.5));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2g", seconds);
  return buf;
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string endpoint_text(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST] = {};
  char port[NI_MAXSERV] = {};
  if (getnameinfo(addr, len, host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  if (addr->sa_family == AF_INET6) return cat("[", host, "]:", port);
  return cat(host, ":", port);
}

std::string local_host(const Socket& s) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST] = {};
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) !=
          0)
    return "";
  return host;
}

bool resolve(const std::string& host, int port, std::vector<Endpoint>& out, std::string& error,
             bool& retryable) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) {
    error = cat("cannot resolve '", host, "': ", rc == EAI_SYSTEM ? errno_text(errno) : gai_strerror(rc));
    retryable = rc == EAI_AGAIN;
    return false;
  }
  out.clear();
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    Endpoint e;
    std::memcpy(&e.addr, a->ai_addr, a->ai_addrlen);
    e.len = a->ai_addrlen;
    e.text = endpoint_text(a->ai_addr, a->ai_addrlen);
    out.push_back(e);
  }
  freeaddrinfo(list);
  if (out.empty()) {
    error = cat("'", host, "' has no IPv4 or IPv6 address");
    retryable = false;
    return false;
  }
  return true;
}

Socket listen_on(const std::string& host, int port, int& bound_port, std::string& loopback, const char* who,
                 const char* when_taken) {
  std::vector<Endpoint> resolved;
  std::string error;
  bool retryable = false;
  require(resolve(host, port, resolved, error, retryable), who, " cannot listen: ", error);
  int family = resolved.front().addr.ss_family;
  Socket s(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) fail(gcommInternalError, "socket() failed: ", errno_text(errno));
  int one = 1, zero = 0;
  (void)setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage any{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    (void)setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    auto* a = reinterpret_cast<sockaddr_in6*>(&any);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
    loopback = "::1";
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&any);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    a->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
    loopback = "127.0.0.1";
  }
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&any), len) != 0) {
    int err = errno;
    require(false, who, " cannot listen on port ", port, ": ", errno_text(err),
            err == EADDRINUSE ? cat(" (", when_taken, ")") : std::string());
  }
  if (::listen(s.fd(), SOMAXCONN) != 0) fail(gcommInternalError, "listen() failed: ", errno_text(errno));
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
    fail(gcommInternalError, "getsockname() failed: ", errno_text(errno));
  bound_port = family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return s;
}

Socket accept_one(const Socket& listener, std::string& peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return Socket();
  peer = endpoint_text(reinterpret_cast<sockaddr*>(&addr), len);
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Socket(fd);
}

namespace {

// One non-blocking connect attempt, bounded by the deadline.
Socket try_connect(const Endpoint& e, Deadline deadline, std::string& error) {
  Socket s(::socket(e.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) {
    error = cat("socket() failed: ", errno_text(errno));
    return Socket();
  }
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&e.addr), e.len) != 0) {
    if (errno != EINPROGRESS) {
      error = cat(e.text, ": ", errno_text(errno));
      return Socket();
    }
    pollfd p{s.fd(), POLLOUT, 0};
    int rc;
    do {
      rc = ::poll(&p, 1, poll_ms_until(deadline));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
      error = cat(e.text, ": connection attempt timed out");
      return Socket();
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (rc < 0 || getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      error = cat(e.text, ": ", errno_text(rc < 0 ? errno : err));
      return Socket();
    }
  }
  int one = 1;
  (void)setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return s;
}

}  // namespace

Socket connect_until(const std::string& host, int port, Deadline deadline, std::string& error, bool& fatal) {
  fatal = false;
  auto pause = std::chrono::milliseconds(10);
  for (;;) {
    std::vector<Endpoint> endpoints;
    bool retryable = false;
    if (resolve(host, port, endpoints, error, retryable)) {
      for (const Endpoint& e : endpoints) {
        Socket s = try_connect(e, deadline, error);
        if (s.valid()) return s;
      }
    } else if (!retryable) {
      fatal = true;
      return Socket();
    }
    auto now = Clock::now();
    if (now >= deadline) return Socket();
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

namespace {

// Waits for `events` on the socket; kOk when ready.
IoResult wait_for(const Socket& s, short events, Deadline deadline, std::string& error) {
  pollfd p{s.fd(), events, 0};
  for (;;) {
    int rc = ::poll(&p, 1, poll_ms_until(deadline));
    if (rc > 0) return IoResult::kOk;  // errors and hang-ups show up in the next send/recv
    if (rc == 0) {
      error = "timed out";
      return IoResult::kTimeout;
    }
    if (errno != EINTR) {
      error = cat("poll() failed: ", errno_text(errno));
      return IoResult::kError;
    }
  }
}

}  // namespace

IoResult send_all(const Socket& s, const void* data, size_t n, Deadline deadline, std::string& error) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t sent = ::send(s.fd(), p, n, MSG_NOSIGNAL);
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoResult r = wait_for(s, POLLOUT, deadline, error);
      if (r != IoResult::kOk) return r;
      continue;
    }
    int err = errno;
    error = errno_text(err);
    return err == EPIPE || err == ECONNRESET ? IoResult::kClosed : IoResult::kError;
  }
  return IoResult::kOk;
}

IoResult recv_exact(const Socket& s, void* data, size_t n, Deadline deadline, std::string& error) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t got = ::recv(s.fd(), p, n, 0);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) {
      error = "the peer closed the connection";
      return IoResult::kClosed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoResult r = wait_for(s, POLLIN, deadline, error);
      if (r != IoResult::kOk) return r;
      continue;
    }
    int err = errno;
    error = errno_text(err);
    return err == ECONNRESET ? IoResult::kClosed : IoResult::kError;
  }
  return IoResult::kOk;
}

}  // namespace gradcomm::comm::net
