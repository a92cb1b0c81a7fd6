// The fp8 formats of the quantized blocks (kernels/quant/fp8.*): every finite code
// round-trips; the code of any value is the nearest one (ties to the even code),
// checked against a search over all 256 codes on random values of every binade,
// the midpoints between codes and the subnormals; the block operations' error bound
// relative to each value; zero, tiny and Inf/NaN blocks; the owner's sum; and the
// CUDA paths against the host twins, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quant/codec_checks.hpp"
#include "kernels/quant/fp8.hpp"

namespace gradcomm::kernels::quant {
namespace {

template <class F>
bool is_finite_code(uint8_t c) {
  return std::isfinite(F::value(c)) && (c & 0x7f) <= (std::is_same<F, Fp8E4M3>::value ? 0x7e : 0x7b);
}

// The reference: the finite code nearest to x by search; a tie goes to the code
// whose last mantissa bit is 0.
template <class F>
float nearest_value(float x) {
  float best = 0.0f;
  double best_distance = INFINITY;
  int best_code = 0;
  for (int c = 0; c < 256; ++c) {
    if (!is_finite_code<F>(static_cast<uint8_t>(c))) continue;
    const double d = std::fabs(static_cast<double>(F::value(static_cast<uint8_t>(c))) - x);
    if (d < best_distance || (d == best_distance && (c & 1) == 0 && (best_code & 1) == 1)) {
      best_distance = d;
      best = F::value(static_cast<uint8_t>(c));
      best_code = c;
    }
  }
  return best;
}

template <class F>
void expect_nearest_codes() {
  for (int c = 0; c < 256; ++c) {  // every finite code round-trips (-0 encodes as +0)
    const uint8_t code = static_cast<uint8_t>(c);
    if (!is_finite_code<F>(code) || code == 0x80) continue;
    ASSERT_EQ(F::encode(F::value(code)), code) << "code " << c;
  }
  std::vector<float> xs;
  for (int c = 0; c < 255; ++c) {  // the midpoints between neighbouring codes, both signs
    const uint8_t a = static_cast<uint8_t>(c), b = static_cast<uint8_t>(c + 1);
    if (c == 0x7f || !is_finite_code<F>(a) || !is_finite_code<F>(b)) continue;
    const float mid = (F::value(a) + F::value(b)) / 2.0f;
    xs.push_back(mid);
    xs.push_back(-mid);
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  std::uniform_int_distribution<int> binade(-30, 20);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(unit(rng), binade(rng));
    if (x <= F::kMax) xs.push_back(i % 2 ? -x : x);
  }
  xs.push_back(F::kMax);
  xs.push_back(std::numeric_limits<float>::denorm_min());
  for (float x : xs) {
    const float got = F::value(F::encode(x));
    ASSERT_EQ(got, nearest_value<F>(x)) << "x = " << x;
  }
  EXPECT_EQ(F::encode(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(F::encode(std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(F::value(F::encode(F::kMax * 1.0000001f)), F::kMax) << "past the largest code: the largest";
}

TEST(Fp8Codes, E4M3CodesAreTheNearestWithTiesToEven) {
  expect_nearest_codes<Fp8E4M3>();
}
TEST(Fp8Codes, E5M2CodesAreTheNearestWithTiesToEven) {
  expect_nearest_codes<Fp8E5M2>();
}

TEST(Fp8Codes, KnownValuesOfBothFormats) {
  EXPECT_EQ(Fp8E4M3::value(0x7e), 448.0f);
  EXPECT_EQ(Fp8E4M3::value(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(Fp8E4M3::value(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(Fp8E4M3::value(0x38), 1.0f);
  EXPECT_EQ(Fp8E4M3::value(0xb8), -1.0f);
  EXPECT_EQ(Fp8E5M2::value(0x7b), 57344.0f);
  EXPECT_EQ(Fp8E5M2::value(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(Fp8E5M2::value(0x3c), 1.0f);
}

// Per element: |decoded - v| <= half a step of v's binade (2^-(M+1) |v| for a
// normal code), or half the subnormal step (times the block's scale) for the
// smallest values, with a little room for the two roundings of v * (max / amax).
template <class F>
void expect_block_error_bound(const Codec& codec, int man_bits, int min_exp) {
  for (size_t block : {32u, 256u}) {
    const size_t n = 20 * block + 7;  // a partial last block
    const Layout l = layout_for(n, 3, block);
    const std::vector<float> x = random_values(n, 3 + static_cast<unsigned>(block), block);
    std::vector<float> residual;
    const std::vector<uint8_t> q = quantized(codec, x, l, nullptr, &residual);
    const std::vector<float> back = decoded(codec, q, l);
    for (size_t i = 0; i < n; ++i) {
      const float scale = scale_at(q, l, i / block);
      const double bound = std::max(std::ldexp(static_cast<double>(std::fabs(x[i])), -(man_bits + 1)),
                                    std::ldexp(static_cast<double>(scale), min_exp - man_bits - 1)) *
                           1.0001;
      ASSERT_LE(std::fabs(static_cast<double>(back[i]) - x[i]), bound) << codec.name << " i " << i;
      ASSERT_EQ(residual[i], x[i] - back[i]) << "the residual is what the code lost";
    }
  }
}

TEST(Fp8Blocks, EachValuesErrorIsWithinHalfAStepOfItsOwnBinade) {
  expect_block_error_bound<Fp8E4M3>(fp8_e4m3_codec(), 3, -6);
  expect_block_error_bound<Fp8E5M2>(fp8_e5m2_codec(), 2, -14);
}

TEST(Fp8Blocks, ZeroTinyAndNonFiniteBlocks) {
  for (const Codec* codec : {&fp8_e4m3_codec(), &fp8_e5m2_codec()}) {
    const size_t block = 32;
    const Layout l = layout_for(3 * block, 1, block);
    std::vector<float> x(3 * block, 0.0f);
    x[block] = 1e-30f;  // a block with a max below 2^-64: scaled by 2^64 before its codes are taken
    x[2 * block + 3] = std::numeric_limits<float>::infinity();  // Inf: the whole block decodes as NaN
    const std::vector<uint8_t> q = quantized(*codec, x, l);
    const std::vector<float> back = decoded(*codec, q, l);
    EXPECT_EQ(scale_at(q, l, 0), 0.0f) << codec->name;
    for (size_t i = 0; i < block; ++i) EXPECT_EQ(back[i], 0.0f);
    EXPECT_NEAR(back[block], 1e-30f, 1e-36f)
        << codec->name << ": the block's largest value, to the scale's rounding";
    EXPECT_TRUE(std::isnan(scale_at(q, l, 2)));
    for (size_t i = 2 * block; i < 3 * block; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
  }
}

TEST(Fp8Blocks, TheOwnersSumIsTheRankOrderSumOfTheDecodedChunks) {
  const Codec& codec = fp8_e4m3_codec();
  const size_t ranks = 3, block = 64;
  const Layout l = layout_for(1000, ranks, block);
  std::vector<uint8_t> in(ranks * l.chunk_bytes());
  std::vector<float> expected(l.chunk_elements(), 0.0f);
  for (size_t r = 0; r < ranks; ++r) {
    const std::vector<uint8_t> q = quantized(codec, random_values(1000, 50 + static_cast<unsigned>(r)), l);
    std::memcpy(in.data() + r * l.chunk_bytes(), q.data(), l.chunk_bytes());  // everyone's chunk 0
    Layout one = l;
    one.chunks = 1;
    one.n = l.chunk_elements();
    std::vector<float> d(one.n);
    dequantize(codec, q.data(), one, d.data(), kHost);
    for (size_t j = 0; j < d.size(); ++j) expected[j] += d[j];
  }
  std::vector<uint8_t> out(l.chunk_bytes());
  std::vector<float> residual(l.chunk_elements());
  sum_requantize(codec, in.data(), ranks, l, nullptr, out.data(), residual.data(), kHost);
  Layout one = l;
  one.chunks = 1;
  one.n = l.chunk_elements();
  std::vector<float> sums(one.n);
  dequantize(codec, out.data(), one, sums.data(), kHost);
  for (size_t j = 0; j < sums.size(); ++j) ASSERT_EQ(sums[j] + residual[j], expected[j]) << j;
}

TEST_F(QuantGpu, Fp8OperationsMatchTheHostTwinsBitForBit) {
  expect_gpu_matches_host(fp8_e4m3_codec());
  expect_gpu_matches_host(fp8_e5m2_codec());
}

}  // namespace
}  // namespace gradcomm::kernels::quant
