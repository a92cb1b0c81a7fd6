// The peer-memory collective (comm/peer_memory/) over a backend laid out as the
// cuda-ipc transport's is (a scratch of its own per rank, so the slices do not
// lie end to end and phase two converts them one by one), run on the host by
// threads. The local transport's layout (one scratch) runs in the conformance
// suite; this one is what cuda-ipc runs on a GPU, proven here on every machine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collective_reference.hpp"
#include "comm/local/rendezvous.hpp"
#include "comm/peer_memory/peer_memory_collective.hpp"

namespace gradcomm::comm {
namespace {

using test::Op;

// Threads of one process; each rank's scratch is its own allocation, sized once
// for `piece` (each rank's slice of a piece, twice: two rounds in flight).
struct SeparateScratchGroup {
  SeparateScratchGroup(int n, size_t piece_count) : rv(n, 10.0), piece(piece_count), scratch(n) {
    for (auto& s : scratch) s.assign(2 * (piece_count / n + 1), 0.0f);
  }
  Rendezvous rv;
  size_t piece;
  std::vector<std::vector<float>> scratch;
  int fail_on_rank = -1;  // that rank cannot open its peers' inputs
};

class SeparateScratchPeers final : public PeerMemory {
 public:
  SeparateScratchPeers(SeparateScratchGroup& g, int rank) : g_(g), rank_(rank) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return g_.rv.size(); }
  bool on_gpu() const noexcept override { return false; }
  size_t all_reduce_piece(size_t count) const override { return std::min(count, g_.piece); }
  void share_and_meet(const CollectiveArgs& a, size_t piece, const CallId& what) override {
    (void)piece;
    CallSignature sig{a.op, a.count, a.dtype, a.redop, a.root};
    g_.rv.exchange(rank_, sig, a.send, a.recv, what);
  }
  const void* input_of(int q) override {
    if (rank_ == g_.fail_on_rank)
      fail(gcommInvalidArgument, "rank ", rank_, " cannot open rank ", q, "'s input");
    return g_.rv.send_of(q);
  }
  float* scratch_of(int q, size_t k) override {
    std::vector<float>& s = g_.scratch[q];
    return s.data() + (k % 2) * (s.size() / 2);
  }
  cudaEvent_t event(int, Point) const override { return nullptr; }
  void settle(const CallId& what, const Error* failed) override {
    if (failed != nullptr) {
      g_.rv.fail(rank_, failed->status(), failed->message());
      throw *failed;
    }
    g_.rv.arrive_and_wait(rank_, what);
  }

 private:
  SeparateScratchGroup& g_;
  const int rank_;
};

Collective as_collective(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return Collective::kAllReduce;
    case Op::kReduceScatter:
      return Collective::kReduceScatter;
    case Op::kReduce:
      return Collective::kReduce;
    case Op::kBroadcast:
      return Collective::kBroadcast;
    case Op::kAllGather:
      return Collective::kAllGather;
    case Op::kAllToAll:
      return Collective::kAllToAll;
  }
  return Collective::kBarrier;
}

bool same_value(float got, float want) {
  return (std::isnan(got) && std::isnan(want)) || std::memcmp(&got, &want, sizeof got) == 0;
}

// Every collective, dtype and a few counts, in pieces smaller than the count.
TEST(PeerMemoryCollective, SeparateScratchPerRankGivesTheContractsBitsInEveryCollective) {
  const int n = 3;
  for (size_t piece : {size_t{5}, size_t{64}})
    for (Op op : test::kCollectives)
      for (gcommDataType_t d : test::kDtypes)
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{301}}) {
          SeparateScratchGroup group(n, piece);
          const gcommRedOp_t redop = op == Op::kReduce ? gcommMax : gcommSum;
          const int root = 1;
          std::vector<test::TypedBuffer> in, out;
          for (int r = 0; r < n; ++r) {
            in.push_back(test::input(d, test::send_elems(op, count, n), 17 + r, r == 2));
            std::mt19937 rng(99 + r);
            out.push_back(test::random_buffer(rng, d, test::recv_elems(op, count, n)));
          }
          std::vector<std::string> errors(n);
          std::vector<std::thread> threads;
          for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
              try {
                SeparateScratchPeers peers(group, r);
                CollectiveArgs a = collective_call(as_collective(op), in[r].data(), out[r].data(), count, d,
                                                   nullptr, redop, root);
                a.seq = 1;
                run_peer_memory_collective(peers, a);
              } catch (const std::exception& e) {
                errors[r] = e.what();
              }
            });
          for (auto& t : threads) t.join();
          const std::string where = std::string(test::op_name(op)) + ", " + std::to_string(count) +
                                    " elements, pieces of " + std::to_string(piece);
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(errors[r], "") << where;
            if (op == Op::kReduce && r != root) continue;
            const std::vector<float> want = test::expected(op, redop, d, count, root, r, in);
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_TRUE(same_value(out[r].get(i), want[i])) << where << ", rank " << r << ", element " << i
                                                              << ": " << out[r].get(i) << " != " << want[i];
          }
        }
}

// A rank that fails in phase one (here: cannot open a peer's input) fails every
// rank at the settling meeting, its peers naming it, instead of leaving them to
// wait for the timeout or to read a slice it never wrote.
TEST(PeerMemoryCollective, ARankThatFailsInPhaseOneFailsEveryRankAtOnce) {
  const int n = 3;
  SeparateScratchGroup group(n, 1024);
  group.fail_on_rank = 1;
  std::vector<std::vector<float>> in(n, std::vector<float>(100, 1.0f)), out(n, std::vector<float>(100));
  std::vector<gcommStatus_t> status(n, gcommSuccess);
  std::vector<std::string> errors(n);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        SeparateScratchPeers peers(group, r);
        CollectiveArgs a =
            collective_call(Collective::kAllReduce, in[r].data(), out[r].data(), 100, gcommFloat32, nullptr);
        a.seq = 1;
        run_peer_memory_collective(peers, a);
      } catch (const Error& e) {
        status[r] = e.status();
        errors[r] = e.message();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));  // the timeout is 10 s
  EXPECT_EQ(status[1], gcommInvalidArgument) << errors[1];
  EXPECT_NE(errors[1].find("cannot open rank"), std::string::npos) << errors[1];
  for (int r : {0, 2}) {
    EXPECT_EQ(status[r], gcommRemoteError) << errors[r];
    EXPECT_NE(errors[r].find("rank 1"), std::string::npos) << errors[r];
  }
}

}  // namespace
}  // namespace gradcomm::comm
