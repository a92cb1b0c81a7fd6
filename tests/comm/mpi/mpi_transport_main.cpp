// Under mpirun -np N (2..4): the MPI transport (gcommCommInitMpi with
// config.transport = gcommTransportMpi) against the local transport run in this
// process on every rank's inputs: every collective, dtype and size (0, 1, 4099
// and past the 8 MiB piece), and sends/receives in a ring, must give this rank
// the same bits. Then the failures: ranks that call different collectives all
// fail at once (none hangs), and a rank that skips a collective makes the others
// time out naming it, and learns why at its next call (the failure notice).
// Prints "mpi transport ok (rank r)".
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../collective_calls.hpp"
#include "gradcomm/gradcomm.h"

using namespace gradcomm::test;

namespace {

int g_rank = 0;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s (%s)\n", g_rank, what.c_str(), gcommGetLastError());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

size_t esize(gcommDataType_t d) {
  return d == gcommFloat32 ? 4 : 2;
}

// Valid values of the dtype in [-8, 8) (no Inf/NaN: max/min compare them alike anyway).
std::vector<unsigned char> inputs(gcommDataType_t d, size_t count, int rank, int salt) {
  std::mt19937 rng(static_cast<uint32_t>(rank * 1000003 + salt * 7919 + static_cast<int>(count)));
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::vector<float> f(count);
  for (float& v : f) v = u(rng);
  std::vector<unsigned char> out(count * esize(d) + 1);
  if (gcommCast(f.data(), gcommFloat32, out.data(), d, count, gcommHostDevice(), nullptr) != gcommSuccess)
    die("gcommCast");
  return out;
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

  // The reference: the same calls on n local ranks (threads) of this process.
  std::vector<gcommComm_t> local(n);
  if (gcommCommInitLocal(n, gcommHostDevice(), nullptr, local.data()) != gcommSuccess)
    die("gcommCommInitLocal");

  int salt = 0, checked = 0;
  for (int which = 0; which <= 6; ++which)  // the six collectives, then the send/receive ring
    for (gcommDataType_t d : {gcommFloat32, gcommFloat16, gcommBfloat16})
      for (gcommRedOp_t redop : {gcommSum, gcommAvg, gcommMax})
        for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, size_t{2500000}}) {
          const bool send_recv = which == 6;
          const Op op = kCollectives[send_recv ? 0 : which];
          if ((send_recv || !reduces(op)) && redop != gcommSum) continue;
          if (count == 2500000 && (d != gcommFloat32 || redop != gcommSum)) continue;  // one big case per op
          ++salt;
          const size_t se = send_recv ? count : send_elems(op, count, n);
          const size_t re = send_recv ? count : recv_elems(op, count, n);
          std::vector<std::vector<unsigned char>> in(n),
              want(n, std::vector<unsigned char>(re * esize(d) + 1, 0x5A));
          for (int q = 0; q < n; ++q) in[q] = inputs(d, se, q, salt);
          std::vector<std::thread> threads;
          std::vector<gcommStatus_t> st(n);
          for (int q = 0; q < n; ++q)
            threads.emplace_back([&, q] {
              st[q] = call(send_recv, op, local[q], q, n, in[q].data(), want[q].data(), count, d, redop);
            });
          for (auto& t : threads) t.join();
          for (int q = 0; q < n; ++q)
            if (st[q] != gcommSuccess) die("the local reference failed");
          std::vector<unsigned char> got(re * esize(d) + 1, 0x5A);
          if (call(send_recv, op, comm, me, n, in[me].data(), got.data(), count, d, redop) != gcommSuccess)
            die("an MPI transport call failed, case " + std::to_string(salt));
          if (std::memcmp(got.data(), want[me].data(), got.size()) != 0)
            die("bits differ from the local transport's, case " + std::to_string(salt));
          ++checked;
        }
  if (gcommBarrier(comm, nullptr) != gcommSuccess) die("gcommBarrier");
  for (gcommComm_t c : local) gcommCommDestroy(c);

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
