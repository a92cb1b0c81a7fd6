// The flight recorder (comm/flight_recorder.hpp) on the local transport: a rank
// that stops calling leaves the others' records naming the collective it never
// entered; calls that differ between ranks are in every rank's record; the ring
// keeps the newest entries; the C API refuses bad arguments. With
// GRADCOMM_FLIGHT_TEST_DIR set (tests/comm/check_desync.sh) the records are left
// there for tools/gradcomm_desync.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ranks.hpp"

namespace gradcomm::test {
namespace {

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The folder the records go to: GRADCOMM_FLIGHT_TEST_DIR/<sub>, or a fresh temporary one.
std::string record_dir(const char* sub) {
  const char* keep = std::getenv("GRADCOMM_FLIGHT_TEST_DIR");
  std::string dir;
  if (keep != nullptr) {
    dir = std::string(keep) + "/" + sub;
  } else {
    char tmpl[] = "/tmp/gradcomm-flight-XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  EXPECT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  return dir;
}

std::string record_of(gcommComm_t c) {
  size_t required = 0;
  EXPECT_EQ(gcommCommGetFlightRecord(c, nullptr, 0, &required), gcommSuccess) << gcommGetLastError();
  std::string text(required, '\0');
  EXPECT_EQ(gcommCommGetFlightRecord(c, text.data(), text.size(), nullptr), gcommSuccess);
  text.resize(required - 1);
  return text;
}

TEST(FlightRecord, AFrozenRankIsNamedInTheSurvivorsRecords) {
  const std::string dir = record_dir("frozen");
  setenv("GRADCOMM_FLIGHT_RECORDER_FILE", (dir + "/rank%r.json").c_str(), 1);
  auto comms = make_local(3, 1.0);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> x(256, 1.0f);
    const int calls = r == 2 ? 3 : 4;  // rank 2 stops after the third all-reduce
    for (int k = 0; k < calls; ++k)
      if (gcommAllReduce(c, x.data(), x.data(), x.size(), gcommFloat32, gcommSum, nullptr) != gcommSuccess)
        return gcommGetLastError();
    return "";
  });
  unsetenv("GRADCOMM_FLIGHT_RECORDER_FILE");
  EXPECT_EQ(errors[2], "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(errors[r], "rank 2 never arrived")) << errors[r];
    const std::string rec = slurp(dir + "/rank" + std::to_string(r) + ".json");
    ASSERT_FALSE(rec.empty()) << "rank " << r << " wrote no record at its failure";
    EXPECT_TRUE(contains(rec, "\"rank\": " + std::to_string(r))) << rec;
    EXPECT_TRUE(contains(rec, "\"last_enqueued_seq\": 4")) << rec;
    EXPECT_TRUE(contains(rec, "\"last_completed_seq\": 3")) << rec;
    EXPECT_TRUE(contains(rec, "\"state\": \"failed\"")) << rec;
    EXPECT_TRUE(contains(rec, "rank 2 never arrived")) << "the failure is in the record";
    EXPECT_TRUE(contains(rec, "\"reason\": \"failure: gcomm"))
        << "timeout, or the peer that timed out first: " << rec;
  }
  // Rank 2 did not fail: no record at a failure, but one on demand.
  EXPECT_TRUE(slurp(dir + "/rank2.json").empty());
  ASSERT_EQ(gcommCommDumpFlightRecord(comms[2], (dir + "/rank2.json").c_str()), gcommSuccess)
      << gcommGetLastError();
  EXPECT_TRUE(contains(slurp(dir + "/rank2.json"), "\"last_completed_seq\": 3"));
  destroy(comms);
}

// Rank 0 sends twice to rank 1, which receives once and goes on to an
// all-reduce: rank 0's second send waits for a receive that never comes.
TEST(FlightRecord, ASendWithoutItsReceiveIsNamed) {
  const std::string dir = record_dir("p2p");
  setenv("GRADCOMM_FLIGHT_RECORDER_FILE", (dir + "/rank%r.json").c_str(), 1);
  auto comms = make_local(2, 1.0);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> x(16, 1.0f);
    for (int k = 0; k < 2; ++k) {
      gcommStatus_t s = r == 0   ? gcommSend(c, x.data(), 16, gcommFloat32, 1, nullptr)
                        : k == 0 ? gcommRecv(c, x.data(), 16, gcommFloat32, 0, nullptr)
                                 : gcommAllReduce(c, x.data(), x.data(), 16, gcommFloat32, gcommSum, nullptr);
      if (s != gcommSuccess) return gcommGetLastError();
    }
    return "";
  });
  unsetenv("GRADCOMM_FLIGHT_RECORDER_FILE");
  EXPECT_TRUE(contains(errors[0], "send #2 of 64 bytes to rank 1")) << errors[0];
  const std::string rec = slurp(dir + "/rank0.json");
  ASSERT_FALSE(rec.empty());
  EXPECT_TRUE(contains(rec, "\"p2p_seq\": 2")) << rec;
  EXPECT_TRUE(contains(rec, "\"last_enqueued_seq\": 0")) << "no collective on rank 0: " << rec;
  destroy(comms);
}

TEST(FlightRecord, CallsThatDifferAreInEveryRanksRecord) {
  const std::string dir = record_dir("mismatch");
  auto comms = make_local(2, 5.0);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> x(64, 1.0f);
    if (gcommAllReduce(c, x.data(), x.data(), 64, gcommFloat32, gcommSum, nullptr) != gcommSuccess)
      return gcommGetLastError();
    // #2: rank 1 sends 32 elements where rank 0 sends 64.
    gcommStatus_t s =
        gcommAllReduce(c, x.data(), x.data(), r == 1 ? 32 : 64, gcommFloat32, gcommSum, nullptr);
    if (s != gcommInvalidArgument)
      return std::string("the mismatch was not refused: ") + gcommGetStatusName(s);
    const std::string path = dir + "/rank" + std::to_string(r) + ".json";
    if (gcommCommDumpFlightRecord(c, path.c_str()) != gcommSuccess) return gcommGetLastError();
    return "";
  });
  for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(contains(slurp(dir + "/rank1.json"), "\"count\": 32"));
  EXPECT_TRUE(contains(slurp(dir + "/rank0.json"), "\"reason\": \"requested\""));
  destroy(comms);
}

TEST(FlightRecord, TheRingKeepsTheNewestEntries) {
  setenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES", "4", 1);
  auto comms = make_local(1);
  unsetenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES");
  float x = 1.0f;
  for (int k = 0; k < 10; ++k)
    ASSERT_EQ(gcommAllReduce(comms[0], &x, &x, 1, gcommFloat32, gcommSum, nullptr), gcommSuccess);
  const std::string rec = record_of(comms[0]);
  EXPECT_TRUE(contains(rec, "\"recorded\": 10")) << rec;
  EXPECT_TRUE(contains(rec, "\"seq\": 7") && contains(rec, "\"seq\": 10")) << rec;
  EXPECT_FALSE(contains(rec, "\"seq\": 6,")) << "older entries are overwritten: " << rec;
  destroy(comms);
}

TEST(FlightRecord, BadArgumentsAreRefused) {
  setenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES", "0", 1);
  auto off = make_local(1);
  unsetenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES");
  EXPECT_EQ(gcommCommDumpFlightRecord(off[0], "/tmp/x.json"), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "flight recorder is off")) << gcommGetLastError();
  destroy(off);
  auto comms = make_local(1);
  unsetenv("GRADCOMM_FLIGHT_RECORDER_FILE");
  EXPECT_EQ(gcommCommDumpFlightRecord(comms[0], nullptr), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "GRADCOMM_FLIGHT_RECORDER_FILE")) << gcommGetLastError();
  EXPECT_EQ(gcommCommDumpFlightRecord(comms[0], "/nonexistent-dir/x.json"), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "/nonexistent-dir/x.json")) << gcommGetLastError();
  char small[8];
  size_t required = 0;
  EXPECT_EQ(gcommCommGetFlightRecord(comms[0], nullptr, 8, &required), gcommInvalidArgument);
  EXPECT_EQ(gcommCommGetFlightRecord(comms[0], small, sizeof small, &required), gcommSuccess);
  EXPECT_GT(required, sizeof small);
  EXPECT_EQ(small[7], '\0') << "cut to fit";
  EXPECT_EQ(gcommCommGetFlightRecord(nullptr, small, sizeof small, &required), gcommInvalidArgument);
  destroy(comms);
}

}  // namespace
}  // namespace gradcomm::test
