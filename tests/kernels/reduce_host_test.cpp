// The host reductions of the local and socket transports against the scalar
// element-at-a-time rule (reduce_math.hpp, element.hpp), bit for bit: f16 blocks
// take x86's F16C path where the CPU has it, and must give the scalar twin's bits
// for every input (a NaN result must be a NaN: which one was never pinned).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gradcomm/kernels.h"
#include "kernels/element.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/reduce/reduce_math.hpp"

namespace gradcomm::kernels {
namespace {

// Random f16 bit patterns; `finite` keeps them finite (blocks then take the fast path).
std::vector<uint16_t> random_halves(std::mt19937& rng, size_t n, bool finite) {
  std::vector<uint16_t> v(n);
  for (auto& h : v) {
    h = static_cast<uint16_t>(rng());
    if (finite && (h & 0x7c00) == 0x7c00) h &= 0xbfff;  // exponent 31 -> 15
  }
  return v;
}

bool is_f16_nan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

uint16_t scalar_reduce(const std::vector<std::vector<uint16_t>>& in, size_t i, gcommRedOp_t op) {
  float acc = f16_to_f32(in[0][i]);
  for (size_t q = 1; q < in.size(); ++q) acc = combine(op, acc, f16_to_f32(in[q][i]));
  return f32_to_f16(finish(op, acc, static_cast<int>(in.size())));
}

TEST(ReduceHost, F16BlocksMatchTheScalarTwinBitForBit) {
  std::mt19937 rng(11);
  for (bool finite : {true, false}) {
    for (size_t count : {size_t{0}, size_t{7}, size_t{1024}, size_t{5003}}) {
      std::vector<std::vector<uint16_t>> in;
      for (int q = 0; q < 3; ++q) in.push_back(random_halves(rng, count, finite));
      const void* sends[3] = {in[0].data(), in[1].data(), in[2].data()};
      for (gcommRedOp_t op : {gcommSum, gcommAvg, gcommMax, gcommMin}) {
        std::vector<uint16_t> out(count, 0x1234);
        reduce_host::reduce_to_typed(sends, 3, 0, count, gcommFloat16, op, out.data());
        for (size_t i = 0; i < count; ++i) {
          const uint16_t want = scalar_reduce(in, i, op);
          if (is_f16_nan(want))  // which NaN a sum of NaNs gives is not pinned (the vectorized f32 loops
            ASSERT_TRUE(is_f16_nan(out[i]))
                << "op " << op << " i " << i;  // reorder operands), only that it is one
          else
            ASSERT_EQ(out[i], want) << "op " << op << " i " << i << " finite " << finite;
        }
      }
    }
  }
}

TEST(ReduceHost, EveryF16ValueConvertsAsTheScalarTwin) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  const void* sends[1] = {all.data()};
  std::vector<float> out(all.size());
  reduce_host::reduce_to_float(sends, 1, 0, all.size(), gcommFloat16, gcommSum, out.data());
  for (size_t i = 0; i < all.size(); ++i) {
    float want = f16_to_f32(all[i]);
    ASSERT_EQ(std::memcmp(&out[i], &want, sizeof want), 0) << "f16 0x" << std::hex << i;
  }
  std::vector<uint16_t> back(all.size());
  reduce_host::float_to_typed(out.data(), back.data(), out.size(), gcommFloat16);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(back[i], f32_to_f16(out[i])) << "f16 0x" << std::hex << i;
}

TEST(ReduceHost, FloatToF16RoundsAsTheScalarTwin) {
  std::mt19937 rng(12);
  std::vector<float> in(1 << 20);
  for (auto& f : in) f = bits_to_float(static_cast<uint32_t>(rng()) & 0xbfffffffu);  // no NaN: the fast path
  in[5] = 65520.0f;                                                                  // overflows to Inf
  in[6] = 2.9802322e-8f;                                                             // a tie to even 0
  std::vector<uint16_t> out(in.size());
  reduce_host::float_to_typed(in.data(), out.data(), in.size(), gcommFloat16);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], f32_to_f16(in[i])) << in[i];
}

}  // namespace
}  // namespace gradcomm::kernels

namespace gradcomm::kernels {
namespace {

// The host twins' pack and unpack move f16 sides in blocks (kernels/f16c_blocks.hpp):
// over many blocks, a misaligned start, NaN, Inf and values that overflow f16,
// every element is the element rule's.
TEST(HostTwinBlocks, F16PackAndUnpackMatchTheElementRule) {
  std::mt19937 rng(13);
  const size_t n = 70001;
  std::vector<float> src(n + 1);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (auto& v : src) v = dist(rng);
  src[5] = std::numeric_limits<float>::quiet_NaN();
  src[40000] = std::numeric_limits<float>::infinity();
  std::vector<uint16_t> bucket(n + 1, 0);
  gcommTensor_t t{src.data() + 1, n, gcommFloat32};  // misaligned start
  ASSERT_EQ(
      gcommPack(&t, 1, nullptr, bucket.data() + 1, gcommFloat16, 0.5f, nullptr, gcommHostDevice(), nullptr),
      gcommSuccess);
  for (size_t i = 0; i < n; ++i) {
    uint16_t want = f32_to_f16(src[i + 1] * 0.5f);
    if ((want & 0x7fffu) > 0x7c00u)
      ASSERT_GT(bucket[i + 1] & 0x7fffu, 0x7c00u) << i;
    else
      ASSERT_EQ(bucket[i + 1], want) << i;
  }
  std::vector<float> dst(n), before(n);
  for (auto& v : dst) v = dist(rng);
  before = dst;
  gcommTensor_t d{dst.data(), n, gcommFloat32};
  float found = 0.0f;
  ASSERT_EQ(gcommUnpack(bucket.data() + 1, gcommFloat16, nullptr, &d, 1, 0.25f, nullptr, 1, &found,
                        gcommHostDevice(), nullptr),
            gcommSuccess);
  EXPECT_EQ(found, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    float want = before[i] + f16_to_f32(bucket[i + 1]) * 0.25f;
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(dst[i])) << i;
    else
      ASSERT_EQ(std::memcmp(&dst[i], &want, sizeof want), 0) << i;
  }
}

}  // namespace
}  // namespace gradcomm::kernels
