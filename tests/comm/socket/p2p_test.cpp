// gcommSend / gcommRecv on both host transports (the local transport's ranks as
// threads, the socket transport's over loopback): rings in a group, pairs
// outside one, several messages per pair in order, sends to the rank itself,
// messages larger than the socket buffers, sends and receives between
// collectives that only some ranks make, mismatches, the wait of two ranks that
// both send first, bad arguments, and the flight record's separate numbering.
// Payloads are random bytes (the calls copy, they never compute), checked bit
// for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "socket_ranks.hpp"

namespace gradcomm::test {
namespace {

enum class Kind { kLocal, kSocket };
void PrintTo(Kind k, std::ostream* os) {
  *os << (k == Kind::kLocal ? "local" : "socket");
}

std::vector<gcommComm_t> make(Kind k, int n, double timeout_s = 30.0) {
  return k == Kind::kLocal ? make_local(n, timeout_s) : make_socket(n, timeout_s, "p2p-test");
}
void finish(Kind k, std::vector<gcommComm_t>& comms) {
  if (k == Kind::kLocal)
    destroy(comms);
  else
    destroy_together(comms);
}

size_t esize(gcommDataType_t d) {
  return d == gcommFloat32 ? 4 : 2;
}

// What rank `from` sends to rank `to` as its `k`-th message: random bytes.
std::vector<unsigned char> payload(int from, int to, int k, size_t bytes) {
  std::mt19937 rng(static_cast<uint32_t>(from * 7919 + to * 104729 + k * 31 + 1));
  std::vector<unsigned char> v(bytes);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

std::string ok(gcommStatus_t s) {
  return s == gcommSuccess ? "" : gcommGetLastError();
}
std::string cat_status(gcommStatus_t s) {
  return "status " + std::to_string(s) + ": " + gcommGetLastError();
}

class P2P : public ::testing::TestWithParam<Kind> {};

// Every rank sends to its right and receives from its left in one group: the
// pattern that waits forever when each send waits for its receive.
TEST_P(P2P, RingInAGroupEveryDtypeAndSize) {
  for (int n : {1, 2, 3, 4}) {
    auto comms = make(GetParam(), n);
    for (gcommDataType_t d : {gcommFloat32, gcommFloat16, gcommBfloat16})
      for (size_t count : {size_t{0}, size_t{1}, size_t{1023}, size_t{300001}}) {
        auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
          const int right = (r + 1) % n, left = (r + n - 1) % n;
          auto out = payload(r, right, 0, count * esize(d));
          std::vector<unsigned char> in(count * esize(d) + 1, 0xAB);  // one guard byte past the end
          if (auto e = ok(gcommGroupStart()); !e.empty()) return e;
          if (auto e = ok(gcommSend(c, out.data(), count, d, right, nullptr)); !e.empty()) return e;
          if (auto e = ok(gcommRecv(c, in.data(), count, d, left, nullptr)); !e.empty()) return e;
          if (auto e = ok(gcommGroupEnd()); !e.empty()) return e;
          auto want = payload(left, r, 0, count * esize(d));
          if (!std::equal(want.begin(), want.end(), in.begin())) return "wrong payload";
          if (in.back() != 0xAB) return "wrote past the receive buffer";
          return "";
        });
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(errors[r], "") << "n=" << n << " rank " << r << " count " << count;
      }
    finish(GetParam(), comms);
  }
}

// Outside a group: even ranks send first, odd ranks receive first, several
// messages of different sizes per pair, met in order.
TEST_P(P2P, PairsOutsideAGroupInOrder) {
  const int n = 4;
  const size_t sizes[] = {5, 0, 70000, 3};
  auto comms = make(GetParam(), n);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    const int peer = r ^ 1;
    auto send_all = [&]() -> std::string {
      for (int k = 0; k < 4; ++k) {
        auto out = payload(r, peer, k, sizes[k] * 4);
        if (auto e = ok(gcommSend(c, out.data(), sizes[k], gcommFloat32, peer, nullptr)); !e.empty())
          return e;
      }
      return "";
    };
    auto recv_all = [&]() -> std::string {
      for (int k = 0; k < 4; ++k) {
        std::vector<unsigned char> in(sizes[k] * 4 + 1);
        if (auto e = ok(gcommRecv(c, in.data(), sizes[k], gcommFloat32, peer, nullptr)); !e.empty()) return e;
        auto want = payload(peer, r, k, sizes[k] * 4);
        if (!std::equal(want.begin(), want.end(), in.begin()))
          return "wrong payload, message " + std::to_string(k);
      }
      return "";
    };
    std::string e = r % 2 == 0 ? send_all() : recv_all();
    if (e.empty()) e = r % 2 == 0 ? recv_all() : send_all();
    return e;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  finish(GetParam(), comms);
}

// An all-to-all made of sends and receives (with the rank itself), two
// messages per pair, gives gcommAllToAll's result.
TEST_P(P2P, GroupedAllToAllWithSelfMatchesTheCollective) {
  const int n = 3;
  const size_t block = 999;
  auto comms = make(GetParam(), n);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> send(n * block), via_p2p(n * block, -1), via_coll(n * block, -2);
    auto bytes = payload(r, r, 9, send.size() * 4);
    std::memcpy(send.data(), bytes.data(), bytes.size());
    if (auto e = ok(gcommGroupStart()); !e.empty()) return e;
    for (int q = 0; q < n; ++q) {  // each block in two halves: two messages per pair, in order
      const size_t half = block / 2;
      gcommSend(c, send.data() + q * block, half, gcommFloat32, q, nullptr);
      gcommSend(c, send.data() + q * block + half, block - half, gcommFloat32, q, nullptr);
      gcommRecv(c, via_p2p.data() + q * block, half, gcommFloat32, q, nullptr);
      gcommRecv(c, via_p2p.data() + q * block + half, block - half, gcommFloat32, q, nullptr);
    }
    if (auto e = ok(gcommGroupEnd()); !e.empty()) return e;
    if (auto e = ok(gcommAllToAll(c, send.data(), via_coll.data(), block, gcommFloat32, nullptr)); !e.empty())
      return e;
    return std::memcmp(via_p2p.data(), via_coll.data(), via_p2p.size() * 4) == 0
               ? ""
               : "differs from gcommAllToAll";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  finish(GetParam(), comms);
}

// Only ranks 0 and 1 exchange messages between two all-reduces of all ranks:
// the collectives' numbering must still agree across ranks.
TEST_P(P2P, SendsBetweenCollectivesOfSomeRanksOnly) {
  const int n = 3;
  auto comms = make(GetParam(), n);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> x(17, static_cast<float>(r + 1));
    for (int round = 0; round < 3; ++round) {
      if (r == 0)
        for (int k = 0; k <= round; ++k)
          if (auto e = ok(gcommSend(c, x.data(), 17, gcommFloat32, 1, nullptr)); !e.empty()) return e;
      if (r == 1)
        for (int k = 0; k <= round; ++k) {
          std::vector<float> in(17);
          if (auto e = ok(gcommRecv(c, in.data(), 17, gcommFloat32, 0, nullptr)); !e.empty()) return e;
          if (in[0] != 1.0f || in[16] != 1.0f) return "wrong payload";
        }
      std::vector<float> y(17, 1.0f);
      if (auto e = ok(gcommAllReduce(c, y.data(), y.data(), 17, gcommFloat32, gcommSum, nullptr)); !e.empty())
        return e;
      if (y[3] != static_cast<float>(n)) return "wrong all-reduce";
    }
    return "";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  finish(GetParam(), comms);
}

// Larger than the socket buffers, and both ranks send first: inside a group it
// completes; outside, each send waits for a receive that never comes.
TEST_P(P2P, BothSendFirstNeedsAGroup) {
  const size_t count = size_t{4} << 20;  // 16 MiB of floats
  auto comms = make(GetParam(), 2, 1.0);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> out(count, static_cast<float>(r)), in(count, -1);
    if (auto e = ok(gcommGroupStart()); !e.empty()) return e;
    gcommSend(c, out.data(), count, gcommFloat32, 1 - r, nullptr);
    gcommRecv(c, in.data(), count, gcommFloat32, 1 - r, nullptr);
    if (auto e = ok(gcommGroupEnd()); !e.empty()) return e;
    if (in[count - 1] != static_cast<float>(1 - r)) return "wrong payload";
    gcommStatus_t s = gcommSend(c, out.data(), count, gcommFloat32, 1 - r, nullptr);
    // Socket: once the first rank times out and closes its connections, the
    // kernel takes the other's bytes; that rank learns at its next call.
    // (The barrier may also meet the peer's unread send first: a mismatch.)
    if (s == gcommSuccess && GetParam() == Kind::kSocket) {
      s = gcommBarrier(c, nullptr);
      if (s != gcommSuccess) return std::string("failed: send #3 succeeded, then ") + gcommGetLastError();
    }
    if (s != gcommTimeout && s != gcommRemoteError) return "outside a group: status " + std::to_string(s);
    return std::string("failed: ") + gcommGetLastError();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r].rfind("failed: ", 0), 0u) << errors[r];
    EXPECT_NE(errors[r].find("send #3"), std::string::npos) << errors[r];  // names the call
    if (GetParam() == Kind::kLocal) {
      EXPECT_NE(errors[r].find("need a group"), std::string::npos) << errors[r];
    }
  }
  if (GetParam() == Kind::kLocal)
    destroy(comms);
  else
    for (gcommComm_t c : comms) gcommCommDestroy(c);  // failed: no shutdown barrier
}

// A send outside a group that no receive meets fails at its timeout, not a second
// later: the socket transport gave a timed-out message a second to finish before
// telling the peer (which is not reading it) why. The bound leaves 0.6 s for a
// loaded machine; the old delay was a full second.
TEST(P2PTimeout, ABlockedSendFailsAtItsTimeout) {
  const double timeout_s = 1.5;
  const size_t count = size_t{16} << 20;  // 64 MiB of floats: far past the socket buffers
  auto comms = make_socket(2, timeout_s, "p2p-timeout");
  double elapsed = 0.0;
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    if (r == 1) {  // never receives; stays until the sender has failed
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s + 1.5));
      return "";
    }
    std::vector<float> out(count, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    const gcommStatus_t s = gcommSend(c, out.data(), count, gcommFloat32, 1, nullptr);
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s != gcommTimeout)
      return std::string("status ") + gcommGetStatusString(s) + ": " + gcommGetLastError();
    return "";
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_GE(elapsed, timeout_s - 0.05);
  EXPECT_LT(elapsed, timeout_s + 0.6) << "the send failed " << elapsed - timeout_s << " s after its timeout";
  for (gcommComm_t c : comms) gcommCommDestroy(c);  // failed: no shutdown barrier
}

// A receive whose count differs from its send: both ranks are told, naming both.
TEST_P(P2P, MismatchedCountsAreReportedOnBothRanks) {
  auto comms = make(GetParam(), 2, 5.0);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> buf(64, 1.0f);
    gcommStatus_t s = r == 0 ? gcommSend(c, buf.data(), 64, gcommFloat32, 1, nullptr)
                             : gcommRecv(c, buf.data(), 32, gcommFloat32, 0, nullptr);
    // The socket transport's small send is done once written: the sender
    // learns at its next call, from the receiver's failure notice.
    if (s == gcommSuccess && r == 0 && GetParam() == Kind::kSocket) s = gcommBarrier(c, nullptr);
    if (s == gcommSuccess) return "accepted";
    return std::to_string(s) + ": " + gcommGetLastError();
  });
  const gcommStatus_t sender_status = GetParam() == Kind::kLocal ? gcommInvalidArgument : gcommRemoteError;
  EXPECT_EQ(errors[0].rfind(std::to_string(sender_status) + ":", 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind(std::to_string(gcommInvalidArgument) + ":", 0), 0u) << errors[1];
  for (const std::string& e : errors) {  // both name both counts
    EXPECT_NE(e.find("64"), std::string::npos) << e;
    EXPECT_NE(e.find("32"), std::string::npos) << e;
  }
  if (GetParam() == Kind::kLocal) {
    // The local transport's mailboxes stay in step: the communicators go on.
    auto again = run_ranks(comms, [&](int, gcommComm_t c) -> std::string {
      float x = 1;
      return ok(gcommAllReduce(c, &x, &x, 1, gcommFloat32, gcommSum, nullptr));
    });
    EXPECT_EQ(again[0], "");
    EXPECT_EQ(again[1], "");
    destroy(comms);
  } else {
    for (gcommComm_t c : comms) gcommCommDestroy(c);
  }
}

// Rank 0 receives from 1 then 2 in one group; rank 2 sends to 0, then (another
// group) to 1; rank 1 receives from 2, then sends to 0. A group's receives must
// not wait for each other: taking them strictly in call order waits forever.
TEST_P(P2P, ReceivesOfAGroupDoNotWaitForEachOther) {
  auto comms = make(GetParam(), 3, 10.0);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> a(33, static_cast<float>(r)), b(33, -1), d(33, -1);
    auto group = [&](const std::function<void()>& calls) {
      gcommGroupStart();
      calls();
      return ok(gcommGroupEnd());
    };
    std::string e;
    if (r == 0) {
      e = group([&] {
        gcommRecv(c, b.data(), 33, gcommFloat32, 1, nullptr);
        gcommRecv(c, d.data(), 33, gcommFloat32, 2, nullptr);
      });
      if (e.empty() && (b[32] != 1 || d[0] != 2)) e = "wrong payloads";
    } else if (r == 2) {
      e = group([&] { gcommSend(c, a.data(), 33, gcommFloat32, 0, nullptr); });
      if (e.empty()) e = group([&] { gcommSend(c, a.data(), 33, gcommFloat32, 1, nullptr); });
    } else {
      e = group([&] { gcommRecv(c, b.data(), 33, gcommFloat32, 2, nullptr); });
      if (e.empty()) e = group([&] { gcommSend(c, a.data(), 33, gcommFloat32, 0, nullptr); });
      if (e.empty() && b[5] != 2) e = "wrong payload";
    }
    return e;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  finish(GetParam(), comms);
}

// A mismatch inside a group is reported on both ranks; on the local transport the
// communicators stay usable, as outside a group (nothing is aborted).
TEST_P(P2P, AMismatchInAGroupIsReportedAndAbortsNothing) {
  auto comms = make(GetParam(), 2, 5.0);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> buf(8, 1.0f);
    gcommGroupStart();
    if (r == 0)
      gcommSend(c, buf.data(), 8, gcommFloat32, 1, nullptr);
    else
      gcommRecv(c, buf.data(), 4, gcommFloat32, 0, nullptr);
    gcommStatus_t s = gcommGroupEnd();
    if (s == gcommSuccess && r == 0 && GetParam() == Kind::kSocket) s = gcommBarrier(c, nullptr);
    const std::string m = gcommGetLastError();
    if (s == gcommSuccess) return "accepted";
    if (GetParam() == Kind::kLocal) {
      if (s != gcommInvalidArgument || m.find("stay usable") == std::string::npos)
        return "status " + std::to_string(s) + ": " + m;
      float x = 1;  // still usable
      return ok(gcommAllReduce(c, &x, &x, 1, gcommFloat32, gcommSum, nullptr));
    }
    return m.find("8") != std::string::npos && m.find("4") != std::string::npos ? ""
                                                                                : "no counts named: " + m;
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  if (GetParam() == Kind::kLocal)
    destroy(comms);
  else
    for (gcommComm_t c : comms) gcommCommDestroy(c);
}

// Bad arguments are refused before anything moves, each with its reason, and
// the communicator goes on.
TEST_P(P2P, BadArgumentsRefused) {
  auto comms = make(GetParam(), 2);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    float x[4] = {1, 2, 3, 4};
    auto refused = [](gcommStatus_t got, const char* needle) -> std::string {
      if (got != gcommInvalidArgument) return cat_status(got);
      const std::string m = gcommGetLastError();
      return m.find(needle) != std::string::npos ? "" : "message without '" + std::string(needle) + "': " + m;
    };
    for (const std::string& e : {
             refused(gcommSend(c, x, 4, gcommFloat32, 2, nullptr), "peer 2 is not a rank"),
             refused(gcommRecv(c, x, 4, gcommFloat32, -1, nullptr), "peer -1 is not a rank"),
             refused(gcommSend(c, nullptr, 4, gcommFloat32, 1 - r, nullptr), "sendbuf is NULL"),
             refused(gcommRecv(c, nullptr, 4, gcommFloat32, 1 - r, nullptr), "recvbuf is NULL"),
             refused(gcommRecv(c, x, 4, static_cast<gcommDataType_t>(99), 1 - r, nullptr), "dtype"),
             refused(gcommSend(c, x, 4, gcommFloat32, r, nullptr), "same group"),
             refused(gcommSend(c, x, SIZE_MAX / 2, gcommFloat32, 1 - r, nullptr), "count"),
         })
      if (!e.empty()) return e;
    if (gcommSend(nullptr, x, 4, gcommFloat32, 0, nullptr) == gcommSuccess)
      return "a NULL communicator accepted";
    return ok(gcommAllReduce(c, x, x, 4, gcommFloat32, gcommSum, nullptr));  // still usable
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  finish(GetParam(), comms);
  // Inside a group a rank may send to itself, but only with a receive from itself.
  auto one = make(GetParam(), 1);
  float x[4] = {};
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  ASSERT_EQ(gcommSend(one[0], x, 4, gcommFloat32, 0, nullptr), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(gcommGroupEnd(), gcommInvalidArgument);
  EXPECT_NE(std::string(gcommGetLastError()).find("receive from itself"), std::string::npos)
      << gcommGetLastError();
  for (gcommComm_t c : one) gcommCommDestroy(c);
}

// Sends and receives are numbered apart from collectives in the flight record.
TEST_P(P2P, FlightRecordNumbersSendsApart) {
  auto comms = make(GetParam(), 2);
  std::vector<std::string> records(2);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    float x[8] = {};
    if (r == 0)
      gcommSend(c, x, 8, gcommFloat32, 1, nullptr);
    else
      gcommRecv(c, x, 8, gcommFloat32, 0, nullptr);
    if (auto e = ok(gcommAllReduce(c, x, x, 8, gcommFloat32, gcommSum, nullptr)); !e.empty()) return e;
    // A group's sends and receives complete at its end: recorded as completed then.
    float y[8] = {};
    gcommGroupStart();
    gcommSend(c, x, 8, gcommFloat32, 1 - r, nullptr);
    gcommRecv(c, y, 8, gcommFloat32, 1 - r, nullptr);
    if (auto e = ok(gcommGroupEnd()); !e.empty()) return e;
    size_t need = 0;
    gcommCommGetFlightRecord(c, nullptr, 0, &need);
    records[r].resize(need);
    if (auto e = ok(gcommCommGetFlightRecord(c, records[r].data(), need, &need)); !e.empty()) return e;
    return "";
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_NE(records[0].find("\"op\": \"send\""), std::string::npos) << records[0];
  EXPECT_NE(records[0].find("\"p2p_seq\": 1"), std::string::npos) << records[0];
  EXPECT_NE(records[0].find("\"peer\": 1"), std::string::npos) << records[0];
  EXPECT_NE(records[1].find("\"op\": \"recv\""), std::string::npos) << records[1];
  for (const auto& rec : records) {
    EXPECT_NE(rec.find("\"last_enqueued_seq\": 1"), std::string::npos)
        << rec;  // the all-reduce is collective #1
    EXPECT_NE(rec.find("\"last_completed_seq\": 1"), std::string::npos) << rec;
    EXPECT_NE(rec.find("\"p2p_seq\": 3"), std::string::npos) << rec;  // the group's recv
    EXPECT_EQ(rec.find("\"enqueued\""), std::string::npos) << "a call left enqueued: " << rec;
  }
  finish(GetParam(), comms);
}

INSTANTIATE_TEST_SUITE_P(Transports, P2P, ::testing::Values(Kind::kLocal, Kind::kSocket),
                         [](const auto& i) { return i.param == Kind::kLocal ? "Local" : "Socket"; });

}  // namespace
}  // namespace gradcomm::test
