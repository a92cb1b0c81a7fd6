// The flight recorder's ring on its own (comm/flight_recorder.hpp); the records of
// real ranks are tested in local/flight_record_test.cpp.
#include "comm/flight_recorder.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace gradcomm::comm {
namespace {

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

std::string record(const FlightRecorder& r) {
  return r.to_json(FlightIdentity{}, "test", "");
}

CollectiveArgs all_reduce(uint64_t seq) {
  CollectiveArgs a;
  a.op = Collective::kAllReduce;
  a.count = 1;
  a.dtype = gcommFloat32;
  a.seq = seq;
  return a;
}

// The watchdog completes CUDA calls by slot (no search): the slot's call only, and
// nothing once the ring has given the slot to a newer call.
TEST(FlightRecorder, ASlotIsCompletedOnlyWhileItHoldsItsCall) {
  FlightRecorder recorder(2);
  const auto now = std::chrono::steady_clock::now();
  const size_t first = recorder.enqueued(all_reduce(1), now);
  const size_t second = recorder.enqueued(all_reduce(2), now);
  recorder.completed_at(second, 1, /*p2p=*/false);  // not the slot's call
  recorder.completed_at(second, 2, /*p2p=*/true);   // a send/receive numbered 2: not this collective
  recorder.completed_at(7, 2, /*p2p=*/false);       // no such slot
  EXPECT_TRUE(contains(record(recorder), "\"last_completed_seq\": 0")) << record(recorder);
  recorder.completed_at(second, 2, /*p2p=*/false);
  EXPECT_TRUE(contains(record(recorder), "\"last_completed_seq\": 2")) << record(recorder);
  EXPECT_EQ(recorder.enqueued(all_reduce(3), now), first);  // the ring reuses seq 1's slot
  recorder.completed_at(first, 1, /*p2p=*/false);           // seq 1 left the ring: nothing changes
  EXPECT_TRUE(contains(record(recorder), "\"last_enqueued_seq\": 3")) << record(recorder);
  EXPECT_TRUE(contains(record(recorder), "\"last_completed_seq\": 2")) << "seq 3 is still enqueued";
  recorder.completed_at(first, 3, /*p2p=*/false);
  EXPECT_TRUE(contains(record(recorder), "\"last_completed_seq\": 3")) << record(recorder);
}

TEST(FlightRecorder, AnEmptyRingRecordsNothingAndTakesAnySlot) {
  FlightRecorder off(0);
  EXPECT_FALSE(off.enabled());
  const size_t slot = off.enqueued(all_reduce(1), std::chrono::steady_clock::now());
  off.completed_at(slot, 1, false);
  off.completed_at(5, 1, false);
  EXPECT_TRUE(contains(record(off), "\"recorded\": 0")) << record(off);
}

}  // namespace
}  // namespace gradcomm::comm
