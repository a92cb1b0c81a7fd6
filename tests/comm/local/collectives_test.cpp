// Local-transport collectives through the C API against a straightforward
// reference: every op x dtype x size (0, 1, 7, 4097, 65539) x 1..8 ranks, in
// place and out of place, random non-zero data, identical bits on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../../kernels/reference.hpp"
#include "ranks.hpp"

namespace gradcomm::test {
namespace {

const gcommDataType_t kDtypes[] = {gcommFloat32, gcommFloat16, gcommBfloat16};
const size_t kSizes[] = {0, 1, 7, 4097, 65539};

// Rank r's input element i.
float input(int r, size_t i, int salt) {
  uint32_t h = static_cast<uint32_t>(r * 7919 + i * 104729 + salt * 31337);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  float v = static_cast<float>(h % 2001) / 250.0f - 4.0f;
  return v == 0.0f ? 0.5f : v;
}

TypedBuffer filled(gcommDataType_t d, size_t count, int r, int salt) {
  TypedBuffer b{d, count, 0, std::vector<unsigned char>((count + 1) * elem_size(d))};
  for (size_t i = 0; i < count; ++i) b.set(i, input(r, i, salt));
  return b;
}

float reduce_ref(gcommRedOp_t op, gcommDataType_t d, int n, size_t i, int salt) {
  float acc = through(d, input(0, i, salt));
  for (int q = 1; q < n; ++q) {
    float v = through(d, input(q, i, salt));
    acc = op == gcommMax ? std::max(acc, v) : op == gcommMin ? std::min(acc, v) : acc + v;
  }
  if (op == gcommAvg) acc /= static_cast<float>(n);
  return through(d, acc);
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduceEveryOpDtypeAndSize) {
  int n = GetParam();
  auto comms = make_local(n);
  for (auto d : kDtypes)
    for (size_t count : kSizes)
      for (gcommRedOp_t op : {gcommSum, gcommAvg, gcommMax, gcommMin})
        for (bool in_place : {false, true}) {
          std::vector<TypedBuffer> send(n), recv(n);
          for (int r = 0; r < n; ++r) {
            send[r] = filled(d, count, r, op);
            recv[r] = in_place ? send[r] : filled(d, count, r + 100, 0);
          }
          auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
            void* out = in_place ? send[r].data() : recv[r].data();
            if (gcommAllReduce(c, send[r].data(), out, count, d, op, nullptr) != gcommSuccess)
              return gcommGetLastError();
            return "";
          });
          for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
          for (int r = 0; r < n; ++r) {
            const TypedBuffer& out = in_place ? send[r] : recv[r];
            for (size_t i = 0; i < count; ++i)
              ASSERT_TRUE(same_float(out.get(i), reduce_ref(op, d, n, i, op)))
                  << "rank " << r << " i " << i << " dtype " << d << " op " << op << " count " << count;
            if (r > 0) {
              ASSERT_EQ(out.bytes, (in_place ? send[0] : recv[0]).bytes) << "identical bits on every rank";
            }
          }
        }
  destroy(comms);
}

TEST_P(Collectives, BroadcastReduceAllGatherReduceScatter) {
  int n = GetParam();
  auto comms = make_local(n);
  for (auto d : kDtypes)
    for (size_t count : {size_t{1}, size_t{7}, size_t{4097}}) {
      int root = n - 1;
      // broadcast + reduce
      std::vector<TypedBuffer> send(n), recv(n), gathered(n), scatter_in(n), scattered(n);
      for (int r = 0; r < n; ++r) {
        send[r] = filled(d, count, r, 1);
        recv[r] = filled(d, count, r + 50, 2);
        gathered[r] = filled(d, count * n, r + 60, 3);
        scatter_in[r] = filled(d, count * n, r, 4);
        scattered[r] = filled(d, count, r + 70, 5);
      }
      std::vector<TypedBuffer> reduced = recv;
      auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
        if (gcommBroadcast(c, send[r].data(), recv[r].data(), count, d, root, nullptr) != gcommSuccess ||
            gcommReduce(c, send[r].data(), reduced[r].data(), count, d, gcommSum, root, nullptr) !=
                gcommSuccess ||
            gcommAllGather(c, send[r].data(), gathered[r].data(), count, d, nullptr) != gcommSuccess ||
            gcommReduceScatter(c, scatter_in[r].data(), scattered[r].data(), count, d, gcommSum, nullptr) !=
                gcommSuccess ||
            gcommBarrier(c, nullptr) != gcommSuccess)
          return gcommGetLastError();
        return "";
      });
      for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(recv[r].get(i), send[root].get(i)) << "broadcast";
          for (int q = 0; q < n; ++q)
            ASSERT_EQ(gathered[r].get(q * count + i), send[q].get(i)) << "all-gather";
          float rs = through(d, input(0, r * count + i, 4));
          for (int q = 1; q < n; ++q) rs += through(d, input(q, r * count + i, 4));
          ASSERT_EQ(scattered[r].get(i), through(d, rs)) << "reduce-scatter";
        }
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(reduced[root].get(i), reduce_ref(gcommSum, d, n, i, 1)) << "reduce";
    }
  destroy(comms);
}

TEST_P(Collectives, InPlaceAllGatherAndReduceScatter) {
  int n = GetParam();
  auto comms = make_local(n);
  const size_t count = 33;
  std::vector<TypedBuffer> buf(n), rs(n);
  for (int r = 0; r < n; ++r) {
    buf[r] = filled(gcommFloat32, count * n, r + 10, 6);
    for (size_t i = 0; i < count; ++i) buf[r].set(r * count + i, input(r, i, 7));  // rank r's block
    rs[r] = filled(gcommFloat32, count * n, r, 8);
  }
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    auto* base = static_cast<float*>(buf[r].data());
    auto* rbase = static_cast<float*>(rs[r].data());
    if (gcommAllGather(c, base + r * count, base, count, gcommFloat32, nullptr) != gcommSuccess ||
        gcommReduceScatter(c, rbase, rbase + r * count, count, gcommFloat32, gcommSum, nullptr) !=
            gcommSuccess)
      return gcommGetLastError();
    return "";
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "");
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(buf[r].get(q * count + i), input(q, i, 7));
        if (q == r) {
          float s = 0;
          for (int p = 0; p < n; ++p) s += input(p, r * count + i, 8);
          ASSERT_EQ(rs[r].get(r * count + i), s);
        }
      }
  destroy(comms);
}

// All-to-all: block q of rank r's output is block r of rank q's input, bit for
// bit, every dtype and size (0 included); the output's tail byte is untouched.
TEST_P(Collectives, AllToAllEveryDtypeAndSize) {
  int n = GetParam();
  auto comms = make_local(n);
  for (auto d : kDtypes)
    for (size_t count : kSizes) {
      std::vector<TypedBuffer> send(n), recv(n);
      for (int r = 0; r < n; ++r) {
        send[r] = filled(d, count * n, r, 9);
        recv[r] = filled(d, count * n, r + 100, 10);
      }
      auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
        if (gcommAllToAll(c, send[r].data(), recv[r].data(), count, d, nullptr) != gcommSuccess)
          return gcommGetLastError();
        return "";
      });
      for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
      const size_t es = elem_size(d);
      for (int r = 0; r < n; ++r) {
        for (int q = 0; q < n; ++q)
          ASSERT_EQ(0, std::memcmp(recv[r].bytes.data() + q * count * es,
                                   send[q].bytes.data() + r * count * es, count * es))
              << "rank " << r << " block " << q << " dtype " << d << " count " << count;
        const TypedBuffer untouched = filled(d, count * n, r + 100, 10);
        ASSERT_EQ(recv[r].bytes.back(), untouched.bytes.back()) << "wrote past the output";
      }
    }
  destroy(comms);
}

// There is no in-place all-to-all: overlapping buffers are refused on every rank
// before any rank moves data, and the communicator stays usable.
TEST_P(Collectives, AllToAllRefusesOverlappingBuffers) {
  int n = GetParam();
  auto comms = make_local(n);
  const size_t count = 5;
  std::vector<std::vector<float>> buf(n, std::vector<float>(2 * count * n, 1.0f));
  for (size_t shift : {size_t{0}, count * n - 1}) {
    auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
      gcommStatus_t s = gcommAllToAll(c, buf[r].data(), buf[r].data() + shift, count, gcommFloat32, nullptr);
      if (s != gcommInvalidArgument) return std::string("status ") + gcommGetStatusString(s);
      if (std::string(gcommGetLastError()).find("overlap") == std::string::npos) return gcommGetLastError();
      return "";
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r << " shift " << shift;
  }
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    if (gcommAllToAll(c, buf[r].data(), buf[r].data() + count * n, count, gcommFloat32, nullptr) !=
        gcommSuccess)
      return gcommGetLastError();
    return "";
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "adjacent buffers are fine: rank " << r;
  destroy(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "ranks";
                         });

}  // namespace
}  // namespace gradcomm::test
