// The socket transport's phase engine alone, over socketpairs: the test plays
// rank 1 by writing raw bytes, so every way a peer's stream can go wrong is
// reached on purpose: bytes that are not the protocol, unknown enum values, a
// different collective, a peer out of step, a connection closed mid-message,
// silence until the deadline, a failure notice, an abort from another thread.
#include "comm/socket/socket_links.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "common/error.hpp"

namespace gradcomm::comm::sock {
namespace {

using gradcomm::Deadline;
using gradcomm::deadline_after;
using net::Socket;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Rank 0's links with a socketpair to rank 1; `peer` is the test's end (blocking).
struct Rank0 {
  std::unique_ptr<SocketLinks> links;
  int peer = -1;
  Rank0() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    std::vector<Socket> peers(2);
    peers[1] = Socket(fds[0]);
    links = std::make_unique<SocketLinks>(std::move(peers), 0);
    peer = fds[1];
  }
  ~Rank0() {
    if (peer >= 0) ::close(peer);
  }
  // Rank 1 goes away: its end of the pair closes.
  void hang_up() {
    ::close(peer);
    peer = -1;
  }
  void write(const void* data, size_t n) {
    ASSERT_EQ(::send(peer, data, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
  }
  void write(const std::vector<uint8_t>& v) { write(v.data(), v.size()); }
};

PhaseTag all_reduce_tag(size_t count) {
  PhaseTag t;
  t.sig = CallSignature{Collective::kAllReduce, count, gcommFloat32, gcommSum, 0};
  t.seq = 7;
  t.phase = 0;
  return t;
}

std::vector<uint8_t> header(const PhaseTag& t, uint64_t payload) {
  std::vector<uint8_t> h(SocketLinks::kHeaderBytes);
  encode_phase_header(t, payload, h.data());
  return h;
}

// Runs one phase on rank 0 that receives `bytes` from rank 1 (and sends nothing);
// returns the status and message it ends with.
std::pair<gcommStatus_t, std::string> receive(Rank0& r, const PhaseTag& tag, size_t bytes,
                                              double seconds = 5) {
  std::vector<char> in(bytes + 1);
  std::vector<PeerTransfer> t(2);
  t[1].in = in.data();
  t[1].in_bytes = bytes;
  t[1].receives = true;
  try {
    r.links->run_phase(t, tag, deadline_after(seconds), "all-reduce #7 (test)");
  } catch (const Error& e) {
    return {e.status(), e.message()};
  }
  return {gcommSuccess, std::string(in.data(), bytes)};
}

// Ranks 0 and 1 of a world of two, linked by a socketpair.
struct LinkedPair {
  std::unique_ptr<SocketLinks> rank0, rank1;
  LinkedPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    std::vector<Socket> a(2), b(2);
    a[1] = Socket(fds[0]);
    b[0] = Socket(fds[1]);
    rank0 = std::make_unique<SocketLinks>(std::move(a), 0);
    rank1 = std::make_unique<SocketLinks>(std::move(b), 1);
  }
};

TEST(SocketLinks, TwoRanksExchangeAPhaseBothWays) {
  LinkedPair pair;
  SocketLinks& rank0 = *pair.rank0;
  SocketLinks& rank1 = *pair.rank1;
  // More than the socket buffers hold, so both sides must read while they write.
  const size_t n = size_t{4} << 20;
  std::vector<char> out0(n, 'a'), out1(n, 'b'), in0(n), in1(n);
  const PhaseTag tag = all_reduce_tag(n / 4);
  std::thread peer([&] {
    std::vector<PeerTransfer> t(2);
    t[0] = PeerTransfer{out1.data(), n, true, in1.data(), n, true};
    rank1.run_phase(t, tag, deadline_after(10), "test");
  });
  std::vector<PeerTransfer> t(2);
  t[1] = PeerTransfer{out0.data(), n, true, in0.data(), n, true};
  rank0.run_phase(t, tag, deadline_after(10), "test");
  peer.join();
  EXPECT_EQ(in0, out1);
  EXPECT_EQ(in1, out0);
}

// Straggler attribution's link part: the time a phase waited for a peer is
// charged to that peer. Rank 1 writes its message 60 ms late; rank 0 waited
// about that long on it (and the charge is there for any thread to read).
TEST(SocketLinks, TheTimeAPhaseWaitsForAPeerIsChargedToIt) {
  Rank0 r;
  uint64_t before = 1;
  ASSERT_TRUE(r.links->waited_on_ns(1, before));
  EXPECT_EQ(before, 0u);
  const PhaseTag tag = all_reduce_tag(2);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    r.write(header(tag, 8));
    r.write(std::vector<uint8_t>(8, 7));
  });
  auto [status, _] = receive(r, tag, 8);
  late.join();
  ASSERT_EQ(status, gcommSuccess);
  uint64_t waited = 0;
  ASSERT_TRUE(r.links->waited_on_ns(1, waited));
  EXPECT_GE(waited, 50'000'000u);
  EXPECT_LT(waited, 5'000'000'000u);
}

// The progress hook sees the payload arrive: called while rank 1 trickles its
// message, with received_bytes growing to the whole payload and every byte it
// reports already in place (what the socket transport reduces as it arrives).
TEST(SocketLinks, ProgressSeesThePayloadArriveInOrder) {
  Rank0 r;
  const PhaseTag tag = all_reduce_tag(4096);
  const size_t bytes = 4096 * 4;
  std::vector<uint8_t> payload(bytes);
  for (size_t i = 0; i < bytes; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
  // Each piece is written once the hook has run since the last one (at most 5 s
  // later): a fixed sleep let a reader that started late find the whole message
  // already buffered and see it in one call.
  std::atomic<size_t> hook_calls{0};
  std::thread peer([&] {
    r.write(header(tag, bytes));
    for (size_t off = 0; off < bytes; off += 1000) {
      const size_t seen = hook_calls.load();
      r.write(payload.data() + off, std::min<size_t>(1000, bytes - off));
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (hook_calls.load() == seen && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<uint8_t> in(bytes);
  std::vector<PeerTransfer> t(2);
  t[1].in = in.data();
  t[1].in_bytes = bytes;
  t[1].receives = true;
  size_t calls = 0, last = 0;
  bool in_order = true, in_place = true;
  r.links->run_phase(t, tag, deadline_after(10), "all-reduce #7 (test)", [&] {
    hook_calls.store(++calls);
    const size_t got = r.links->received_bytes(1);
    in_order = in_order && got >= last && got <= bytes;
    in_place = in_place && std::memcmp(in.data(), payload.data(), got) == 0;
    last = got;
  });
  peer.join();
  EXPECT_GT(calls, 3u) << "the hook runs while the phase waits";
  EXPECT_TRUE(in_order);
  EXPECT_TRUE(in_place);
  EXPECT_EQ(r.links->received_bytes(1), bytes);
  EXPECT_EQ(in, payload);
}

TEST(SocketLinks, BytesThatAreNotTheProtocolAreARemoteError) {
  Rank0 r;
  std::vector<uint8_t> junk(64, 0xAB);
  r.write(junk);
  auto [status, message] = receive(r, all_reduce_tag(4), 16);
  EXPECT_EQ(status, gcommRemoteError);
  EXPECT_TRUE(contains(message, "rank 1 sent bytes that are not a gradcomm message")) << message;
}

TEST(SocketLinks, UnknownEnumValuesAreARemoteError) {
  Rank0 r;
  std::vector<uint8_t> h = header(all_reduce_tag(4), 16);
  h[17] = 200;  // dtype
  r.write(h);
  auto [status, message] = receive(r, all_reduce_tag(4), 16);
  EXPECT_EQ(status, gcommRemoteError);
  EXPECT_TRUE(contains(message, "unknown collective, dtype or operator")) << message;
}

TEST(SocketLinks, ADifferentCollectiveIsNamedWithBothCalls) {
  Rank0 r;
  PhaseTag theirs = all_reduce_tag(8);
  theirs.sig.op = Collective::kAllGather;
  r.write(header(theirs, 32));
  auto [status, message] = receive(r, all_reduce_tag(4), 16);
  EXPECT_EQ(status, gcommInvalidArgument);
  EXPECT_TRUE(contains(message,
                       "ranks called different collectives: rank 0 called all-reduce(count 4, f32, sum) "
                       "as collective #7, rank 1 called all-gather(count 8, f32) as collective #7"))
      << message;
}

TEST(SocketLinks, APeerOutOfStepIsARemoteError) {
  Rank0 r;
  PhaseTag theirs = all_reduce_tag(4);
  theirs.phase = 1;
  r.write(header(theirs, 16));
  auto [status, message] = receive(r, all_reduce_tag(4), 16);
  EXPECT_EQ(status, gcommRemoteError);
  EXPECT_TRUE(contains(message, "rank 1 is out of step (phase 1 with 16 bytes; expected phase 0 with 16)"))
      << message;
}

TEST(SocketLinks, AConnectionClosedMidMessageNamesThePeer) {
  Rank0 r;
  r.write(header(all_reduce_tag(4), 16));
  r.write("12345678", 8);
  r.hang_up();
  auto [status, message] = receive(r, all_reduce_tag(4), 16);
  EXPECT_EQ(status, gcommRemoteError);
  EXPECT_TRUE(contains(message, "all-reduce #7 (test): rank 1 closed its connection")) << message;
}

TEST(SocketLinks, SilenceEndsAtTheDeadlineNamingThePeer) {
  Rank0 r;
  auto start = std::chrono::steady_clock::now();
  auto [status, message] = receive(r, all_reduce_tag(4), 16, 0.1);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status, gcommTimeout);
  EXPECT_TRUE(contains(message, "waiting for data from rank 1")) << message;
  EXPECT_GE(seconds, 0.09);
  EXPECT_LT(seconds, 2.0);
}

TEST(SocketLinks, AFailureNoticeBringsThePeersReason) {
  Rank0 r;
  r.write(encode_failure_notice("all-reduce #7: rank 2 closed its connection"));
  r.hang_up();
  auto [status, message] = receive(r, all_reduce_tag(4), 16);
  EXPECT_EQ(status, gcommRemoteError);
  EXPECT_TRUE(contains(message, "rank 1 failed: all-reduce #7: rank 2 closed its connection")) << message;
}

TEST(SocketLinks, AFailureNoticeIsReadWhenOnlySendingToThePeer) {
  // Rank 0 only sends in this phase; rank 1 left with a notice. The send fails and
  // the notice waiting in the stream says why.
  Rank0 r;
  r.write(encode_failure_notice("it ran out of memory"));
  ::shutdown(r.peer, SHUT_RD);
  std::vector<char> out(size_t{8} << 20, 'x');
  std::vector<PeerTransfer> t(2);
  t[1] = PeerTransfer{out.data(), out.size(), true, nullptr, 0, false};
  gcommStatus_t status = gcommSuccess;
  std::string message;
  try {
    r.links->run_phase(t, all_reduce_tag(4), deadline_after(0.5), "all-reduce #7 (test)");
  } catch (const Error& e) {
    status = e.status();
    message = e.message();
  }
  // Whether the kernel reports the reader's shutdown (a broken connection) or the
  // deadline passes first, the phase ends; when the connection breaks, the
  // notice is what the message says.
  ASSERT_NE(status, gcommSuccess);
  if (status == gcommRemoteError)
    EXPECT_TRUE(contains(message, "rank 1 failed: it ran out of memory")) << message;
  else
    EXPECT_EQ(status, gcommTimeout) << message;
}

TEST(SocketLinks, AbortFromAnotherThreadEndsAPhase) {
  Rank0 r;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r.links->abort();
  });
  auto [status, message] = receive(r, all_reduce_tag(4), 16, 30);
  aborter.join();
  EXPECT_EQ(status, gcommAborted);
  EXPECT_TRUE(contains(message, "rank 0's communicator was aborted")) << message;
}

TEST(SocketLinks, FailAllFinishesTheMessageInFlightThenSendsTheNotice) {
  LinkedPair pair;
  SocketLinks& rank0 = *pair.rank0;
  SocketLinks& rank1 = *pair.rank1;
  // Rank 0 sends more than the socket holds and expects a reply that never
  // comes: its phase times out mid-message; fail_all completes the message and
  // tells rank 1, which was reading it.
  const size_t n = size_t{4} << 20;
  std::vector<char> out(n, 'z'), in(n), reply(16);
  const PhaseTag tag = all_reduce_tag(n / 4);
  std::thread first([&] {
    std::vector<PeerTransfer> t(2);
    t[1] = PeerTransfer{out.data(), n, true, reply.data(), reply.size(), true};
    try {
      rank0.run_phase(t, tag, deadline_after(0.2), "test");
    } catch (const Error& e) {
      rank0.fail_all(e.message(), 1.0);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // rank 0 is past its deadline
  std::vector<PeerTransfer> t(2);
  t[0] = PeerTransfer{nullptr, 0, false, in.data(), n, true};
  rank1.run_phase(t, tag, deadline_after(5), "test");  // the whole message arrives
  EXPECT_EQ(in, out);
  PhaseTag next = tag;
  next.phase = 1;
  std::vector<PeerTransfer> t2(2);
  t2[0] = PeerTransfer{nullptr, 0, false, in.data(), 16, true};
  try {
    rank1.run_phase(t2, next, deadline_after(5), "next");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommRemoteError);
    EXPECT_TRUE(contains(e.message(), "rank 0 failed: test did not complete within the timeout on rank 0"))
        << e.message();
  }
  first.join();
}

// run_gated_messages: a message held by the gate neither moves nor counts. Rank 1
// (the test) sends two messages at once; rank 0 holds the second one's receive
// and its own reply until its progress hook opens the gate, which it does only
// after checking that nothing of either has moved.
TEST(SocketLinks, GatedMessagesWaitUntilProgressOpensTheGate) {
  Rank0 r;
  PhaseTag first = all_reduce_tag(64), second = first;
  second.phase = 1;
  std::vector<uint8_t> a(256, 0x11), b(256, 0x22), reply(256, 0x33);
  r.write(header(first, a.size()));
  r.write(a);
  r.write(header(second, b.size()));
  r.write(b);
  std::vector<uint8_t> in_a(256), in_b(256);
  std::vector<PeerQueue> queues(2);
  queues[1].in = {InMessage{in_a.data(), in_a.size(), first, 0},
                  InMessage{in_b.data(), in_b.size(), second, 1}};
  queues[1].out = {OutMessage{reply.data(), reply.size(), second, 1}};
  size_t gate = 0;
  bool held_untouched = false;
  r.links->run_gated_messages(queues, gate, deadline_after(10), "all-reduce #7 (test)", [&] {
    if (gate > 0 || r.links->messages_received(1) < 1) return;
    uint8_t probe;
    const bool nothing_sent = ::recv(r.peer, &probe, 1, MSG_DONTWAIT | MSG_PEEK) < 0 && errno == EAGAIN;
    held_untouched = nothing_sent && r.links->received_bytes(1) == 0 &&
                     std::all_of(in_b.begin(), in_b.end(), [](uint8_t x) { return x == 0; });
    gate = 1;
  });
  EXPECT_TRUE(held_untouched);
  EXPECT_EQ(r.links->messages_received(1), 2u);
  EXPECT_EQ(in_a, a);
  EXPECT_EQ(in_b, b);
  std::vector<uint8_t> got(SocketLinks::kHeaderBytes + reply.size());
  ASSERT_EQ(::recv(r.peer, got.data(), got.size(), MSG_WAITALL), static_cast<ssize_t>(got.size()));
  EXPECT_TRUE(std::equal(reply.begin(), reply.end(), got.begin() + SocketLinks::kHeaderBytes));
}

// A gate that the progress hook never opens is a schedule error: it fails at once
// naming the peer, instead of waiting until the deadline.
TEST(SocketLinks, AGateThatNeverOpensFailsAtOnce) {
  Rank0 r;
  std::vector<uint8_t> out(64, 1);
  std::vector<PeerQueue> queues(2);
  queues[1].out = {OutMessage{out.data(), out.size(), all_reduce_tag(16), 1}};
  size_t gate = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    r.links->run_gated_messages(queues, gate, deadline_after(30), "all-reduce #7 (test)", [] {});
    ADD_FAILURE() << "a run whose gate never opens returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInternalError);
    EXPECT_TRUE(contains(e.message(), "rank 1")) << e.message();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace gradcomm::comm::sock
