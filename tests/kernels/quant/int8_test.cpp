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
#include "kernels/quant/int8.hpp"
#include "support/gpu.hpp"

namespace gradcomm::kernels::quant {
namespace {

const Target kHost{gcommHostDevice(), nullptr};

// Values whose magnitude changes from block to block by up to 2^±20.
std::vector<float> random_values(size_t n, unsigned seed, size_t block = 64) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(n);
  float magnitude = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    if (i % block == 0) magnitude = std::ldexp(1.0f, exponent(rng));
    v[i] = normal(rng) * magnitude;
  }
  return v;
}

std::vector<uint8_t> quantized(const std::vector<float>& x, const Layout& l, const float* e = nullptr,
                               std::vector<float>* residual = nullptr) {
  std::vector<uint8_t> out(l.total_bytes(), 0xAB);
  if (residual != nullptr) residual->assign(x.size(), -1.0f);
  quantize(int8_codec(), x.data(), e, l, out.data(), residual != nullptr ? residual->data() : nullptr, kHost);
  return out;
}

std::vector<float> decoded(const std::vector<uint8_t>& q, const Layout& l) {
  std::vector<float> out(l.n);
  dequantize(int8_codec(), q.data(), l, out.data(), kHost);
  return out;
}

float scale_at(const std::vector<uint8_t>& q, const Layout& l, size_t block_index) {
  float s;
  const size_t chunk = block_index / l.blocks_per_chunk, b = block_index % l.blocks_per_chunk;
  std::memcpy(&s, q.data() + chunk * l.chunk_bytes() + l.chunk_elements() + b * sizeof(float), sizeof s);
  return s;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Bit for bit, except that any NaN equals any NaN: a GPU's arithmetic gives the
// canonical NaN where the host's passes an operand's payload on.
bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(same_bits(a[i], b[i]) || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
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
      for (size_t j = i / 128 * 128; j < std::min(n, i / 128 * 128 + 128); ++j) amax = std::max(amax, std::fabs(x[j]));
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

// ---- CUDA paths against the host twins ----

class QuantGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    GCOMM_SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    for (void* p : owned_) cudaFree(p);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  template <class T>
  T* upload(const std::vector<T>& h) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(h.size() * sizeof(T), 1)), cudaSuccess);
    if (!h.empty()) {
      EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> download(const T* d, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    if (n > 0) {
      EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return h;
  }
  Target gpu() const { return Target{gcommCudaDevice(0), stream_}; }
  cudaStream_t stream_ = nullptr;
  std::vector<void*> owned_;
};

TEST_F(QuantGpu, EveryOperationMatchesTheHostTwinBitForBit) {
  for (size_t block : {32u, 128u, 256u, 1024u, 4096u})
    for (size_t n : {0u, 1u, 1000u, 65537u}) {
      const size_t ranks = 3;
      const Layout l = layout_for(n, ranks, block);
      std::vector<float> x = random_values(n, 40 + static_cast<unsigned>(n + block), block);
      std::vector<float> e = random_values(n, 41 + static_cast<unsigned>(n), block);
      if (n >= 3 * block) {
        x[7] = std::numeric_limits<float>::quiet_NaN();
        x[n - 1] = std::numeric_limits<float>::infinity();
        for (size_t i = block; i < 2 * block; ++i) x[i] = e[i] = 0.0f;  // a block of zeros (scale 0)
        x[2 * block] = 1e-38f;  // a block with a tiny max
        for (size_t i = 2 * block + 1; i < 3 * block; ++i) x[i] = e[i] = 0.0f;
      }
      std::vector<float> host_residual;
      const std::vector<uint8_t> host_q = quantized(x, l, e.data(), &host_residual);
      float* dx = upload(x);
      const float* de = upload(e);
      uint8_t* dq = upload(std::vector<uint8_t>(l.total_bytes()));
      quantize(int8_codec(), dx, de, l, dq, dx, gpu());  // residual in place, as the strategy does
      ASSERT_EQ(download(dq, l.total_bytes()), host_q) << "quantize, block " << block << ", n " << n;
      const std::vector<float> residual = download(dx, n);
      ASSERT_TRUE(same_values(residual, host_residual)) << "residual";

      std::vector<uint8_t> host_sum(l.chunk_bytes());
      if (l.chunk_elements() > 0) {
        const std::vector<float> e2 = random_values(l.chunk_elements(), 43, block);
        std::vector<float> host_r2(l.chunk_elements());
        sum_requantize(int8_codec(), host_q.data(), ranks, l, e2.data(), host_sum.data(), host_r2.data(), kHost);
        uint8_t* dsum = upload(std::vector<uint8_t>(l.chunk_bytes()));
        float* dr2 = upload(std::vector<float>(l.chunk_elements()));
        sum_requantize(int8_codec(), dq, ranks, l, upload(e2), dsum, dr2, gpu());
        ASSERT_EQ(download(dsum, l.chunk_bytes()), host_sum) << "sum_requantize, block " << block << ", n " << n;
        const std::vector<float> r2 = download(dr2, l.chunk_elements());
        ASSERT_TRUE(same_values(r2, host_r2)) << "owner residual";
      }
      const std::vector<float> host_back = decoded(host_q, l);
      float* dback = upload(std::vector<float>(n));
      dequantize(int8_codec(), dq, l, dback, gpu());
      const std::vector<float> back = download(dback, n);
      ASSERT_TRUE(same_values(back, host_back)) << "dequantize";
    }
}

}  // namespace
}  // namespace gradcomm::kernels::quant
