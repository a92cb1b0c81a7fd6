// What only the socket transport's collectives do: count the bytes they send.
// Every collective, dtype, op and size against the reference (Inf and NaN, one
// message past the 8 MiB piece) is the conformance suite's
// (tests/comm/conformance_test.cpp), for every host transport.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../collective_calls.hpp"
#include "socket_ranks.hpp"

namespace gradcomm::test {
namespace {

// gcommCommBytesSent counts each rank's payload: an all-reduce sends twice what a
// reduce-scatter or an all-gather of the same buffer sends (each rank's slice to
// its owner, then the reduced slice to every peer). The local transport does not count.
TEST(SocketBytesSent, EachCollectiveSendsItsAlgorithmsPayload) {
  const int n = 3;
  const size_t count = 3000;  // 1000 elements a slice
  auto comms = make_socket(n, 30.0, "bytes-sent");
  auto errors = run_ranks(comms, [&](int, gcommComm_t c) -> std::string {
    std::vector<float> a(count, 1.0f), b(count, 0.0f);
    uint64_t before = 0, after = 0;
    const uint64_t slice = count / n * sizeof(float);
    struct Case {
      Op op;
      uint64_t expect;
    } cases[] = {{Op::kAllReduce, 2 * (n - 1) * slice},
                 {Op::kReduceScatter, (n - 1) * slice},
                 {Op::kAllGather, (n - 1) * slice},
                 {Op::kAllToAll, (n - 1) * slice}};
    for (const Case& k : cases) {
      if (gcommCommBytesSent(c, &before) != gcommSuccess) return gcommGetLastError();
      const size_t elems = k.op == Op::kAllReduce ? count : count / n;
      if (issue(k.op, c, a.data(), b.data(), elems, gcommFloat32, gcommSum, 0) != gcommSuccess)
        return gcommGetLastError();
      if (gcommCommBytesSent(c, &after) != gcommSuccess) return gcommGetLastError();
      if (after - before != k.expect)
        return std::string(op_name(k.op)) + " sent " + std::to_string(after - before) + " bytes, not " +
               std::to_string(k.expect);
    }
    return "";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  destroy_together(comms);

  std::vector<gcommComm_t> local(2, nullptr);
  ASSERT_EQ(gcommCommInitLocal(2, gcommHostDevice(), nullptr, local.data()), gcommSuccess);
  uint64_t bytes = 0;
  EXPECT_EQ(gcommCommBytesSent(local[0], &bytes), gcommNotSupported);
  EXPECT_NE(std::string(gcommGetLastError()).find("local transport does not count"), std::string::npos)
      << gcommGetLastError();
  EXPECT_EQ(gcommCommBytesSent(local[0], nullptr), gcommInvalidArgument);
  for (gcommComm_t c : local) EXPECT_EQ(gcommCommDestroy(c), gcommSuccess);
}

}  // namespace
}  // namespace gradcomm::test
