// The group's end (comm/group.cpp) with transports that can be made to fail: a
// failed launch fails and aborts every communicator with a call in the group
// and is reported once; a good one leaves nothing counted; nested groups launch
// only at the outermost end. (On a GPU, tests/comm/gpu_test.cpp runs real NCCL
// groups.)
#include <gtest/gtest.h>

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/group.hpp"

namespace gradcomm::comm {
namespace {

// A one-rank host transport that counts its calls and can fail the group's launch.
class FakeTransport final : public Transport {
 public:
  explicit FakeTransport(bool fail_launch, int* aborted, bool out_of_memory = false)
      : fail_launch_(fail_launch), out_of_memory_(out_of_memory), aborted_(aborted) {}
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  gcommDevice_t device() const noexcept override { return gcommHostDevice(); }
  gcommTransport_t kind() const noexcept override { return gcommTransportLocal; }
  void run(const CollectiveArgs&) override { ++runs; }
  void wait_group_launched(std::chrono::steady_clock::time_point) override {
    ++waits;
    if (out_of_memory_) throw std::bad_alloc();
    if (fail_launch_) fail(gcommNcclError, "launch failed (injected)");
  }
  gcommStatus_t poll_async_error(std::string&) noexcept override { return gcommSuccess; }
  void abort() noexcept override { ++*aborted_; }
  int runs = 0;
  int waits = 0;

 private:
  bool fail_launch_;
  bool out_of_memory_;
  int* aborted_;
};

struct Rig {
  int aborted[2] = {0, 0};
  FakeTransport* t[2];
  std::unique_ptr<Communicator> c[2];
  std::vector<float> buf = std::vector<float>(16, 1.0f);
  explicit Rig(bool second_fails, bool second_out_of_memory = false) {
    for (int i = 0; i < 2; ++i) {
      auto transport = std::make_unique<FakeTransport>(i == 1 && second_fails, &aborted[i],
                                                       i == 1 && second_out_of_memory);
      t[i] = transport.get();
      c[i] = std::make_unique<Communicator>(std::move(transport), 5.0);
    }
  }
  CollectiveArgs call() {
    CollectiveArgs a;
    a.send = buf.data();
    a.recv = buf.data();
    a.count = buf.size();
    return a;
  }
};

TEST(GroupLaunch, AFailedLaunchFailsAndAbortsEveryCommunicatorInTheGroup) {
  Rig rig(/*second_fails=*/true);
  group_start();
  rig.c[0]->collective(rig.call());
  rig.c[1]->collective(rig.call());
  rig.c[1]->collective(rig.call());
  EXPECT_EQ(rig.c[0]->grouped_calls(), 1);
  EXPECT_EQ(rig.c[1]->grouped_calls(), 2);
  try {
    group_end();
    FAIL() << "the group's end did not report the failed launch";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommNcclError);
    EXPECT_NE(e.message().find("the group of 3 collective(s) failed: launch failed (injected)"),
              std::string::npos)
        << e.message();
  }
  EXPECT_FALSE(in_group());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rig.c[i]->grouped_calls(), 0) << i;
    EXPECT_GE(rig.aborted[i], 1) << i;
    std::string message;
    EXPECT_EQ(rig.c[i]->health(message), gcommNcclError) << i;
    EXPECT_NE(message.find("(in a group): launch failed (injected)"), std::string::npos) << message;
    EXPECT_THROW(rig.c[i]->collective(rig.call()), Error) << i;  // failed for good
  }
}

// Not only gradcomm's own errors: running out of host memory in the launch fails
// the group the same way. Before 2026-11-28 a std::bad_alloc left the group's end
// half-way: the calls stayed counted, and every later synchronize said "call
// gcommGroupEnd first" with no group open.
TEST(GroupLaunch, RunningOutOfMemoryInTheLaunchFailsTheGroupLikeAnyFailure) {
  Rig rig(/*second_fails=*/false, /*second_out_of_memory=*/true);
  group_start();
  rig.c[0]->collective(rig.call());
  rig.c[1]->collective(rig.call());
  try {
    group_end();
    FAIL() << "the group's end did not report the failed launch";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommOutOfMemory) << e.message();
    EXPECT_NE(e.message().find("out of host memory"), std::string::npos) << e.message();
  }
  EXPECT_FALSE(in_group());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rig.c[i]->grouped_calls(), 0) << i;
    std::string message;
    EXPECT_EQ(rig.c[i]->health(message), gcommOutOfMemory) << i << ": " << message;
  }
}

TEST(GroupLaunch, AGoodLaunchLeavesNothingCountedAndNoOneAborted) {
  Rig rig(/*second_fails=*/false);
  group_start();
  rig.c[0]->collective(rig.call());
  rig.c[1]->collective(rig.call());
  group_end();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rig.c[i]->grouped_calls(), 0) << i;
    EXPECT_EQ(rig.t[i]->waits, 1) << i;  // once per communicator
    EXPECT_EQ(rig.aborted[i], 0) << i;
    std::string message;
    EXPECT_EQ(rig.c[i]->health(message), gcommSuccess) << message;
  }
  rig.c[0]->synchronize();
}

TEST(GroupLaunch, NestedGroupsLaunchAtTheOutermostEnd) {
  Rig rig(/*second_fails=*/false);
  group_start();
  group_start();
  rig.c[0]->collective(rig.call());
  group_end();
  EXPECT_TRUE(in_group());
  EXPECT_EQ(rig.c[0]->grouped_calls(), 1);
  EXPECT_EQ(rig.t[0]->waits, 0);
  EXPECT_THROW(rig.c[0]->synchronize(), Error);
  group_end();
  EXPECT_FALSE(in_group());
  EXPECT_EQ(rig.c[0]->grouped_calls(), 0);
  EXPECT_EQ(rig.t[0]->waits, 1);
  EXPECT_EQ(rig.t[0]->runs, 1);
}

}  // namespace
}  // namespace gradcomm::comm
