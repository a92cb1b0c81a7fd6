// GPU paths of the communicators (run on a GPU machine; skip here with the
// reason): NCCL of size 1 through gcommCommInitAll, group calls (one GPU, and one
// thread driving every GPU where there are several), wrapping a caller's
// ncclComm_t (never destroyed by gradcomm), abort then destroy, and the local
// transport with several ranks on one GPU against the host reference (with
// send/receive: a ring in a group and pairs outside one).
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <thread>
#include <vector>

#include "gradcomm/gradcomm.h"
#include "support/gpu.hpp"

namespace {

std::vector<float> ramp(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 13);
  return v;
}

struct DeviceVec {
  float* p = nullptr;
  size_t n;
  explicit DeviceVec(const std::vector<float>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceVec() { cudaFree(p); }
  std::vector<float> get() const {
    std::vector<float> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

TEST(CommGpu, NcclCommunicatorOfSizeOneRunsEveryCollective) {
  GCOMM_SKIP_WITHOUT_GPU();
  gcommComm_t c = nullptr;
  ASSERT_EQ(gcommCommInitAll(1, nullptr, &c), gcommSuccess) << gcommGetLastError();
  gcommTransport_t kind;
  ASSERT_EQ(gcommCommTransport(c, &kind), gcommSuccess);
  EXPECT_EQ(kind, gcommTransportNccl);
  auto h = ramp(4099, 1.0f);
  DeviceVec send(h), recv(ramp(4099, 100.0f));
  ASSERT_EQ(gcommAllReduce(c, send.p, recv.p, h.size(), gcommFloat32, gcommSum, nullptr), gcommSuccess)
      << gcommGetLastError();
  ASSERT_EQ(gcommBroadcast(c, send.p, send.p, h.size(), gcommFloat32, 0, nullptr), gcommSuccess);
  ASSERT_EQ(gcommAllGather(c, send.p, recv.p, h.size(), gcommFloat32, nullptr), gcommSuccess);
  ASSERT_EQ(gcommReduceScatter(c, send.p, recv.p, h.size(), gcommFloat32, gcommAvg, nullptr), gcommSuccess);
  ASSERT_EQ(gcommBarrier(c, nullptr), gcommSuccess);
  ASSERT_EQ(gcommCommSynchronize(c), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(recv.get(), h);
  // All-to-all with one rank is a copy of its one block (ncclAlltoAll or grouped send/recv).
  DeviceVec other(ramp(4099, 7.0f));
  ASSERT_EQ(gcommAllToAll(c, other.p, recv.p, h.size(), gcommFloat32, nullptr), gcommSuccess)
      << gcommGetLastError();
  ASSERT_EQ(gcommCommSynchronize(c), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(recv.get(), ramp(4099, 7.0f));
  EXPECT_EQ(gcommAllToAll(c, recv.p, recv.p, h.size(), gcommFloat32, nullptr), gcommInvalidArgument);
  // A send to itself with its receive in one group (ncclSend/ncclRecv); alone, refused.
  DeviceVec mine(ramp(4099, 3.0f));
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  ASSERT_EQ(gcommSend(c, mine.p, h.size(), gcommFloat32, 0, nullptr), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommRecv(c, recv.p, h.size(), gcommFloat32, 0, nullptr), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommGroupEnd(), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommCommSynchronize(c), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(recv.get(), ramp(4099, 3.0f));
  EXPECT_EQ(gcommSend(c, mine.p, h.size(), gcommFloat32, 0, nullptr), gcommInvalidArgument);
  // Host memory is refused before NCCL sees it.
  EXPECT_EQ(gcommAllReduce(c, h.data(), h.data(), h.size(), gcommFloat32, gcommSum, nullptr),
            gcommInvalidArgument);
  EXPECT_EQ(gcommCommDestroy(c), gcommSuccess);
}

// Inside a group NCCL launches at gcommGroupEnd; the communicator watches the
// calls from then on (Synchronize waits for them).
TEST(CommGpu, GroupedCollectivesLaunchAtTheGroupsEnd) {
  GCOMM_SKIP_WITHOUT_GPU();
  gcommComm_t c = nullptr;
  ASSERT_EQ(gcommCommInitAll(1, nullptr, &c), gcommSuccess) << gcommGetLastError();
  auto h1 = ramp(4099, 1.0f), h2 = ramp(33, 7.0f);
  DeviceVec a(h1), b(h2), out(ramp(4099, 0.0f));
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  ASSERT_EQ(gcommAllReduce(c, a.p, out.p, h1.size(), gcommFloat32, gcommSum, nullptr), gcommSuccess)
      << gcommGetLastError();
  ASSERT_EQ(gcommAllReduce(c, b.p, b.p, h2.size(), gcommFloat32, gcommMax, nullptr), gcommSuccess);
  EXPECT_EQ(gcommCommDestroy(c), gcommInvalidState);  // calls in an open group
  ASSERT_EQ(gcommGroupEnd(), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommCommSynchronize(c), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(out.get(), h1);
  EXPECT_EQ(b.get(), h2);
  EXPECT_EQ(gcommCommDestroy(c), gcommSuccess) << gcommGetLastError();
}

// The reason groups exist: one thread drives every GPU's communicator.
TEST(CommGpu, OneThreadDrivesEveryGpuInsideAGroup) {
  GCOMM_SKIP_WITHOUT_GPU();
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  if (n < 2) GTEST_SKIP() << "needs two or more GPUs (" << n << " visible)";
  std::vector<gcommComm_t> comms(n, nullptr);
  ASSERT_EQ(gcommCommInitAll(n, nullptr, comms.data()), gcommSuccess) << gcommGetLastError();
  std::vector<std::unique_ptr<DeviceVec>> bufs;
  for (int d = 0; d < n; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    bufs.push_back(std::make_unique<DeviceVec>(ramp(100003, static_cast<float>(d))));
  }
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  for (int d = 0; d < n; ++d)
    ASSERT_EQ(gcommAllReduce(comms[d], bufs[d]->p, bufs[d]->p, bufs[d]->n, gcommFloat32, gcommSum, nullptr),
              gcommSuccess)
        << gcommGetLastError();
  ASSERT_EQ(gcommGroupEnd(), gcommSuccess) << gcommGetLastError();
  for (int d = 0; d < n; ++d) ASSERT_EQ(gcommCommSynchronize(comms[d]), gcommSuccess) << gcommGetLastError();
  // sum over d of (d + i % 13) = n(n-1)/2 + n (i % 13)
  for (int d = 0; d < n; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    std::vector<float> got = bufs[d]->get();
    for (size_t i = 0; i < got.size(); i += 997)
      ASSERT_EQ(got[i], static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 13))) << "GPU " << d;
  }
  for (int d = 0; d < n; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    bufs[d].reset();
  }
  for (gcommComm_t c : comms) EXPECT_EQ(gcommCommDestroy(c), gcommSuccess);
}

TEST(CommGpu, WrappedNcclCommIsNeverDestroyedByGradcomm) {
  GCOMM_SKIP_WITHOUT_GPU();
  ncclComm_t nc = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&nc, 1, &dev), ncclSuccess);
  gcommComm_t c = nullptr;
  ASSERT_EQ(gcommCommWrapNccl(nc, gcommCudaDevice(0), 30.0, &c), gcommSuccess) << gcommGetLastError();
  DeviceVec buf(ramp(100, 2.0f));
  ASSERT_EQ(gcommAllReduce(c, buf.p, buf.p, 100, gcommFloat32, gcommMax, nullptr), gcommSuccess);
  ASSERT_EQ(gcommCommSynchronize(c), gcommSuccess);
  ASSERT_EQ(gcommCommDestroy(c), gcommSuccess);
  int count = 0;
  EXPECT_EQ(ncclCommCount(nc, &count), ncclSuccess) << "still alive after gcommCommDestroy";
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ncclCommDestroy(nc), ncclSuccess);
}

TEST(CommGpu, AbortThenDestroy) {
  GCOMM_SKIP_WITHOUT_GPU();
  gcommComm_t c = nullptr;
  ASSERT_EQ(gcommCommInitAll(1, nullptr, &c), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommCommAbort(c), gcommSuccess);
  DeviceVec buf(ramp(8, 1.0f));
  EXPECT_EQ(gcommAllReduce(c, buf.p, buf.p, 8, gcommFloat32, gcommSum, nullptr), gcommAborted);
  gcommStatus_t health = gcommSuccess;
  EXPECT_EQ(gcommCommGetAsyncError(c, &health), gcommSuccess);
  EXPECT_EQ(health, gcommAborted);
  EXPECT_EQ(gcommCommDestroy(c), gcommSuccess);
}

TEST(CommGpu, LocalRanksOnOneGpuMatchTheHostReference) {
  GCOMM_SKIP_WITHOUT_GPU();
  const int n = 4;
  const size_t count = 65539;
  std::vector<gcommComm_t> comms(n);
  ASSERT_EQ(gcommCommInitLocal(n, gcommCudaDevice(0), nullptr, comms.data()), gcommSuccess)
      << gcommGetLastError();
  std::vector<std::unique_ptr<DeviceVec>> bufs;
  for (int r = 0; r < n; ++r) bufs.push_back(std::make_unique<DeviceVec>(ramp(count, static_cast<float>(r))));
  // All-to-all: rank r's input block q holds 1000*r + q + i%13; its output block q must be rank q's block r.
  const size_t block = 1023;
  std::vector<std::unique_ptr<DeviceVec>> a2a_in, a2a_out;
  for (int r = 0; r < n; ++r) {
    std::vector<float> in(block * n);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < block; ++i) in[q * block + i] = 1000.0f * r + q + static_cast<float>(i % 13);
    a2a_in.push_back(std::make_unique<DeviceVec>(in));
    a2a_out.push_back(std::make_unique<DeviceVec>(ramp(block * n, -1.0f)));
  }
  // Send/receive: a ring in a group, then rank r sends its ring result on to r ^ 1 outside a group.
  std::vector<std::unique_ptr<DeviceVec>> ring_out, pair_out;
  for (int r = 0; r < n; ++r) {
    ring_out.push_back(std::make_unique<DeviceVec>(ramp(block, -2.0f)));
    pair_out.push_back(std::make_unique<DeviceVec>(ramp(block, -3.0f)));
  }
  std::vector<gcommStatus_t> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      cudaStream_t s;
      cudaStreamCreate(&s);
      auto st = reinterpret_cast<gcommStream_t>(s);
      for (int it = 0; it < 3; ++it)
        status[r] = gcommAllReduce(comms[r], bufs[r]->p, bufs[r]->p, count, gcommFloat32, gcommAvg, st);
      if (status[r] == gcommSuccess)
        status[r] = gcommAllToAll(comms[r], a2a_in[r]->p, a2a_out[r]->p, block, gcommFloat32, st);
      if (status[r] == gcommSuccess) {
        gcommGroupStart();
        gcommSend(comms[r], a2a_in[r]->p, block, gcommFloat32, (r + 1) % n, st);
        gcommRecv(comms[r], ring_out[r]->p, block, gcommFloat32, (r + n - 1) % n, st);
        status[r] = gcommGroupEnd();
      }
      if (status[r] == gcommSuccess)
        status[r] = r % 2 == 0 ? gcommSend(comms[r], ring_out[r]->p, block, gcommFloat32, r ^ 1, st)
                               : gcommRecv(comms[r], pair_out[r]->p, block, gcommFloat32, r ^ 1, st);
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_EQ(status[r], gcommSuccess);
  // avg of (r + i%13) over r = 1.5 + i%13, a fixed point of further averaging.
  for (int r = 0; r < n; ++r) {
    auto h = bufs[r]->get();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(h[i], 1.5f + static_cast<float>(i % 13)) << r << " " << i;
    auto got = a2a_out[r]->get();
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < block; ++i)
        ASSERT_EQ(got[q * block + i], 1000.0f * q + r + static_cast<float>(i % 13))
            << "all-to-all " << r << " " << q;
    // The ring brought block 0 of the left rank's all-to-all input; odd ranks then got the even neighbour's.
    const int left = (r + n - 1) % n;
    auto ring = ring_out[r]->get();
    for (size_t i = 0; i < block; ++i)
      ASSERT_EQ(ring[i], 1000.0f * left + static_cast<float>(i % 13)) << "ring " << r;
    if (r % 2 == 1) {
      auto pair = pair_out[r]->get();
      const int sender_left = (r - 1 + n - 1) % n;
      for (size_t i = 0; i < block; ++i)
        ASSERT_EQ(pair[i], 1000.0f * sender_left + static_cast<float>(i % 13)) << "pair " << r;
    }
  }
  for (auto c : comms) EXPECT_EQ(gcommCommDestroy(c), gcommSuccess);
}

}  // namespace
