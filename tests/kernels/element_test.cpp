// The element conversions against CUDA's own host conversions, on edge values and
// on millions of random bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/element.hpp"
#include "reference.hpp"

namespace gradcomm::kernels {
namespace {

using test::ref_bf16;
using test::ref_f16;

float from_bits(uint32_t u) {
  return bits_to_float(u);
}

TEST(Element, F16EdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float in;
    uint16_t out;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},
      {65519.99f, 0x7bff},
      {65520.0f, 0x7c00},
      {1e10f, 0x7c00},
      {inf, 0x7c00},
      {-inf, 0xfc00},
      {5.9604645e-8f, 0x0001} /* smallest subnormal */,
      {2.9802322e-8f, 0x0000} /* 2^-25: tie to even 0 */,
      {4.4703484e-8f, 0x0001} /* 1.5 * 2^-25 */,
      {6.1035156e-5f, 0x0400} /* smallest normal */,
      {1.0009766f, 0x3c01},
      {1.00048828125f, 0x3c00} /* tie, even */,
      {1.00146484375f, 0x3c02} /* tie, up to even */,
  };
  for (const Case& c : cases) {
    EXPECT_EQ(f32_to_f16(c.in), c.out) << c.in;
    EXPECT_EQ(f32_to_f16(c.in), ref_f16(c.in)) << c.in;
  }
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(-std::nanf("")))));
}

TEST(Element, F16MatchesCudaOnRandomBits) {
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    float f = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), ref_f16(f)) << std::hexfloat << f;
  }
}

TEST(Element, F16ToF32IsExactForEveryValue) {
  for (uint32_t u = 0; u < 65536; ++u) {
    float ours = f16_to_f32(static_cast<uint16_t>(u));
    float ref = test::ref_from_f16(static_cast<uint16_t>(u));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(ours)) << u;
    } else {
      ASSERT_EQ(float_to_bits(ours), float_to_bits(ref)) << u;
      ASSERT_EQ(f32_to_f16(ours), u) << "round trip of " << u;
    }
  }
}

TEST(Element, Bf16MatchesCudaOnRandomBitsAndEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, 1.0f, inf, -inf, 3.3895314e38f, std::numeric_limits<float>::max(), 1.00390625f,
                  1.01171875f, 1e-40f}) {
    EXPECT_EQ(f32_to_bf16(f), ref_bf16(f)) << f;
  }
  std::mt19937 rng(2);
  for (int i = 0; i < 2000000; ++i) {
    float f = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), ref_bf16(f)) << std::hexfloat << f;
  }
}

#ifdef GRADCOMM_TEST_CUDA_HALF
// The arithmetic references (tests/support/plain_half.hpp) that a build without
// CUDA checks the kernels against agree with CUDA's own conversions.
TEST(Element, PlainReferenceAgreesWithCuda) {
  std::mt19937 rng(3);
  for (int i = 0; i < 2000000; ++i) {
    float f = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(test::plain_f16(f), ref_f16(f)) << std::hexfloat << f;
    ASSERT_EQ(test::plain_bf16(f), ref_bf16(f)) << std::hexfloat << f;
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 2.9802322e-8f, 4.4703484e-8f, 1.00048828125f,
                  3.3895314e38f, std::numeric_limits<float>::max(), 1e-40f, 1.00390625f}) {
    EXPECT_EQ(test::plain_f16(f), ref_f16(f)) << std::hexfloat << f;
    EXPECT_EQ(test::plain_bf16(f), ref_bf16(f)) << std::hexfloat << f;
  }
  for (uint32_t u = 0; u < 65536; ++u) {
    const float plain = test::plain_from_f16(static_cast<uint16_t>(u)),
                cuda = test::ref_from_f16(static_cast<uint16_t>(u));
    if (std::isnan(cuda)) {
      ASSERT_TRUE(std::isnan(plain)) << u;
    } else {
      ASSERT_EQ(float_to_bits(plain), float_to_bits(cuda)) << u;
    }
  }
}
#endif

TEST(Element, IsFinite) {
  EXPECT_TRUE(is_finite(1.0f));
  EXPECT_TRUE(is_finite(-std::numeric_limits<float>::max()));
  EXPECT_FALSE(is_finite(std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(is_finite(std::nanf("")));
}

}  // namespace
}  // namespace gradcomm::kernels
