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

// The watchdog completes CUDA calls by slot (no search): the slot's call only,
// and nothing once the ring has given the slot to a newer call.
TEST(FlightRecorder, ASlotIsCompletedOnlyWhileItHoldsItsCall) {
  FlightRecorder recorder(2);
  CollectiveArgs a;
  a.op = Collective::kAllReduce;
  a.count = 1;
  a.dtype = gcommFloat32;
  const auto now = std::chrono::steady_clock::now();
  a.seq = 1;
  const size_t first = recorder.enqueued(a, now);
  a.seq = 2;
  const size_t second = recorder.enqueued(a, now);
  recorder.completed_at(second, 2, /*p2p=*/false);
  recorder.completed_at(second, 1, /*p2p=*/false);  // not the slot's call: ignored
  std::string rec = recorder.to_json(FlightIdentity{}, "test", "");
  EXPECT_TRUE(contains(rec, "\"last_completed_seq\": 2")) << rec;
  a.seq = 3;
  EXPECT_EQ(recorder.enqueued(a, now), first);     // the ring reuses seq 1's slot
  recorder.completed_at(first, 1, /*p2p=*/false);  // seq 1 left the ring: nothing changes
  rec = recorder.to_json(FlightIdentity{}, "test", "");
  EXPECT_TRUE(contains(rec, "\"last_enqueued_seq\": 3")) << rec;
  EXPECT_TRUE(contains(rec, "\"last_completed_seq\": 2")) << "seq 3 is still enqueued: " << rec;
  recorder.completed_at(first, 3, /*p2p=*/false);
  EXPECT_TRUE(contains(recorder.to_json(FlightIdentity{}, "test", ""), "\"last_completed_seq\": 3"));
}

}  // namespace
}  // namespace gradcomm::comm
