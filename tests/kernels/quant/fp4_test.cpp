// The fp4 format of the quantized blocks (kernels/quant/fp4.*, e2m1): the sixteen
// codes' values; the code of any value is the nearest one (ties to the even code) by
// a search over every code; two codes a byte (the even element's in the low nibble)
// and a layout of half the int8 codes' bytes; the error bound of each value; zero,
// tiny and Inf/NaN blocks; an odd count's last byte; the owner's sum; a layout of
// another code width refused; and the CUDA paths against the host twins, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "kernels/quant/codec_checks.hpp"
#include "kernels/quant/fp4.hpp"
#include "kernels/quant/int8.hpp"

namespace gradcomm::kernels::quant {
namespace {

using F = Fp4E2M1;

// The reference: the code nearest to x by search over all 16; a tie goes to the
// code whose mantissa bit is 0.
float nearest_value(float x) {
  float best = 0.0f;
  double best_distance = INFINITY;
  int best_code = 0;
  for (int c = 0; c < 16; ++c) {
    const double d = std::fabs(static_cast<double>(F::value(static_cast<uint8_t>(c))) - x);
    if (d < best_distance || (d == best_distance && (c & 1) == 0 && (best_code & 1) == 1)) {
      best_distance = d;
      best = F::value(static_cast<uint8_t>(c));
      best_code = c;
    }
  }
  return best;
}

TEST(Fp4Codes, TheSixteenCodesAreE2M1sValues) {
  const float positive[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 8; ++c) {
    EXPECT_EQ(F::value(c), positive[c]) << int(c);
    EXPECT_EQ(F::value(static_cast<uint8_t>(c | 0x8)), -positive[c]) << int(c | 0x8);
    EXPECT_EQ(F::encode(positive[c]), c);
    if (c != 0) {
      EXPECT_EQ(F::encode(-positive[c]), c | 0x8);
    }
  }
  EXPECT_EQ(F::encode(-0.0f), 0x8) << "-0 keeps its sign, as in the fp8 formats";
  EXPECT_EQ(F::value(0x8), 0.0f);
}

TEST(Fp4Codes, CodesAreTheNearestWithTiesToEven) {
  std::vector<float> xs;
  for (uint8_t c = 0; c < 7; ++c) {  // the midpoints between neighbours: 0.25, 0.75, ..., 5
    const float mid = (F::value(c) + F::value(static_cast<uint8_t>(c + 1))) / 2.0f;
    xs.push_back(mid);
    xs.push_back(-mid);
    xs.push_back(std::nextafter(mid, 0.0f));
    xs.push_back(std::nextafter(mid, 7.0f));
  }
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> unit(0.0f, F::kMax);
  for (int i = 0; i < 100000; ++i) xs.push_back(i % 2 ? -unit(rng) : unit(rng));
  xs.push_back(std::numeric_limits<float>::denorm_min());
  xs.push_back(1e-30f);
  for (float x : xs) ASSERT_EQ(F::value(F::encode(x)), nearest_value(x)) << "x = " << x;
  EXPECT_EQ(F::encode(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(F::encode(-std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(F::value(F::encode(F::kMax * 1.0000001f)), F::kMax) << "past the largest code: the largest";
}

TEST(Fp4Blocks, TwoCodesAByteTheEvenElementsInTheLowNibble) {
  const size_t block = 32;
  const Layout l = layout_for(2 * block, 1, block, 4);
  EXPECT_EQ(l.chunk_bytes(), 2 * (block / 2 + sizeof(float))) << "half a byte a value plus a scale a block";
  EXPECT_EQ(2 * l.chunk_code_bytes(), layout_for(2 * block, 1, block).chunk_code_bytes())
      << "half the int8 codes' bytes";
  std::vector<float> x(2 * block, 0.0f);
  x[0] = 6.0f;       // the block's max: scale 1, code 0x7
  x[1] = -0.5f;      // code 0x9
  x[2] = 3.0f;       // code 0x5
  x[block] = -3.0f;  // the second block: scale 0.5, -6 is code 0xf
  const std::vector<uint8_t> q = quantized(fp4_e2m1_codec(), x, l);
  EXPECT_EQ(q[0], 0x97);
  EXPECT_EQ(q[1], 0x05);
  EXPECT_EQ(q[block / 2], 0x0f) << "the second block's codes follow the first's";
  EXPECT_EQ(scale_at(q, l, 0), 1.0f);
  EXPECT_EQ(scale_at(q, l, 1), 0.5f);
  EXPECT_EQ(decoded(fp4_e2m1_codec(), q, l), x);
}

// Per element: |decoded - v| <= a quarter of v (half a step of its binade: one
// mantissa bit), or a quarter of the block's scale (half the step below 1), with a
// little room for the two roundings of v * (6 / amax).
TEST(Fp4Blocks, EachValuesErrorIsWithinHalfAStepOfItsOwnBinade) {
  for (size_t block : {32u, 64u, 256u}) {
    const size_t n = 20 * block + 7;  // a partial last block that ends inside a byte
    const Layout l = layout_for(n, 3, block, 4);
    const std::vector<float> x = random_values(n, 3 + static_cast<unsigned>(block), block);
    std::vector<float> residual;
    const std::vector<uint8_t> q = quantized(fp4_e2m1_codec(), x, l, nullptr, &residual);
    const std::vector<float> back = decoded(fp4_e2m1_codec(), q, l);
    for (size_t i = 0; i < n; ++i) {
      const float scale = scale_at(q, l, i / block);
      const double bound =
          std::max(std::fabs(static_cast<double>(x[i])) / 4, static_cast<double>(scale) / 4) * 1.0001;
      ASSERT_LE(std::fabs(static_cast<double>(back[i]) - x[i]), bound) << "i " << i;
      ASSERT_EQ(residual[i], x[i] - back[i]) << "the residual is what the code lost";
    }
    const size_t last = n - 1;  // its byte's high nibble is padding: code 0
    const size_t chunk = last / l.chunk_elements(), within = last % l.chunk_elements();
    const uint8_t byte = q[chunk * l.chunk_bytes() + within / 2];
    EXPECT_EQ(byte >> 4, 0) << "the padding's code";
  }
}

TEST(Fp4Blocks, ZeroTinyAndNonFiniteBlocks) {
  const size_t block = 32;
  const Layout l = layout_for(3 * block, 1, block, 4);
  std::vector<float> x(3 * block, 0.0f);
  x[block + 1] = 1e-30f;  // a block with a max below 2^-64: scaled by 2^64 before its codes are taken
  x[2 * block + 3] = std::numeric_limits<float>::infinity();  // Inf: the whole block decodes as NaN
  const std::vector<uint8_t> q = quantized(fp4_e2m1_codec(), x, l);
  const std::vector<float> back = decoded(fp4_e2m1_codec(), q, l);
  EXPECT_EQ(scale_at(q, l, 0), 0.0f);
  for (size_t i = 0; i < block; ++i) EXPECT_EQ(back[i], 0.0f);
  EXPECT_NEAR(back[block + 1], 1e-30f, 1e-36f) << "the block's largest value, to the scale's rounding";
  EXPECT_TRUE(std::isnan(scale_at(q, l, 2)));
  for (size_t i = 2 * block; i < 3 * block; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
}

TEST(Fp4Blocks, TheOwnersSumIsTheRankOrderSumOfTheDecodedChunks) {
  const Codec& codec = fp4_e2m1_codec();
  const size_t ranks = 3, block = 64;
  const Layout l = layout_for(1001, ranks, block, 4);
  Layout one = l;
  one.chunks = 1;
  one.n = l.chunk_elements();
  std::vector<uint8_t> in(ranks * l.chunk_bytes());
  std::vector<float> expected(l.chunk_elements(), 0.0f);
  for (size_t r = 0; r < ranks; ++r) {
    const std::vector<uint8_t> q = quantized(codec, random_values(1001, 50 + static_cast<unsigned>(r)), l);
    std::memcpy(in.data() + r * l.chunk_bytes(), q.data(), l.chunk_bytes());  // everyone's chunk 0
    std::vector<float> d(one.n);
    dequantize(codec, q.data(), one, d.data(), kHost);
    for (size_t j = 0; j < d.size(); ++j) expected[j] += d[j];
  }
  std::vector<uint8_t> out(l.chunk_bytes());
  std::vector<float> residual(l.chunk_elements());
  sum_requantize(codec, in.data(), ranks, l, nullptr, out.data(), residual.data(), kHost);
  std::vector<float> sums(one.n);
  dequantize(codec, out.data(), one, sums.data(), kHost);
  for (size_t j = 0; j < sums.size(); ++j) ASSERT_EQ(sums[j] + residual[j], expected[j]) << j;
}

TEST(Fp4Blocks, ALayoutOfAnotherCodeWidthIsRefused) {
  const Layout bytes = layout_for(256, 1, 32);  // 8-bit codes
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(bytes.total_bytes());
  EXPECT_THROW(quantize(fp4_e2m1_codec(), x.data(), nullptr, bytes, q.data(), nullptr, kHost), Error);
  const Layout nibbles = layout_for(256, 1, 32, 4);
  EXPECT_THROW(dequantize(int8_codec(), q.data(), nibbles, x.data(), kHost), Error);
  EXPECT_THROW(layout_for(256, 1, 32, 2), Error);
}

TEST_F(QuantGpu, Fp4OperationsMatchTheHostTwinsBitForBit) {
  expect_gpu_matches_host(fp4_e2m1_codec());
}

}  // namespace
}  // namespace gradcomm::kernels::quant
