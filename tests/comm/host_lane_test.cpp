// A host communicator's lane (comm/host_lane.hpp): queued work runs in order on
// its own thread, an error is its submitter's and skips that submitter's later
// work only, and work that waits for its own lane does not deadlock.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/host_lane.hpp"

namespace gradcomm::comm {
namespace {

TEST(HostLane, RunsQueuedWorkInOrderOffTheCallersThread) {
  HostLane lane(0);
  HostLane::Errors errors;
  std::vector<int> seen;
  std::thread::id worker;
  for (int i = 0; i < 100; ++i)
    lane.push(
        [&seen, &worker, i] {
          seen.push_back(i);
          worker = std::this_thread::get_id();
        },
        errors);
  lane.drain(errors);
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(HostLane, AnErrorSkipsItsSubmittersLaterWorkOnlyAndIsThrownAtEveryLaterWait) {
  HostLane lane(0);
  HostLane::Errors mine, theirs;
  std::atomic<int> ran{0}, theirs_ran{0};
  std::atomic<bool> go{false};
  lane.push(
      [&] {  // holds the lane until everything is queued
        while (!go.load()) std::this_thread::yield();
        ++ran;
      },
      mine);
  lane.push([] { throw std::runtime_error("bucket 1 failed"); }, mine);
  lane.push([&] { ++ran; }, mine);
  lane.push([&] { ++theirs_ran; }, theirs);  // another reducer's work on the lane
  go = true;
  lane.wait_idle();  // the reader's wait does not throw
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(theirs_ran.load(), 1);
  for (int i = 0; i < 2; ++i) {
    try {
      lane.drain(mine);
      ADD_FAILURE() << "drain did not throw the queued work's error";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "bucket 1 failed");
    }
  }
  EXPECT_THROW(lane.push([&] { ++ran; }, mine), std::runtime_error);
  EXPECT_NO_THROW(lane.drain(theirs));
  lane.push([&] { ++theirs_ran; }, theirs);
  lane.drain(theirs);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(theirs_ran.load(), 2);
}

TEST(HostLane, WorkThatDrainsItsOwnLaneDoesNotDeadlock) {
  HostLane lane(0);
  HostLane::Errors errors;
  std::atomic<bool> done{false};
  lane.push(
      [&] {
        lane.drain(errors);  // as a strategy's synchronize() on the side stream would
        done = true;
      },
      errors);
  lane.drain(errors);
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace gradcomm::comm
