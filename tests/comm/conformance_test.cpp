// The transport conformance suite: one test body, run against every host transport
// (one instantiation each: local, socket, shm; as RMM runs one suite over every memory
// resource; the MPI transport runs the same cases, conformance_cases.hpp, in its
// processes under mpirun: mpi/mpi_transport_main.cpp). Every collective, dtype and reduction op, sizes 0, 1,
// 7, 4099 and one past the socket transport's 8 MiB piece (the local transport's at 1 and 2 ranks), in place
// and out of place, 1 to 8 ranks, against a reference written from the host transports' contract
// (kernels/reduce/reduce_math.hpp: ranks combined in rank order in float, rounded
// once; NaN propagates through max and min): the same bits on every rank, Inf and
// NaN included, and nothing written past an output. A new host transport adds one
// instantiation at the end. (NCCL reduces in its own order, so a GPU instantiation
// would compare within a tolerance; tests/comm/gpu_test.cpp covers NCCL.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../kernels/reference.hpp"
#include "common/dtype.hpp"
#include "conformance_cases.hpp"
#include "socket/socket_ranks.hpp"

namespace gradcomm::test {
namespace {

struct TransportUnderTest {
  const char* name;
  std::vector<gcommComm_t> (*make)(int n);
  void (*destroy)(std::vector<gcommComm_t>& comms);
};

const TransportUnderTest kLocal{"local", [](int n) { return make_local(n); },
                                [](std::vector<gcommComm_t>& c) { destroy(c); }};
const TransportUnderTest kSocket{"socket", [](int n) { return make_socket(n, 30.0, "conformance"); },
                                 [](std::vector<gcommComm_t>& c) { destroy_together(c); }};
const TransportUnderTest kShm{"shm",
                              [](int n) { return make_socket(n, 30.0, "conformance", gcommTransportShm); },
                              [](std::vector<gcommComm_t>& c) { destroy_together(c); }};

struct Case {
  const TransportUnderTest* transport;
  int ranks;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.transport->name << ", " << c.ranks << (c.ranks == 1 ? " rank" : " ranks");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.transport->name) + "_" + std::to_string(info.param.ranks) + "ranks";
}

class Conformance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { comms_ = GetParam().transport->make(GetParam().ranks); }
  void TearDown() override { GetParam().transport->destroy(comms_); }

  // Case k on every rank (conformance_cases.hpp: each rank checks itself); "" or
  // what went wrong.
  std::string check(const ConformanceCase& k) {
    const int n = static_cast<int>(comms_.size());
    auto errors = run_ranks(comms_, [&](int r, gcommComm_t c) { return check_on_rank(c, r, n, k); });
    for (int r = 0; r < n; ++r)
      if (!errors[r].empty()) return "rank " + std::to_string(r) + ": " + errors[r];
    return "";
  }

  std::vector<gcommComm_t> comms_;
};

TEST_P(Conformance, EveryCollectiveDtypeOpAndSizeMatchesTheReference) {
  for (const ConformanceCase& k : every_collective_case()) ASSERT_EQ(check(k), "");
}

TEST_P(Conformance, InfAndNanFollowTheContract) {
  for (const ConformanceCase& k : inf_and_nan_cases()) ASSERT_EQ(check(k), "");
}

// One message past the socket transport's 8 MiB piece size: every collective in pieces.
// The local transport has no pieces: 1 and 2 ranks check its large messages; more
// cost CI minutes under the sanitizers (3-4 of them at 3, 4 and 8 ranks).
TEST_P(Conformance, MessagesLargerThanOneSocketPiece) {
  const int n = GetParam().ranks;
  if (GetParam().transport == &kLocal && n > 2)
    GTEST_SKIP() << "the local transport cuts no message into pieces; 1 and 2 ranks check its large messages";
  for (const ConformanceCase& k : larger_than_a_piece_cases(n)) ASSERT_EQ(check(k), "");
}

// An all-reduce of several pieces, which the socket and shm transports pipeline
// (two pieces ahead): piece 3's slices wait until piece 0 is reduced (they reuse
// its staging), and each reduced slice goes out only once it is complete. Four of
// shm's 8 MiB pieces; hundreds of the socket's (32 KiB to each peer). In place (a
// peer's gathered slice lands where this rank's slices to the others were), an
// odd tail, a 2-byte type, against the reference's bits. One case, on 2 and 3
// ranks: under the sanitizers in CI its 25 MB take minutes.
TEST_P(Conformance, AllReduceOfSeveralPiecesMatchesTheReference) {
  if (GetParam().transport == &kLocal || GetParam().ranks == 1)
    GTEST_SKIP() << "only the socket and shm transports cut a message into pieces, and only with peers";
  if (GetParam().ranks > 3) GTEST_SKIP() << "2 and 3 ranks cover the schedule; more only cost CI time";
  const size_t piece = (size_t{8} << 20) / dtype_size(gcommBfloat16);
  ASSERT_EQ(
      check(ConformanceCase{Op::kAllReduce, gcommBfloat16, gcommAvg, 3 * piece + 4099, true, false, 500}),
      "");
}

INSTANTIATE_TEST_SUITE_P(Local, Conformance,
                         ::testing::Values(Case{&kLocal, 1}, Case{&kLocal, 2}, Case{&kLocal, 3},
                                           Case{&kLocal, 4}, Case{&kLocal, 8}),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Socket, Conformance,
                         ::testing::Values(Case{&kSocket, 1}, Case{&kSocket, 2}, Case{&kSocket, 3},
                                           Case{&kSocket, 5}),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Shm, Conformance,
                         ::testing::Values(Case{&kShm, 1}, Case{&kShm, 2}, Case{&kShm, 3}, Case{&kShm, 5}),
                         case_name);

}  // namespace
}  // namespace gradcomm::test
