// Fuzz target: the socket transport's phase engine reading a peer's stream. Each
// input is what "rank 1" sends on a socketpair before closing it; rank 0 runs one
// phase that sends 64 bytes and expects a 64-byte message of a fixed all-reduce.
// The first input byte picks the prefix: nothing, a valid header for that phase
// (so the fuzzer reaches the payload and what follows), or a failure notice's
// magic. The phase must end (libFuzzer's -timeout catches a hang) with success or
// a gradcomm::Error of a status the transport documents; anything else aborts.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "comm/socket/socket_links.hpp"
#include "common/error.hpp"

using namespace gradcomm;
using namespace gradcomm::comm;
using namespace gradcomm::comm::sock;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) __builtin_trap();
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  std::vector<net::Socket> peers(2);
  peers[1] = net::Socket(fds[0]);
  SocketLinks links(std::move(peers), 0);

  PhaseTag tag;
  tag.sig = CallSignature{Collective::kAllReduce, 16, gcommFloat32, gcommSum, 0};
  tag.seq = 1;
  std::vector<uint8_t> stream;
  const uint8_t mode = size > 0 ? data[0] % 3 : 0;
  if (mode == 1) {
    stream.resize(SocketLinks::kHeaderBytes);
    encode_phase_header(tag, 64, stream.data());
  } else if (mode == 2) {
    stream = encode_failure_notice("");
    stream.resize(4);  // the magic only: the fuzzer writes the rest
  }
  if (size > 1) stream.insert(stream.end(), data + 1, data + size);
  // A socketpair buffer holds far more than a fuzz input: the write never blocks.
  size_t off = 0;
  while (off < stream.size()) {
    ssize_t k = ::send(fds[1], stream.data() + off, stream.size() - off, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;  // libFuzzer's timeout alarm
    if (k <= 0) break;
    off += static_cast<size_t>(k);
  }
  ::shutdown(fds[1], SHUT_WR);

  std::vector<char> out(64, 'o'), in(64);
  std::vector<PeerTransfer> t(2);
  t[1] = PeerTransfer{out.data(), out.size(), true, in.data(), in.size(), true};
  try {
    links.run_phase(t, tag, deadline_after(0.05), "fuzz");
  } catch (const Error& e) {
    const gcommStatus_t s = e.status();
    if (s != gcommRemoteError && s != gcommInvalidArgument && s != gcommTimeout) __builtin_trap();
    links.fail_all(e.message(), 1.0);
  }
  ::close(fds[1]);
  return 0;
}
