// Socket-transport jobs inside one test process: each rank is a thread that
// calls gcommCommInit with a host device, so the ranks meet through the TCP
// store and talk over real loopback connections, exactly as separate processes
// would (the multi-process tests in tests/comm/bootstrap/ cover those). The shm
// transport's jobs are made the same way (each rank maps the segment itself).
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "../local/ranks.hpp"
#include "support/free_port.hpp"

namespace gradcomm::test {

inline gcommCommConfig_t socket_config(int rank, int n, int port, double timeout_s, const char* job_key) {
  gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
  c.rank = rank;
  c.world_size = n;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.job_key = job_key;
  c.device = gcommHostDevice();
  c.timeout_s = timeout_s;
  c.transport = gcommTransportSocket;  // auto would choose shm: these ranks share a host
  return c;
}

// n socket-transport communicators, one per rank, made concurrently (with
// `transport`, another store-met host transport: gcommTransportShm; auto would
// choose shm for these ranks, which share a host).
inline std::vector<gcommComm_t> make_socket(int n, double timeout_s = 30.0,
                                            const char* job_key = "socket-test",
                                            gcommTransport_t transport = gcommTransportSocket) {
  std::vector<gcommComm_t> comms(n, nullptr);
  const int port = free_tcp_port();
  auto errors = run_ranks(comms, [&](int r, gcommComm_t) -> std::string {
    gcommCommConfig_t c = socket_config(r, n, port, timeout_s, job_key);
    c.transport = transport;
    return gcommCommInit(&c, &comms[r]) == gcommSuccess ? "" : gcommGetLastError();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return comms;
}

// Destroy meets the other ranks at the shutdown barrier: all ranks at once.
inline void destroy_together(std::vector<gcommComm_t>& comms) {
  auto errors = run_ranks(comms, [](int, gcommComm_t c) -> std::string {
    return c == nullptr || gcommCommDestroy(c) == gcommSuccess ? "" : gcommGetLastError();
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  comms.clear();
}

}  // namespace gradcomm::test
