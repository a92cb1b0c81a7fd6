// Local-transport collectives through the C API: what only the local transport's
// tests say. Every collective, dtype, op and size against the reference is the
// conformance suite's (tests/comm/conformance_test.cpp), for every host transport.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ranks.hpp"

namespace gradcomm::test {
namespace {

class Collectives : public ::testing::TestWithParam<int> {};

// There is no in-place all-to-all: overlapping buffers are refused on every rank
// before any rank moves data, and the communicator stays usable.
TEST_P(Collectives, AllToAllRefusesOverlappingBuffers) {
  int n = GetParam();
  auto comms = make_local(n);
  const size_t count = 5;
  std::vector<std::vector<float>> buf(n, std::vector<float>(2 * count * n, 1.0f));
  for (size_t shift : {size_t{0}, count * n - 1}) {
    auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
      gcommStatus_t s = gcommAllToAll(c, buf[r].data(), buf[r].data() + shift, count, gcommFloat32, nullptr);
      if (s != gcommInvalidArgument) return std::string("status ") + gcommGetStatusString(s);
      if (std::string(gcommGetLastError()).find("overlap") == std::string::npos) return gcommGetLastError();
      return "";
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r << " shift " << shift;
  }
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    if (gcommAllToAll(c, buf[r].data(), buf[r].data() + count * n, count, gcommFloat32, nullptr) !=
        gcommSuccess)
      return gcommGetLastError();
    return "";
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "adjacent buffers are fine: rank " << r;
  destroy(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "ranks";
                         });

}  // namespace
}  // namespace gradcomm::test
