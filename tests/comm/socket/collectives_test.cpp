// Socket-transport collectives against the local transport, which is checked
// against a straightforward reference in tests/comm/local/: the same inputs on
// both must give the same bits (both combine the ranks in rank order in float
// and round once). Every collective, dtype and op; sizes 0, 1, 7, 4099 and one
// past the 8 MiB piece size; in place and out of place; 1 to 5 ranks; random
// data with Inf and NaN sprinkled in.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "socket_ranks.hpp"

namespace gradcomm::test {
namespace {

const gcommDataType_t kDtypes[] = {gcommFloat32, gcommFloat16, gcommBfloat16};
enum class Op { kAllReduce, kReduceScatter, kReduce, kBroadcast, kAllGather, kAllToAll };
const Op kOps[] = {Op::kAllReduce, Op::kReduceScatter, Op::kReduce,
                   Op::kBroadcast, Op::kAllGather,     Op::kAllToAll};
const char* name(Op op) {
  const char* names[] = {"all-reduce", "reduce-scatter", "reduce", "broadcast", "all-gather", "all-to-all"};
  return names[static_cast<int>(op)];
}

size_t esize(gcommDataType_t d) {
  return d == gcommFloat32 ? 4 : 2;
}

// Random bytes that are valid values of the dtype: floats in [-8, 8), a few Inf/NaN.
std::vector<unsigned char> random_values(gcommDataType_t d, size_t count, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::vector<unsigned char> out(count * esize(d) + 1);
  for (size_t i = 0; i < count; ++i) {
    float v = u(rng);
    if (specials && rng() % 97 == 0) v = rng() % 2 ? std::numeric_limits<float>::infinity() : std::nanf("");
    if (d == gcommFloat32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      // Any 16-bit pattern from a float's high half is a valid bf16; for f16 keep
      // the pattern of a small value (exponent below 30): all finite, non-zero.
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      uint16_t h = d == gcommBfloat16 ? static_cast<uint16_t>(bits >> 16)
                                      : static_cast<uint16_t>((bits >> 16 & 0x8000) | (rng() % 0x7800));
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// Elements each rank sends and receives for `count` (per-rank block for all-gather / reduce-scatter).
void shape(Op op, size_t count, int n, size_t& send_elems, size_t& recv_elems) {
  send_elems = op == Op::kReduceScatter || op == Op::kAllToAll ? count * n : count;
  recv_elems = op == Op::kAllGather || op == Op::kAllToAll ? count * n : count;
}

gcommStatus_t issue(Op op, gcommComm_t c, const void* send, void* recv, size_t count, gcommDataType_t d,
                    gcommRedOp_t redop, int root) {
  switch (op) {
    case Op::kAllReduce:
      return gcommAllReduce(c, send, recv, count, d, redop, nullptr);
    case Op::kReduceScatter:
      return gcommReduceScatter(c, send, recv, count, d, redop, nullptr);
    case Op::kReduce:
      return gcommReduce(c, send, recv, count, d, redop, root, nullptr);
    case Op::kBroadcast:
      return gcommBroadcast(c, send, recv, count, d, root, nullptr);
    case Op::kAllGather:
      return gcommAllGather(c, send, recv, count, d, nullptr);
    case Op::kAllToAll:
      return gcommAllToAll(c, send, recv, count, d, nullptr);
  }
  return gcommInternalError;
}

// Runs one collective on `comms` with rank r's input `inputs[r]`; returns each rank's output buffer.
std::vector<std::vector<unsigned char>> run(std::vector<gcommComm_t>& comms, Op op, size_t count,
                                            gcommDataType_t d, gcommRedOp_t redop, int root, bool in_place,
                                            const std::vector<std::vector<unsigned char>>& inputs) {
  const int n = static_cast<int>(comms.size());
  size_t send_elems, recv_elems;
  shape(op, count, n, send_elems, recv_elems);
  const size_t es = esize(d);
  std::vector<std::vector<unsigned char>> buf(n), out(n);
  for (int r = 0; r < n; ++r) {
    // In place: one buffer of the larger size, the input where the collective expects it.
    buf[r].assign(std::max(send_elems, recv_elems) * es + 1, 0xA5);
    out[r].assign(recv_elems * es + 1, 0x5A);
    size_t at = in_place && op == Op::kAllGather ? r * count * es : 0;
    std::memcpy(buf[r].data() + at, inputs[r].data(), send_elems * es);
  }
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    size_t at = in_place && op == Op::kAllGather ? r * count * es : 0;
    const void* send = buf[r].data() + at;
    void* recv = in_place ? buf[r].data() + (op == Op::kReduceScatter ? r * count * es : 0) : out[r].data();
    if (issue(op, c, send, recv, count, d, redop, root) != gcommSuccess) return gcommGetLastError();
    if (in_place) std::memcpy(out[r].data(), recv, recv_elems * es);
    return "";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << name(op) << " rank " << r;
  // Only the root's output of a reduce means anything.
  if (op == Op::kReduce)
    for (int r = 0; r < n; ++r)
      if (r != root) out[r].clear();
  return out;
}

class SocketCollectives : public ::testing::TestWithParam<int> {};

// gcommCommBytesSent counts each rank's payload: an all-reduce sends twice what a
// reduce-scatter or an all-gather of the same buffer sends (each rank's slice to
// its owner, then the reduced slice to every peer). The local transport does not count.
TEST(SocketBytesSent, EachCollectiveSendsItsAlgorithmsPayload) {
  const int n = 3;
  const size_t count = 3000;  // 1000 elements a slice
  auto comms = make_socket(n, 30.0, "bytes-sent");
  auto errors = run_ranks(comms, [&](int, gcommComm_t c) -> std::string {
    std::vector<float> a(count, 1.0f), b(count, 0.0f);
    uint64_t before = 0, after = 0;
    const uint64_t slice = count / n * sizeof(float);
    struct Case {
      Op op;
      uint64_t expect;
    } cases[] = {{Op::kAllReduce, 2 * (n - 1) * slice},
                 {Op::kReduceScatter, (n - 1) * slice},
                 {Op::kAllGather, (n - 1) * slice},
                 {Op::kAllToAll, (n - 1) * slice}};
    for (const Case& k : cases) {
      if (gcommCommBytesSent(c, &before) != gcommSuccess) return gcommGetLastError();
      const size_t elems = k.op == Op::kAllReduce ? count : count / n;
      if (issue(k.op, c, a.data(), b.data(), elems, gcommFloat32, gcommSum, 0) != gcommSuccess)
        return gcommGetLastError();
      if (gcommCommBytesSent(c, &after) != gcommSuccess) return gcommGetLastError();
      if (after - before != k.expect)
        return std::string(name(k.op)) + " sent " + std::to_string(after - before) + " bytes, not " +
               std::to_string(k.expect);
    }
    return "";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  destroy_together(comms);

  std::vector<gcommComm_t> local(2, nullptr);
  ASSERT_EQ(gcommCommInitLocal(2, gcommHostDevice(), nullptr, local.data()), gcommSuccess);
  uint64_t bytes = 0;
  EXPECT_EQ(gcommCommBytesSent(local[0], &bytes), gcommNotSupported);
  EXPECT_NE(std::string(gcommGetLastError()).find("local transport does not count"), std::string::npos)
      << gcommGetLastError();
  EXPECT_EQ(gcommCommBytesSent(local[0], nullptr), gcommInvalidArgument);
  for (gcommComm_t c : local) EXPECT_EQ(gcommCommDestroy(c), gcommSuccess);
}

TEST_P(SocketCollectives, SameBitsAsTheLocalTransport) {
  const int n = GetParam();
  auto sockets = make_socket(n);
  auto locals = make_local(n);
  ASSERT_EQ(sockets.size(), static_cast<size_t>(n));
  gcommTransport_t kind;
  ASSERT_EQ(gcommCommTransport(sockets[0], &kind), gcommSuccess);
  EXPECT_EQ(kind, gcommTransportSocket);
  uint32_t seed = 1;
  for (Op op : kOps)
    for (gcommDataType_t d : kDtypes)
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}})
        for (gcommRedOp_t redop : {gcommSum, gcommAvg, gcommMax, gcommMin})
          for (bool in_place : {false, true}) {
            if ((op == Op::kBroadcast || op == Op::kAllGather || op == Op::kAllToAll) && redop != gcommSum)
              continue;
            if (op == Op::kAllToAll && in_place) continue;  // refused: tests/comm/local
            const int root = (count + n - 1) % n;
            size_t send_elems, recv_elems;
            shape(op, count, n, send_elems, recv_elems);
            std::vector<std::vector<unsigned char>> inputs(n);
            for (int r = 0; r < n; ++r) inputs[r] = random_values(d, send_elems, seed++, redop != gcommAvg);
            auto got = run(sockets, op, count, d, redop, root, in_place, inputs);
            auto want = run(locals, op, count, d, redop, root, in_place, inputs);
            for (int r = 0; r < n; ++r)
              ASSERT_TRUE(got[r] == want[r])
                  << name(op) << " dtype " << d << " op " << redop << " count " << count
                  << (in_place ? " in place" : "") << ": rank " << r << " differs";
          }
  destroy_together(sockets);
  destroy(locals);
}

// One message past the 8 MiB piece size, so every collective runs in pieces.
TEST_P(SocketCollectives, MessagesLargerThanOnePiece) {
  const int n = GetParam();
  auto sockets = make_socket(n);
  auto locals = make_local(n);
  const size_t count = (size_t{8} << 20) / 4 + 12345;
  uint32_t seed = 99;
  for (Op op : kOps) {
    size_t send_elems, recv_elems;
    const bool blocked = op == Op::kAllGather || op == Op::kReduceScatter || op == Op::kAllToAll;
    shape(op, count / (blocked ? n : 1), n, send_elems, recv_elems);
    const size_t c = blocked ? count / n : count;
    std::vector<std::vector<unsigned char>> inputs(n);
    for (int r = 0; r < n; ++r) inputs[r] = random_values(gcommFloat32, send_elems, seed++, false);
    for (bool in_place : {false, true}) {
      if (op == Op::kAllToAll && in_place) continue;
      auto got = run(sockets, op, c, gcommFloat32, gcommSum, n - 1, in_place, inputs);
      auto want = run(locals, op, c, gcommFloat32, gcommSum, n - 1, in_place, inputs);
      for (int r = 0; r < n; ++r) ASSERT_TRUE(got[r] == want[r]) << name(op) << " rank " << r;
    }
  }
  destroy_together(sockets);
  destroy(locals);
}

std::string rank_count(const ::testing::TestParamInfo<int>& p) {
  return std::to_string(p.param) + "ranks";
}
INSTANTIATE_TEST_SUITE_P(Ranks, SocketCollectives, ::testing::Values(1, 2, 3, 5), rank_count);

}  // namespace
}  // namespace gradcomm::test
