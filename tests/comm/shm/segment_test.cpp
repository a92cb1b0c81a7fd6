// The shm transport's segment alone (comm/shm/shm_segment.hpp): only a process
// of the same job and world size can attach, and the name leaves /dev/shm when
// rank 0 removes it or goes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "comm/shm/shm_segment.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::shm {
namespace {

std::string unique_name(const char* what) {
  return std::string("/gradcomm-test-") + what + "-" + std::to_string(::getpid());
}

gcommStatus_t open_status(const std::string& name, uint64_t job, int world, std::string& message) {
  try {
    Segment s = Segment::open(name, job, world);
    return gcommSuccess;
  } catch (const Error& e) {
    message = e.message();
    return e.status();
  }
}

TEST(ShmSegment, OnlyTheSameJobAndWorldSizeAttach) {
  const std::string name = unique_name("attach");
  Segment owner = Segment::create(name, 42, 3);
  std::string message;
  EXPECT_EQ(open_status(name, 43, 3, message), gcommInvalidArgument);
  EXPECT_NE(message.find("belongs to another job"), std::string::npos) << message;
  EXPECT_EQ(open_status(name, 42, 2, message), gcommInvalidArgument);
  EXPECT_NE(message.find("different world sizes"), std::string::npos) << message;
  EXPECT_EQ(open_status(name, 42, 3, message), gcommSuccess) << message;
  // Both mappings see the same words.
  Segment peer = Segment::open(name, 42, 3);
  owner.ring(0, 2).head.store(7);
  EXPECT_EQ(peer.ring(0, 2).head.load(), 7u);
  EXPECT_EQ(peer.ring(2, 0).head.load(), 0u);
  owner.unlink();
  EXPECT_EQ(open_status(name, 42, 3, message), gcommNotSupported) << "no name left to open";
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
  EXPECT_EQ(peer.rank_words(1).closed.load(), 0u) << "the mapping outlives the name";
}

TEST(ShmSegment, TheOwnerGoingRemovesTheName) {
  const std::string name = unique_name("owner");
  { Segment owner = Segment::create(name, 1, 2); }
  std::string message;
  EXPECT_EQ(open_status(name, 1, 2, message), gcommNotSupported) << message;
}

TEST(ShmSegment, ASecondCreateUnderTheSameNameIsRefused) {
  const std::string name = unique_name("twice");
  Segment first = Segment::create(name, 1, 2);
  try {
    Segment second = Segment::create(name, 1, 2);
    FAIL() << "created twice";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("shm_open"), std::string::npos) << e.message();
  }
}

TEST(ShmSegment, RingsShrinkWithTheWorldSoTheSegmentStaysBounded) {
  EXPECT_EQ(Segment::ring_bytes_for(2), size_t{4} << 20);
  EXPECT_EQ(Segment::ring_bytes_for(4), size_t{2} << 20);
  EXPECT_EQ(Segment::ring_bytes_for(8), size_t{512} << 10);
  EXPECT_EQ(Segment::ring_bytes_for(1024), size_t{16} << 10);
  for (int world : {2, 3, 5, 8, 16, 45})
    EXPECT_LE(Segment::ring_bytes_for(world) * world * (world - 1), size_t{32} << 20) << world;
}

}  // namespace
}  // namespace gradcomm::comm::shm
