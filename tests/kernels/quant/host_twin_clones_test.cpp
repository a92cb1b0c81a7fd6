// The host twins a Codec holds are clones picked by the CPU (AVX2 where it has it,
// quant_host.hpp's Twins): each must give the bits of the plain template, compiled
// here without them, on random data with Inf, NaN, subnormals and a block of zeros,
// odd sizes, several chunks, with and without error feedback.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/quant/codec_checks.hpp"
#include "kernels/quant/fp4.hpp"
#include "kernels/quant/fp8.hpp"
#include "kernels/quant/int8.hpp"
#include "kernels/quant/quant_host.hpp"

namespace gradcomm::kernels::quant {
namespace {

std::vector<float> awkward_values(size_t n, unsigned seed) {
  std::vector<float> v = random_values(n, seed);
  const float specials[] = {std::numeric_limits<float>::infinity(), std::nanf(""), 1e-40f, -1e-45f, -0.0f};
  for (size_t i = 0; i < 5 && 3 + 97 * i < n; ++i) v[3 + 97 * i] = specials[i];
  for (size_t i = 256; i < std::min(n, size_t{320}); ++i) v[i] = 0.0f;  // a block of zeros (blocks of 64)
  return v;
}

template <class F>
void expect_clones_are_the_template(const Codec& codec) {
  for (size_t n : {size_t{1}, size_t{255}, size_t{1037}, size_t{64 * 33 + 5}})
    for (size_t chunks : {size_t{1}, size_t{3}})
      for (bool feedback : {false, true}) {
        const Layout l = layout_for(n, chunks, 64, F::kBits);
        const std::vector<float> x = awkward_values(n, static_cast<unsigned>(n + chunks));
        const std::vector<float> e = random_values(l.chunks * l.chunk_elements(), 7);
        const float* ep = feedback ? e.data() : nullptr;
        const std::string what = std::string(codec.name) + ", n " + std::to_string(n) + ", chunks " +
                                 std::to_string(chunks) + (feedback ? ", error feedback" : "");

        std::vector<uint8_t> plain(l.total_bytes(), 0xAB), cloned(l.total_bytes(), 0xAB);
        std::vector<float> plain_r(n, -1.0f), cloned_r(n, -1.0f);
        host::quantize<F>(x.data(), ep, l, plain.data(), plain_r.data());
        codec.host_quantize(x.data(), ep, l, cloned.data(), cloned_r.data());
        EXPECT_EQ(cloned, plain) << what << ": quantize";
        EXPECT_EQ(std::memcmp(cloned_r.data(), plain_r.data(), n * sizeof(float)), 0) << what << ": residual";

        // The owner's sum: the quantized bucket's chunks as the ranks' contributions.
        std::vector<uint8_t> plain_s(l.chunk_bytes(), 0xCD), cloned_s(l.chunk_bytes(), 0xCD);
        std::vector<float> plain_sr(l.chunk_elements(), -1.0f), cloned_sr(l.chunk_elements(), -1.0f);
        host::sum_requantize<F>(plain.data(), l.chunks, l, ep, plain_s.data(), plain_sr.data());
        codec.host_sum_requantize(plain.data(), l.chunks, l, ep, cloned_s.data(), cloned_sr.data());
        EXPECT_EQ(cloned_s, plain_s) << what << ": sum_requantize";
        EXPECT_EQ(std::memcmp(cloned_sr.data(), plain_sr.data(), plain_sr.size() * sizeof(float)), 0)
            << what << ": sum_requantize's residual";

        std::vector<float> plain_d(n, -1.0f), cloned_d(n, -1.0f);
        host::dequantize<F>(plain.data(), l, plain_d.data());
        codec.host_dequantize(plain.data(), l, cloned_d.data());
        EXPECT_EQ(std::memcmp(cloned_d.data(), plain_d.data(), n * sizeof(float)), 0)
            << what << ": dequantize";
      }
}

TEST(HostTwinClones, Int8IsTheTemplateBitForBit) {
  expect_clones_are_the_template<Int8>(int8_codec());
}
TEST(HostTwinClones, Fp8IsTheTemplateBitForBit) {
  expect_clones_are_the_template<Fp8E4M3>(fp8_e4m3_codec());
  expect_clones_are_the_template<Fp8E5M2>(fp8_e5m2_codec());
}
TEST(HostTwinClones, Fp4IsTheTemplateBitForBit) {
  expect_clones_are_the_template<Fp4E2M1>(fp4_e2m1_codec());
}

}  // namespace
}  // namespace gradcomm::kernels::quant
