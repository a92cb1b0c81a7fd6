// The int8 format of the quantized blocks (kernels/quant/int8.*): layouts, exact round
// trips of representable blocks, the per-element error bound, zero blocks, one huge
// value, Inf/NaN, error feedback, odd tails and padding, the owner's sum and
// requantization; and the CUDA paths against the host twins, bit for bit.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "kernels/quant/codec_checks.hpp"
#include "kernels/quant/int8.hpp"

namespace gradcomm::kernels::quant {
namespace {

const Codec& kInt8 = int8_codec();

std::vector<uint8_t> quantized(const std::vector<float>& x, const Layout& l, const float* e = nullptr,
                               std::vector<float>* residual = nullptr) {
  return quant::quantized(kInt8, x, l, e, residual);
}

std::vector<float> decoded(const std::vector<uint8_t>& q, const Layout& l) {
  return quant::decoded(kInt8, q, l);
}

TEST(QuantLayout, ChunksPadTheBucketAndBadBlocksAreRefused) {
  Layout l = layout_for(1000, 3, 128);  // 8 blocks -> 3 per chunk, 1152 elements
  EXPECT_EQ(l.blocks_per_chunk, 3u);
  EXPECT_EQ(l.chunk_elements(), 384u);
  EXPECT_EQ(l.chunk_bytes(), 384u + 12u);
  EXPECT_EQ(l.padded(), 1152u);
  EXPECT_EQ(layout_for(0, 4, 256).total_bytes(), 0u);
  for (size_t bad : {0, 16, 100, 8192}) EXPECT_THROW(layout_for(10, 2, bad), Error) << bad;
  EXPECT_THROW(layout_for(10, 0, 256), Error);
}

TEST(QuantHost, RepresentableBlocksRoundTripBitForBit) {
  // Each block: codes in -127..127 (one of them +-127) times a power of two.
  const Layout l = layout_for(5 * 128 + 7, 2, 128);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> code(-127, 127);
  std::vector<float> x(l.n);
  for (size_t i = 0; i < l.n; ++i) {
    const float scale = std::ldexp(1.0f, static_cast<int>(i / 128) * 3 - 7);
    x[i] = static_cast<float>(i % 128 == 5 ? 127 : code(rng)) * scale;
  }
  std::vector<float> residual;
  const std::vector<float> back = decoded(quantized(x, l, nullptr, &residual), l);
  for (size_t i = 0; i < l.n; ++i) {
    ASSERT_TRUE(same_bits(back[i], x[i])) << i << ": " << back[i] << " vs " << x[i];
    ASSERT_EQ(residual[i], 0.0f) << i;
  }
}

TEST(QuantHost, ErrorIsWithinHalfAStepOfEachBlockAndTheResidualIsExact) {
  for (size_t n : {1u, 31u, 128u, 1000u, 12345u}) {
    const Layout l = layout_for(n, 3, 128);
    const std::vector<float> x = random_values(n, 7 + static_cast<unsigned>(n));
    std::vector<float> residual;
    const std::vector<uint8_t> q = quantized(x, l, nullptr, &residual);
    const std::vector<float> back = decoded(q, l);
    for (size_t i = 0; i < n; ++i) {
      float amax = 0.0f;
      for (size_t j = i / 128 * 128; j < std::min(n, i / 128 * 128 + 128); ++j)
        amax = std::max(amax, std::fabs(x[j]));
      // Half a step (amax / 254) plus the rounding of code * scale.
      ASSERT_LE(std::fabs(back[i] - x[i]), amax / 254.0f * (1.0f + 1e-5f)) << "n " << n << " element " << i;
      ASSERT_EQ(residual[i], x[i] - back[i]) << "n " << n << " element " << i;
    }
  }
}

TEST(QuantHost, ZeroBlocksHaveScaleZeroAndOneHugeValueFlushesTheRestToZero) {
  const Layout l = layout_for(256, 1, 64);
  std::vector<float> x(256, 0.0f);
  for (size_t i = 64; i < 128; ++i) x[i] = 1e-3f;
  x[100] = 3e38f;  // near FLT_MAX: no Inf from the scale or the codes
  const std::vector<uint8_t> q = quantized(x, l);
  const std::vector<float> back = decoded(q, l);
  EXPECT_EQ(scale_at(q, l, 0), 0.0f);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(back[i], 0.0f) << i;
  EXPECT_TRUE(std::isfinite(scale_at(q, l, 1)));
  EXPECT_NEAR(back[100], 3e38f, 3e38f / 254.0f);
  for (size_t i = 64; i < 128; ++i)
    if (i != 100) {
      ASSERT_EQ(back[i], 0.0f) << i;
    }
}

TEST(QuantHost, BlocksWithATinyMaxStayWithinTheirBound) {
  // 127 / max overflows for max below ~3.7e-37: such blocks are scaled by 2^64 first.
  const Layout l = layout_for(96, 1, 32);
  std::vector<float> x(96);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < 96; ++i) x[i] = u(rng) * (i < 32 ? 1e-38f : i < 64 ? 1e-44f : 2e-37f);
  x[10] = 0.0f;
  const std::vector<float> back = decoded(quantized(x, l), l);
  for (size_t b = 0; b < 3; ++b) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      ASSERT_TRUE(std::isfinite(back[i])) << i;
      // Subnormal scales lose bits: allow their spacing (2^-149) on top of half a
      // step; below 127 * 2^-149 the scale underflows to 0 and the block decodes as 0.
      const float bound = amax < 1.8e-43f ? amax : amax / 254.0f * 1.001f + 2.0f * 1.4e-45f;
      ASSERT_LE(std::fabs(back[i] - x[i]), bound) << i << ": " << back[i] << " vs " << x[i];
    }
  }
  EXPECT_EQ(back[10], 0.0f);
}

TEST(QuantHost, InfOrNanPoisonsItsBlockOnlyAndNeverSilently) {
  const Layout l = layout_for(300, 2, 32);
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x = random_values(300, 5);
    x[70] = bad;  // block 2 (elements 64..95)
    const std::vector<float> back = decoded(quantized(x, l), l);
    for (size_t i = 0; i < 300; ++i) {
      if (i / 32 == 2)
        ASSERT_TRUE(std::isnan(back[i])) << i;
      else
        ASSERT_TRUE(std::isfinite(back[i])) << i;
    }
  }
}

TEST(QuantHost, ErrorFeedbackIsAddedBeforeQuantizing) {
  const Layout l = layout_for(777, 2, 256);
  const std::vector<float> x = random_values(777, 11), e = random_values(777, 12);
  std::vector<float> sum(777), r1, r2;
  for (size_t i = 0; i < 777; ++i) sum[i] = x[i] + e[i];
  EXPECT_EQ(quantized(x, l, e.data(), &r1), quantized(sum, l, nullptr, &r2));
  EXPECT_EQ(r1, r2);
  // The residual may overwrite x in place.
  std::vector<float> inplace = x;
  std::vector<uint8_t> q(l.total_bytes());
  quantize(int8_codec(), inplace.data(), e.data(), l, q.data(), inplace.data(), kHost);
  EXPECT_EQ(inplace, r1);
}

TEST(QuantHost, OwnersSumIsTheRequantizedSumOfTheDecodedChunksInRankOrder) {
  for (size_t ranks : {1u, 3u, 4u}) {
    const Layout l = layout_for(1000, ranks, 128);
    // Rank r's chunk `mine` (here chunk 0 of rank r's bucket), as the all-to-all delivers it.
    std::vector<uint8_t> in(ranks * l.chunk_bytes());
    for (size_t r = 0; r < ranks; ++r) {
      const std::vector<uint8_t> q = quantized(random_values(1000, 20 + static_cast<unsigned>(r)), l);
      std::memcpy(in.data() + r * l.chunk_bytes(), q.data(), l.chunk_bytes());
    }
    std::vector<uint8_t> out(l.chunk_bytes());
    sum_requantize(int8_codec(), in.data(), ranks, l, nullptr, out.data(), nullptr, kHost);
    // The reference: decode each rank's chunk, sum in rank order, quantize the sums.
    const Layout one = layout_for(l.chunk_elements(), 1, 128);
    std::vector<float> sums(l.chunk_elements(), 0.0f);
    for (size_t r = 0; r < ranks; ++r) {
      std::vector<float> d(l.chunk_elements());
      dequantize(int8_codec(), in.data() + r * l.chunk_bytes(), one, d.data(), kHost);
      for (size_t i = 0; i < d.size(); ++i) sums[i] += d[i];
    }
    EXPECT_EQ(out, quantized(sums, one)) << ranks << " ranks";
    // With the owner's error feedback: added after the ranks' sum; the residual is exact.
    const std::vector<float> e = random_values(l.chunk_elements(), 77);
    std::vector<float> residual(l.chunk_elements()), with_e(l.chunk_elements()), want_residual;
    sum_requantize(int8_codec(), in.data(), ranks, l, e.data(), out.data(), residual.data(), kHost);
    for (size_t i = 0; i < sums.size(); ++i) with_e[i] = sums[i] + e[i];
    EXPECT_EQ(out, quantized(with_e, one, nullptr, &want_residual)) << ranks << " ranks, with e";
    EXPECT_EQ(residual, want_residual);
  }
}

TEST(QuantHost, NullBuffersAreRefused) {
  const Layout l = layout_for(10, 1, 32);
  std::vector<uint8_t> q(l.total_bytes());
  float x[10] = {};
  EXPECT_THROW(quantize(int8_codec(), nullptr, nullptr, l, q.data(), nullptr, kHost), Error);
  EXPECT_THROW(quantize(int8_codec(), x, nullptr, l, nullptr, nullptr, kHost), Error);
  EXPECT_THROW(sum_requantize(int8_codec(), nullptr, 1, l, nullptr, q.data(), nullptr, kHost), Error);
  EXPECT_THROW(sum_requantize(int8_codec(), q.data(), 0, l, nullptr, q.data(), nullptr, kHost), Error);
  EXPECT_THROW(dequantize(int8_codec(), q.data(), l, nullptr, kHost), Error);
}

TEST_F(QuantGpu, EveryOperationMatchesTheHostTwinBitForBit) {
  expect_gpu_matches_host(kInt8);
}

}  // namespace
}  // namespace gradcomm::kernels::quant
