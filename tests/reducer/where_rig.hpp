// Reducer tests that run on every host transport and on GPU 0: the local transport
// (ranks as threads, host or GPU) and the socket transport (host ranks over loopback
// TCP, as threads of this process). The GPU instantiation skips without a GPU.
#pragma once

#include <string>

#include "comm/socket/socket_ranks.hpp"
#include "reducer/reducer_rig.hpp"

namespace gradcomm::test {

enum class Where { kLocalHost, kSocketHost, kLocalGpu };

inline std::string where_name(const ::testing::TestParamInfo<Where>& info) {
  return info.param == Where::kLocalHost    ? "LocalHost"
         : info.param == Where::kSocketHost ? "SocketHost"
                                            : "LocalGpu";
}
inline void PrintTo(Where w, std::ostream* os) {
  *os << (w == Where::kLocalHost    ? "local ranks, host"
          : w == Where::kSocketHost ? "socket ranks, host"
                                    : "local ranks, gpu");
}

class WhereRig : public ::testing::TestWithParam<Where> {
 public:
  void SetUp() override {
    if (gpu()) {
      GCOMM_SKIP_WITHOUT_GPU();
      ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    }
  }
  bool gpu() const { return GetParam() == Where::kLocalGpu; }

  std::vector<gcommComm_t> make(int n) {
    if (GetParam() == Where::kSocketHost) return make_socket(n, 60.0, "where-rig");
    std::vector<gcommComm_t> comms(n, nullptr);
    gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
    cfg.timeout_s = 60.0;
    EXPECT_EQ(gcommCommInitLocal(n, gpu() ? gcommCudaDevice(0) : gcommHostDevice(), &cfg, comms.data()),
              gcommSuccess)
        << gcommGetLastError();
    return comms;
  }
  // body(rank, comm, stream) on one thread per rank; the communicators are destroyed after.
  void run(int n, const std::function<std::string(int, gcommComm_t, cudaStream_t)>& body) {
    auto comms = make(n);
    auto errors = run_rank_bodies(comms, gpu(), body);
    for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    if (GetParam() == Where::kSocketHost)
      destroy_together(comms);
    else
      destroy(comms);
  }
};

}  // namespace gradcomm::test
