// Fuzz target: the rendezvous store's wire protocol. Each input starts a fresh
// store (a world of 2, job key "fuzz"), connects to it over loopback and sends the
// input's bytes — half the time after a valid hello for rank 0, so the fuzzer
// reaches the messages behind it — then reads what comes back for at most 20 ms.
// The store must never crash or hang (libFuzzer's -timeout), and must still accept
// and serve a well-behaved client afterwards: rank 1's hello is answered.
// libFuzzer's timeout alarm (SIGALRM) interrupts system calls in this thread, so
// every call here retries on EINTR: an interrupted poll once read as "no reply".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <vector>

#include "comm/bootstrap/store_protocol.hpp"
#include "comm/bootstrap/store_server.hpp"

namespace {

using namespace gradcomm::comm::bootstrap;

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) __builtin_trap();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    __builtin_trap();  // the store must listen
  return fd;
}

void send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;  // the store may have dropped us: fine
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Reads until the peer closes, `ms` pass, or (frame_only) one whole frame is in.
std::vector<uint8_t> drain(int fd, int ms, bool frame_only = false) {
  std::vector<uint8_t> got;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  uint8_t buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now())
            .count());
    int ready = ::poll(&p, 1, left > 0 ? left : 0);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got.insert(got.end(), buf, buf + k);
    Header h;
    if (frame_only && got.size() >= kHeaderBytes && parse_header(got.data(), kMaxPayloadBytes, h).empty() &&
        got.size() >= kHeaderBytes + h.length)
      break;
  }
  return got;
}

std::vector<uint8_t> hello(int rank) {
  Writer w;
  w.str("fuzz").i32(rank).i32(2).str("fuzzer").u32(0);
  return w.frame(MsgType::kHello, job_key_tag("fuzz"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  StoreServerOptions o;
  o.host = "127.0.0.1";
  o.job_key = "fuzz";
  o.world_size = 2;
  // Long enough that a loaded machine never drops the good rank before its hello
  // (0.05 s did, on CI); the fuzzer's own connection ends after 20 ms anyway, and
  // the timeout itself is tested in store_test.cpp.
  o.hello_timeout_s = 30;
  StoreServer server(o);
  int fd = connect_to(server.port());
  if (size > 0 && (data[0] & 1)) {
    std::vector<uint8_t> h = hello(0);
    send_all(fd, h.data(), h.size());
  }
  if (size > 1) send_all(fd, data + 1, size - 1);
  drain(fd, 20);
  ::close(fd);
  // A well-behaved rank is still served: its hello gets a complete reply frame.
  int good = connect_to(server.port());
  std::vector<uint8_t> h = hello(1);
  send_all(good, h.data(), h.size());
  std::vector<uint8_t> reply = drain(good, 2000, true);
  Header hdr;
  if (reply.size() < kHeaderBytes || !parse_header(reply.data(), kMaxPayloadBytes, hdr).empty())
    __builtin_trap();
  ::close(good);
  server.stop(0.0);
  return 0;
}
