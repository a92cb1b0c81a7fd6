// Under mpirun -np N (2..4): the MPI transport (gcommCommInitMpi with
// config.transport = gcommTransportMpi) held to the transport conformance suite
// (conformance_cases.hpp: every collective, dtype, op and size, Inf and NaN, past
// the 8 MiB piece; each rank checks its own bits against the reference, as the
// host transports do), and sends/receives in a ring. Then the failures: ranks that call different collectives
// all fail at once (none hangs), and a rank that skips a collective makes the others time out naming it, and
// learns why at its next call (the failure notice). Prints "mpi transport ok (rank r)".
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../conformance_cases.hpp"
#include "gradcomm/gradcomm.h"

using namespace gradcomm::test;

namespace {

int g_rank = 0;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s (%s)\n", g_rank, what.c_str(), gcommGetLastError());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

// The collectives (collective_calls.hpp: the reduce's root is 1 % n, the
// broadcast's n - 1), or (send_recv) a ring of sends and receives in a group.
gcommStatus_t call(bool send_recv, Op op, gcommComm_t c, int r, int n, const void* send, void* recv,
                   size_t count, gcommDataType_t d, gcommRedOp_t redop) {
  if (!send_recv) return issue(op, c, send, recv, count, d, redop, op == Op::kReduce ? 1 % n : n - 1);
  gcommGroupStart();
  gcommSend(c, send, count, d, (r + 1) % n, nullptr);
  gcommRecv(c, recv, count, d, (r + n - 1) % n, nullptr);
  return gcommGroupEnd();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int me = g_rank;

  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  cfg.device = gcommHostDevice();
  cfg.transport = gcommTransportMpi;
  cfg.timeout_s = 30;
  gcommComm_t comm = nullptr;
  if (gcommCommInitMpi(&cfg, GCOMM_MPI_COMM_WORLD, &comm) != gcommSuccess) die("gcommCommInitMpi");
  gcommTransport_t kind = gcommTransportAuto;
  int rank = -1, size = 0;
  gcommCommTransport(comm, &kind);
  gcommCommRank(comm, &rank);
  gcommCommSize(comm, &size);
  if (kind != gcommTransportMpi || rank != me || size != n)
    die("not an MPI transport communicator of MPI's ranks");

  // The transport conformance suite's cases (conformance_cases.hpp), each rank
  // checking its own output against the reference, as the host transports do.
  int checked = 0;
  for (const std::vector<ConformanceCase>& cases :
       {every_collective_case(), inf_and_nan_cases(), larger_than_a_piece_cases(n)})
    for (const ConformanceCase& k : cases) {
      const std::string e = check_on_rank(comm, me, n, k);
      if (!e.empty()) die(e);
      ++checked;
    }
  // A ring of sends and receives in a group, every dtype, up to past a piece.
  for (gcommDataType_t d : kDtypes)
    for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, size_t{2500000}}) {
      const uint32_t seed = static_cast<uint32_t>(count) * 31 + static_cast<uint32_t>(d);
      TypedBuffer mine = input(d, count, seed + 7919 * me, false);
      const int from = (me + n - 1) % n;
      const TypedBuffer theirs = input(d, count, seed + 7919 * from, false);
      std::vector<unsigned char> got((count + 1) * elem_size(d), 0x5A);
      if (call(true, Op::kAllReduce, comm, me, n, mine.bytes.data(), got.data(), count, d, gcommSum) !=
          gcommSuccess)
        die("the send/receive ring, count " + std::to_string(count));
      if (std::memcmp(got.data(), theirs.bytes.data(), count * elem_size(d)) != 0 ||
          got[count * elem_size(d)] != 0x5A)
        die("the send/receive ring delivered other bits, count " + std::to_string(count));
      ++checked;
    }
  if (gcommBarrier(comm, nullptr) != gcommSuccess) die("gcommBarrier");

  // Sends and receives outside a group, several per pair, in order: even ranks send first.
  if (n % 2 == 0) {
    const int peer = me ^ 1;
    const size_t sizes[] = {3, 0, 70001};
    auto expect = [&](int from, int k, size_t i) { return static_cast<float>(from * 1000 + k * 10) + i % 7; };
    for (int turn = 0; turn < 2; ++turn) {
      const bool sending = (me % 2 == 0) == (turn == 0);
      for (int k = 0; k < 3; ++k) {
        std::vector<float> buf(sizes[k] + 1, -1);
        if (sending) {
          for (size_t i = 0; i < sizes[k]; ++i) buf[i] = expect(me, k, i);
          if (gcommSend(comm, buf.data(), sizes[k], gcommFloat32, peer, nullptr) != gcommSuccess)
            die("gcommSend");
        } else {
          if (gcommRecv(comm, buf.data(), sizes[k], gcommFloat32, peer, nullptr) != gcommSuccess)
            die("gcommRecv");
          for (size_t i = 0; i < sizes[k]; ++i)
            if (buf[i] != expect(peer, k, i)) die("a message outside a group arrived wrong");
          if (buf[sizes[k]] != -1) die("a receive wrote past its count");
        }
      }
    }
  }
  // Past MPI's int counts: one message of 1.25 GiB goes in two pieces (two ranks only, for memory).
  if (n == 2) {
    const size_t count = (size_t{5} << 30) / 16;  // floats: 1.25 GiB
    std::vector<float> out(count), in(count, -1);
    for (size_t i = 0; i < count; i += 4099) out[i] = static_cast<float>(me * 7 + i % 1013);
    gcommGroupStart();
    gcommSend(comm, out.data(), count, gcommFloat32, 1 - me, nullptr);
    gcommRecv(comm, in.data(), count, gcommFloat32, 1 - me, nullptr);
    if (gcommGroupEnd() != gcommSuccess) die("a 1.25 GiB exchange");
    for (size_t i = 0; i < count; i += 4099)
      if (in[i] != static_cast<float>((1 - me) * 7 + i % 1013)) die("the 1.25 GiB message arrived wrong");
    if (in[count - 1] != 0) die("the end of the 1.25 GiB message");
  }

  // One rank refuses its configuration: every rank fails at once (none waits in MPI).
  {
    gcommCommConfig_t bad = cfg;
    if (me == n - 1) bad.rank = (me + 1) % n;
    gcommComm_t c = nullptr;
    const gcommStatus_t s = gcommCommInitMpi(&bad, GCOMM_MPI_COMM_WORLD, &c);
    if (s == gcommSuccess) die("a rank's wrong config.rank was not refused everywhere");
    const std::string m = gcommGetLastError();
    if (me == n - 1 ? m.find("of the MPI communicator") == std::string::npos
                    : m.find("another rank") == std::string::npos)
      die("the refusal does not say why: " + m);
  }

  // A rank that skips a collective: the others time out naming it; it learns at its next call.
  {
    gcommCommConfig_t short_cfg = cfg;
    short_cfg.timeout_s = 2;
    gcommComm_t c = nullptr;
    if (gcommCommInitMpi(&short_cfg, GCOMM_MPI_COMM_WORLD, &c) != gcommSuccess)
      die("second gcommCommInitMpi");
    float x = 1;
    const int late = n - 1;
    if (me != late) {
      const gcommStatus_t s = gcommAllReduce(c, &x, &x, 1, gcommFloat32, gcommSum, nullptr);
      const std::string m = gcommGetLastError();
      if (s != gcommTimeout && s != gcommRemoteError) die("a missing rank was not noticed");
      if (m.find("rank " + std::to_string(late)) == std::string::npos)
        die("the message does not name the late rank");
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(4));
      const gcommStatus_t s = gcommAllReduce(c, &x, &x, 1, gcommFloat32, gcommSum, nullptr);
      if (s != gcommRemoteError || std::string(gcommGetLastError()).find("failed") == std::string::npos)
        die("the late rank did not learn why the others failed");
    }
    gcommCommDestroy(c);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // A receive whose count differs from its send: the receiver names both counts.
  {
    gcommComm_t c = nullptr;
    if (gcommCommInitMpi(&cfg, GCOMM_MPI_COMM_WORLD, &c) != gcommSuccess) die("third gcommCommInitMpi");
    std::vector<float> buf(64, 1.0f);
    if (me == 1) {
      if (gcommRecv(c, buf.data(), 32, gcommFloat32, 0, nullptr) != gcommInvalidArgument)
        die("a p2p mismatch accepted");
      const std::string m = gcommGetLastError();
      if (m.find("64") == std::string::npos || m.find("32") == std::string::npos)
        die("the mismatch without counts: " + m);
    } else if (me == 0) {
      (void)gcommSend(c, buf.data(), 64, gcommFloat32, 1,
                      nullptr);  // done once sent; the receiver refuses it
    }
    MPI_Barrier(MPI_COMM_WORLD);
    gcommCommDestroy(c);
  }

  // Ranks that call different collectives all fail at once, none hangs.
  {
    float x[16] = {};
    const gcommStatus_t s = gcommAllReduce(comm, x, x, me == 0 ? 8 : 16, gcommFloat32, gcommSum, nullptr);
    if (s != gcommInvalidArgument && s != gcommRemoteError) die("a mismatch was not refused");
    // Each rank names the collectives that differ, or the rank that failed on them.
    const std::string m = gcommGetLastError();
    if (m.find("different collectives") == std::string::npos && m.find("failed") == std::string::npos)
      die("a mismatch without its reason: " + m);
  }
  gcommCommDestroy(comm);
  MPI_Finalize();
  std::printf("mpi transport ok (rank %d, %d cases)\n", me, checked);
  return 0;
}
