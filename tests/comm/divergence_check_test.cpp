// The divergence check (comm/divergence/): the comparison of gathered hashes
// (majority, ties to the group of the lowest rank), and the check itself on local
// ranks: a bit flipped in one span on one rank is named on every rank with that
// span, ranks that agree are not named, and bad spans are refused before anything
// runs. On a GPU the same on local ranks of GPU 0.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/divergence/divergence_check.hpp"
#include "comm/local/local_transport.hpp"
#include "common/error.hpp"
#include "support/gpu.hpp"

namespace gradcomm::comm {
namespace {

TEST(DivergenceCompare, NamesTheRanksOffTheMajorityAndTheirFirstSpan) {
  // 4 ranks, 3 spans; rank-major.
  const DivergenceReport agree = compare_hashes({1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}, 4, 3);
  EXPECT_EQ(agree.mismatched_spans, 0u);
  EXPECT_EQ(agree.first_mismatch, (std::vector<int64_t>{-1, -1, -1, -1}));
  // Rank 2 differs on spans 1 and 2, rank 0 on span 2.
  const DivergenceReport off = compare_hashes({1, 2, 9, 1, 2, 3, 1, 7, 8, 1, 2, 3}, 4, 3);
  EXPECT_EQ(off.mismatched_spans, 2u);
  EXPECT_EQ(off.first_mismatch, (std::vector<int64_t>{2, -1, 1, -1}));
  // Two against two: the group holding rank 0 is the reference.
  EXPECT_EQ(compare_hashes({5, 6, 6, 5}, 4, 1).first_mismatch, (std::vector<int64_t>{-1, 0, 0, -1}));
  // Two ranks that disagree: rank 1 is named.
  EXPECT_EQ(compare_hashes({4, 5}, 2, 1).first_mismatch, (std::vector<int64_t>{-1, 0}));
  // Three groups of one (no majority at all): every rank but rank 0.
  EXPECT_EQ(compare_hashes({1, 2, 3}, 3, 1).first_mismatch, (std::vector<int64_t>{-1, 0, 0}));
  EXPECT_EQ(compare_hashes({}, 3, 0).mismatched_spans, 0u);
}

// `ranks` local ranks on `device`, each checking three spans (one empty, one of
// several 64 KiB chunks); `flip_rank` (if >= 0) flips one bit of span 1 first.
// `records` (if given) receives each rank's flight record after the check.
std::vector<DivergenceReport> run_check(int ranks, gcommDevice_t device, int flip_rank,
                                        std::vector<std::string>* records = nullptr) {
  if (records != nullptr) records->assign(ranks, "");
  std::mt19937 rng(3);
  std::vector<float> a(1000), b(40000);
  for (auto& x : a) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  for (auto& x : b) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  auto transports = make_local_transports(ranks, device, 10.0);
  std::vector<DivergenceReport> reports(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r, t = std::move(transports[r])]() mutable {
      Communicator comm(std::move(t), 10.0);
      std::vector<float> mine_b = b;
      if (r == flip_rank) {
        uint32_t bits;
        std::memcpy(&bits, &mine_b[30000], 4);
        bits ^= 1u;  // the lowest mantissa bit
        std::memcpy(&mine_b[30000], &bits, 4);
      }
      const bool gpu = device.kind == gcommDeviceCuda;
      void* da = a.data();
      void* db = mine_b.data();
      if (gpu) {
        cudaSetDevice(device.ordinal);
        cudaMalloc(&da, a.size() * 4);
        cudaMalloc(&db, mine_b.size() * 4);
        cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(db, mine_b.data(), mine_b.size() * 4, cudaMemcpyHostToDevice);
      }
      const void* data[3] = {da, db, nullptr};
      const size_t bytes[3] = {a.size() * 4, mine_b.size() * 4, 0};
      reports[r] = check_divergence(comm, data, bytes, 3, nullptr);
      if (records != nullptr) (*records)[r] = comm.flight_record("test");
      if (gpu) {
        cudaFree(da);
        cudaFree(db);
      }
    });
  }
  for (auto& t : threads) t.join();
  return reports;
}

void expect_named(const std::vector<DivergenceReport>& reports, int ranks, int flip_rank) {
  std::vector<int64_t> want(ranks, -1);
  if (flip_rank >= 0) want[flip_rank] = 1;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(reports[r].first_mismatch, want) << "on rank " << r;
    EXPECT_EQ(reports[r].mismatched_spans, flip_rank >= 0 ? 1u : 0u) << "on rank " << r;
    EXPECT_EQ(reports[r].hashes, reports[0].hashes) << "every rank saw the same hashes";
  }
}

// A mismatch is a note in every rank's flight record (tools/gradcomm_desync.py reads
// it); a check that agrees leaves none.
TEST(DivergenceCheck, AMismatchIsNotedInTheFlightRecord) {
  std::vector<std::string> records;
  run_check(3, gcommHostDevice(), 2, &records);
  for (const std::string& rec : records)
    EXPECT_NE(
        rec.find(
            "divergence check: 1 of 3 span(s) differ between ranks; off the majority: rank 2 from span 1"),
        std::string::npos)
        << rec.substr(0, 2000);
  run_check(3, gcommHostDevice(), -1, &records);
  for (const std::string& rec : records) EXPECT_EQ(rec.find("divergence check"), std::string::npos);
}

TEST(DivergenceCheck, AFlippedBitOnOneRankIsNamedOnEveryRank) {
  expect_named(run_check(3, gcommHostDevice(), -1), 3, -1);
  expect_named(run_check(3, gcommHostDevice(), 2), 3, 2);
  expect_named(run_check(3, gcommHostDevice(), 0), 3, 0);
  expect_named(run_check(2, gcommHostDevice(), 0), 2, 1);  // two ranks: rank 1 is named against rank 0
}

TEST(DivergenceCheck, BadSpansAreRefusedBeforeAnythingRuns) {
  auto transports = make_local_transports(1, gcommHostDevice(), 10.0);
  Communicator comm(std::move(transports[0]), 10.0);
  std::vector<float> x(10);
  const void* data[2] = {x.data(), nullptr};
  const size_t bytes[2] = {40, 4};
  try {
    check_divergence(comm, data, bytes, 2, nullptr);
    FAIL() << "a NULL span was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    EXPECT_NE(e.message().find("data[1] is NULL but bytes[1] is 4"), std::string::npos) << e.message();
  }
  EXPECT_THROW(check_divergence(comm, nullptr, bytes, 2, nullptr), Error);
  EXPECT_EQ(check_divergence(comm, data, bytes, 1, nullptr).first_mismatch, (std::vector<int64_t>{-1}));
}

TEST(DivergenceCheckGpu, AFlippedBitOnOneRankOfGpu0IsNamed) {
  GCOMM_SKIP_WITHOUT_GPU();
  expect_named(run_check(2, gcommCudaDevice(0), -1), 2, -1);
  expect_named(run_check(3, gcommCudaDevice(0), 1), 3, 1);
}

}  // namespace
}  // namespace gradcomm::comm
