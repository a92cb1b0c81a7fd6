// gcommTransportAuto for host ranks (comm/transports.cpp): ranks that share a
// host get the shm transport, GRADCOMM_TRANSPORT=socket keeps them on TCP, and
// either way the collectives give the same bits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../socket/socket_ranks.hpp"

namespace gradcomm::test {
namespace {

// Through gcommCommInitFromEnv, as a launched rank would (every field given but
// the transport, which the environment may name).
std::vector<gcommComm_t> make_auto(int n) {
  std::vector<gcommComm_t> comms(n, nullptr);
  const int port = free_tcp_port();
  auto errors = run_ranks(comms, [&](int r, gcommComm_t) -> std::string {
    gcommCommConfig_t c = socket_config(r, n, port, 30.0, "choice");
    c.transport = gcommTransportAuto;
    return gcommCommInitFromEnv(&c, &comms[r]) == gcommSuccess ? "" : gcommGetLastError();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return comms;
}

// Every rank's kind, and the sum of rank-dependent values each got.
std::vector<gcommTransport_t> kinds_after_a_sum(std::vector<gcommComm_t>& comms, std::vector<float>& sums) {
  std::vector<gcommTransport_t> kinds(comms.size());
  sums.assign(comms.size(), 0.0f);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    if (gcommCommTransport(c, &kinds[r]) != gcommSuccess) return gcommGetLastError();
    float x = 0.25f * static_cast<float>(r + 1);
    if (gcommAllReduce(c, &x, &x, 1, gcommFloat32, gcommSum, nullptr) != gcommSuccess)
      return gcommGetLastError();
    sums[r] = x;
    return "";
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return kinds;
}

TEST(HostTransportChoice, RanksOnOneHostGetSharedMemory) {
  auto comms = make_auto(3);
  std::vector<float> sums;
  for (gcommTransport_t k : kinds_after_a_sum(comms, sums)) EXPECT_EQ(k, gcommTransportShm);
  for (float s : sums) EXPECT_EQ(s, 1.5f);
  destroy_together(comms);
}

TEST(HostTransportChoice, TheVariableKeepsThemOnTcp) {
  setenv("GRADCOMM_TRANSPORT", "socket", 1);
  auto comms = make_auto(2);
  unsetenv("GRADCOMM_TRANSPORT");
  std::vector<float> sums;
  for (gcommTransport_t k : kinds_after_a_sum(comms, sums)) EXPECT_EQ(k, gcommTransportSocket);
  for (float s : sums) EXPECT_EQ(s, 0.75f);
  destroy_together(comms);
}

}  // namespace
}  // namespace gradcomm::test
