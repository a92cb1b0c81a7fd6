// What every format's test of the quantized blocks (kernels/quant/) shares: random
// values whose magnitude changes block to block, quantizing and decoding through a
// Codec on the host, NaN-tolerant comparison, and the GPU fixture whose check runs
// every operation of a codec on GPU 0 against its host twin.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quant/quant.hpp"
#include "support/gpu.hpp"

namespace gradcomm::kernels::quant {

inline const Target kHost{gcommHostDevice(), nullptr};

// Values whose magnitude changes from block to block by up to 2^±20.
inline std::vector<float> random_values(size_t n, unsigned seed, size_t block = 64) {
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

inline std::vector<uint8_t> quantized(const Codec& codec, const std::vector<float>& x, const Layout& l,
                                      const float* e = nullptr, std::vector<float>* residual = nullptr) {
  std::vector<uint8_t> out(l.total_bytes(), 0xAB);
  if (residual != nullptr) residual->assign(x.size(), -1.0f);
  quantize(codec, x.data(), e, l, out.data(), residual != nullptr ? residual->data() : nullptr, kHost);
  return out;
}

inline std::vector<float> decoded(const Codec& codec, const std::vector<uint8_t>& q, const Layout& l) {
  std::vector<float> out(l.n);
  dequantize(codec, q.data(), l, out.data(), kHost);
  return out;
}

inline float scale_at(const std::vector<uint8_t>& q, const Layout& l, size_t block_index) {
  float s;
  const size_t chunk = block_index / l.blocks_per_chunk, b = block_index % l.blocks_per_chunk;
  std::memcpy(&s, q.data() + chunk * l.chunk_bytes() + l.chunk_code_bytes() + b * sizeof(float), sizeof s);
  return s;
}

inline bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Bit for bit, except that any NaN equals any NaN: a GPU's arithmetic gives the
// canonical NaN where the host's passes an operand's payload on.
inline bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(same_bits(a[i], b[i]) || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

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
  void expect_gpu_matches_host(const Codec& codec);
  cudaStream_t stream_ = nullptr;
  std::vector<void*> owned_;
};

// Every operation of `codec` on GPU 0 against its host twin, bit for bit (NaN for NaN).
inline void QuantGpu::expect_gpu_matches_host(const Codec& codec) {
  for (size_t block : {32u, 128u, 256u, 1024u, 4096u})
    for (size_t n : {0u, 1u, 1000u, 65537u}) {
      const size_t ranks = 3;
      const Layout l = layout_for(n, ranks, block, codec.code_bits);
      std::vector<float> x = random_values(n, 40 + static_cast<unsigned>(n + block), block);
      std::vector<float> e = random_values(n, 41 + static_cast<unsigned>(n), block);
      if (n >= 3 * block) {
        x[7] = std::numeric_limits<float>::quiet_NaN();
        x[n - 1] = std::numeric_limits<float>::infinity();
        for (size_t i = block; i < 2 * block; ++i) x[i] = e[i] = 0.0f;  // a block of zeros (scale 0)
        x[2 * block] = 1e-38f;                                          // a block with a tiny max
        for (size_t i = 2 * block + 1; i < 3 * block; ++i) x[i] = e[i] = 0.0f;
      }
      std::vector<float> host_residual;
      const std::vector<uint8_t> host_q = quantized(codec, x, l, e.data(), &host_residual);
      float* dx = upload(x);
      const float* de = upload(e);
      uint8_t* dq = upload(std::vector<uint8_t>(l.total_bytes()));
      quantize(codec, dx, de, l, dq, dx, gpu());  // residual in place, as the strategy does
      ASSERT_EQ(download(dq, l.total_bytes()), host_q)
          << codec.name << ": quantize, block " << block << ", n " << n;
      const std::vector<float> residual = download(dx, n);
      ASSERT_TRUE(same_values(residual, host_residual)) << "residual";

      std::vector<uint8_t> host_sum(l.chunk_bytes());
      if (l.chunk_elements() > 0) {
        const std::vector<float> e2 = random_values(l.chunk_elements(), 43, block);
        std::vector<float> host_r2(l.chunk_elements());
        sum_requantize(codec, host_q.data(), ranks, l, e2.data(), host_sum.data(), host_r2.data(), kHost);
        uint8_t* dsum = upload(std::vector<uint8_t>(l.chunk_bytes()));
        float* dr2 = upload(std::vector<float>(l.chunk_elements()));
        sum_requantize(codec, dq, ranks, l, upload(e2), dsum, dr2, gpu());
        ASSERT_EQ(download(dsum, l.chunk_bytes()), host_sum)
            << codec.name << ": sum_requantize, block " << block << ", n " << n;
        const std::vector<float> r2 = download(dr2, l.chunk_elements());
        ASSERT_TRUE(same_values(r2, host_r2)) << "owner residual";
      }
      const std::vector<float> host_back = decoded(codec, host_q, l);
      float* dback = upload(std::vector<float>(n));
      dequantize(codec, dq, l, dback, gpu());
      const std::vector<float> back = download(dback, n);
      ASSERT_TRUE(same_values(back, host_back)) << "dequantize";
    }
}

}  // namespace gradcomm::kernels::quant
