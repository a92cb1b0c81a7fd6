// Every CUDA kernel against its host twin on the same random inputs (runs on a
// GPU machine; skips here with the reason).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/grad_scaler.hpp"
#include "kernels/ops.hpp"
#include "reference.hpp"
#include "support/gpu.hpp"

namespace gradcomm::kernels {
namespace {

using test::random_buffer;
using test::TypedBuffer;

const gcommDataType_t kDtypes[] = {gcommFloat32, gcommFloat16, gcommBfloat16};

// A device copy of a host TypedBuffer (same byte layout, so misalignment carries over).
struct DeviceCopy {
  void* base = nullptr;
  TypedBuffer* host;
  explicit DeviceCopy(TypedBuffer& b) : host(&b) {
    EXPECT_EQ(cudaMalloc(&base, b.bytes.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(base, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceCopy() { cudaFree(base); }
  void* data() const { return static_cast<char*>(base) + host->offset * test::elem_size(host->dtype); }
  gcommTensor_t tensor() const {
    return gcommTensor_t{host->count ? data() : nullptr, host->count, host->dtype};
  }
  TypedBuffer fetch() const {
    TypedBuffer out = *host;
    EXPECT_EQ(cudaMemcpy(out.bytes.data(), base, out.bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

struct DeviceFloat {
  float* p = nullptr;
  explicit DeviceFloat(float v) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, &v, sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceFloat() { cudaFree(p); }
  float get() const {
    float v = 0;
    EXPECT_EQ(cudaMemcpy(&v, p, sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

void expect_same_bytes(const TypedBuffer& a, const TypedBuffer& b) {
  ASSERT_EQ(a.bytes.size(), b.bytes.size());
  for (size_t i = 0; i < a.count; ++i) ASSERT_TRUE(test::same_float(a.get(i), b.get(i))) << "element " << i;
}

class KernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    GCOMM_SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  Target gpu{gcommCudaDevice(0), nullptr};
  Target host{gcommHostDevice(), nullptr};
  std::mt19937 rng{99};
};

TEST_F(KernelsGpu, UnscaleMatchesHostTwin) {
  for (auto d : kDtypes)
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4095}, size_t{65537}, size_t{1} << 22})
      for (size_t offset : {0, 1}) {
        TypedBuffer h = random_buffer(rng, d, n, offset);
        if (n > 100) h.set(n / 2, std::numeric_limits<float>::infinity());
        DeviceCopy g(h);
        gcommTensor_t ht = h.tensor(), gt = g.tensor();
        float hinv = 0.125f, hfound = 0;
        DeviceFloat ginv(0.125f), gfound(0.0f);
        unscale_and_check(&ht, 1, &hinv, &hfound, host);
        unscale_and_check(&gt, 1, ginv.p, gfound.p, gpu);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_same_bytes(g.fetch(), h);
        EXPECT_EQ(gfound.get(), hfound) << "dtype " << d << " n " << n;
      }
}

TEST_F(KernelsGpu, CheckFiniteMatchesHostTwinAndWritesNothing) {
  for (auto d : kDtypes)
    for (size_t n : {size_t{1}, size_t{7}, size_t{65537}, size_t{1} << 22})
      for (size_t offset : {0, 1})
        for (bool bad : {false, true}) {
          TypedBuffer h = random_buffer(rng, d, n, offset);
          if (bad) h.set(n - 1, std::nanf(""));
          DeviceCopy g(h);
          gcommTensor_t ht = h.tensor(), gt = g.tensor();
          float hfound = 0;
          DeviceFloat gfound(0.0f);
          check_finite(&ht, 1, &hfound, host);
          check_finite(&gt, 1, gfound.p, gpu);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          expect_same_bytes(g.fetch(), h);
          EXPECT_EQ(gfound.get(), hfound) << "dtype " << d << " n " << n;
          EXPECT_EQ(hfound, bad ? 1.0f : 0.0f);
        }
}

// Locations are checked once per allocation: a host tensor between device tensors
// of one allocation, device memory given to a host call, and pinned host memory
// given to a CUDA call are all refused, naming the offending element.
TEST_F(KernelsGpu, TensorsInTheWrongMemoryAreRefusedByIndex) {
  float* slab = nullptr;
  float* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&slab), 4096 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(slab, 0, 4096 * sizeof(float)), cudaSuccess);  // defined data for initcheck
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64 * sizeof(float)), cudaSuccess);
  std::vector<float> pageable(64, 1.0f);
  DeviceFloat inv(1.0f), found(0.0f);
  std::vector<gcommTensor_t> ts;
  for (int k = 0; k < 8; ++k) ts.push_back(gcommTensor_t{slab + k * 512, 512, gcommFloat32});
  EXPECT_NO_THROW(unscale_and_check(ts.data(), ts.size(), inv.p, found.p, gpu));

  auto expect_refused = [&](const std::vector<gcommTensor_t>& list, const Target& t, const char* needle) {
    try {
      unscale_and_check(list.data(), list.size(), t.cuda() ? inv.p : &pageable[0], nullptr, t);
      ADD_FAILURE() << "accepted; expected a message with '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), gcommInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  std::vector<gcommTensor_t> with_pageable = ts;
  with_pageable.insert(with_pageable.begin() + 3, gcommTensor_t{pageable.data(), 64, gcommFloat32});
  expect_refused(with_pageable, gpu, "grads[3] is host memory");
  std::vector<gcommTensor_t> with_pinned = ts;
  with_pinned.push_back(gcommTensor_t{pinned, 64, gcommFloat32});
  expect_refused(with_pinned, gpu, "grads[8] is pinned host memory");
  std::vector<gcommTensor_t> device_on_host = {gcommTensor_t{pageable.data(), 64, gcommFloat32}, ts[5]};
  expect_refused(device_on_host, host, "grads[1] is device memory of cuda:0");
  cudaFreeHost(pinned);
  cudaFree(slab);
}

// 64 and 65 tensors: either side of the short parameter block's capacity; 2000:
// several launches of the long one.
TEST_F(KernelsGpu, PackAndUnpackMatchHostTwinOnManyTensors) {
  for (int tensors : {64, 65, 2000})
    for (auto bucket_dtype : kDtypes) {
      std::vector<TypedBuffer> hs;
      for (int k = 0; k < tensors; ++k)
        hs.push_back(random_buffer(rng, kDtypes[k % 3], 1 + (k * 37) % 5000, k % 3 == 0));
      std::vector<std::unique_ptr<DeviceCopy>> gs;
      std::vector<gcommTensor_t> ht, gt;
      size_t total = 0;
      for (auto& h : hs) {
        gs.push_back(std::make_unique<DeviceCopy>(h));
        ht.push_back(h.tensor());
        gt.push_back(gs.back()->tensor());
        total += h.count;
      }
      TypedBuffer hb = random_buffer(rng, bucket_dtype, total);
      DeviceCopy gb(hb);
      DeviceFloat gscale(0.5f);
      float hscale = 0.5f;
      pack(ht.data(), ht.size(), nullptr, hb.data(), bucket_dtype, 0.25f, &hscale, host);
      pack(gt.data(), gt.size(), nullptr, gb.data(), bucket_dtype, 0.25f, gscale.p, gpu);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_same_bytes(gb.fetch(), hb);

      float hfound = 0;
      DeviceFloat gfound(0.0f);
      unpack(hb.data(), bucket_dtype, nullptr, ht.data(), ht.size(), 2.0f, &hscale, true, &hfound, host);
      unpack(gb.data(), bucket_dtype, nullptr, gt.data(), gt.size(), 2.0f, gscale.p, true, gfound.p, gpu);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (size_t k = 0; k < hs.size(); ++k) expect_same_bytes(gs[k]->fetch(), hs[k]);
      EXPECT_EQ(gfound.get(), hfound);
    }
}

// The pack's per-tensor non-finite flags (found_per_tensor, through slots) equal
// the host twin's, on more tensors than one launch's parameter block holds.
TEST_F(KernelsGpu, PackFlagsTheSameNonFiniteTensorsAsTheHostTwin) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int tensors : {5, 65, 2000}) {
    std::vector<TypedBuffer> hs;
    for (int k = 0; k < tensors; ++k) {
      hs.push_back(random_buffer(rng, kDtypes[k % 3], 1 + (k * 37) % 5000, false));
      if (k % 7 == 3) hs.back().set(hs.back().count / 2, k % 2 ? inf : std::nanf(""));
    }
    std::vector<std::unique_ptr<DeviceCopy>> gs;
    std::vector<gcommTensor_t> ht, gt;
    std::vector<size_t> slots;
    size_t total = 0;
    for (size_t k = 0; k < hs.size(); ++k) {
      gs.push_back(std::make_unique<DeviceCopy>(hs[k]));
      ht.push_back(hs[k].tensor());
      gt.push_back(gs.back()->tensor());
      slots.push_back(hs.size() - 1 - k);
      total += hs[k].count;
    }
    TypedBuffer hb = random_buffer(rng, gcommFloat16, total);
    DeviceCopy gb(hb);
    std::vector<float> hflags(hs.size(), 0.0f);
    TypedBuffer zeros{gcommFloat32, hs.size(), 0, std::vector<unsigned char>(hs.size() * 4 + 32, 0)};
    DeviceCopy gflags(zeros);
    pack(ht.data(), ht.size(), nullptr, hb.data(), gcommFloat16, 0.25f, nullptr, host, hflags.data(),
         slots.data());
    pack(gt.data(), gt.size(), nullptr, gb.data(), gcommFloat16, 0.25f, nullptr, gpu,
         static_cast<float*>(gflags.tensor().data), slots.data());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    TypedBuffer got = gflags.fetch();
    for (size_t k = 0; k < hs.size(); ++k)
      EXPECT_EQ(got.get(k), hflags[k]) << tensors << " tensors, slot " << k;
  }
}

TEST_F(KernelsGpu, NormsMatchHostTwinAndAreDeterministic) {
  std::vector<TypedBuffer> hs;
  for (int k = 0; k < 300; ++k)
    hs.push_back(random_buffer(rng, kDtypes[k % 3], 1 + (k * 7919) % 70000, k % 2));
  std::vector<std::unique_ptr<DeviceCopy>> gs;
  std::vector<gcommTensor_t> ht, gt;
  for (auto& h : hs) {
    gs.push_back(std::make_unique<DeviceCopy>(h));
    ht.push_back(h.tensor());
    gt.push_back(gs.back()->tensor());
  }
  size_t ws_bytes = norm_workspace_bytes(gt.data(), gt.size());
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  float* dper = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dper), gt.size() * sizeof(float)), cudaSuccess);
  DeviceFloat gnorm(0.0f);
  float hnorm = 0;
  std::vector<float> hper(ht.size());
  l2_norm(ht.data(), ht.size(), &hnorm, hper.data(), nullptr, 0, host);
  l2_norm(gt.data(), gt.size(), gnorm.p, dper, ws, ws_bytes, gpu);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  float first = gnorm.get();
  EXPECT_NEAR(first, hnorm, 1e-6 * hnorm);
  std::vector<float> gper(gt.size());
  ASSERT_EQ(cudaMemcpy(gper.data(), dper, gper.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t k = 0; k < gper.size(); ++k) EXPECT_NEAR(gper[k], hper[k], 1e-6 * hper[k]) << k;
  for (int run = 0; run < 5; ++run) {
    l2_norm(gt.data(), gt.size(), gnorm.p, nullptr, ws, ws_bytes, gpu);
    ASSERT_EQ(gnorm.get(), first) << "same bits every run";
  }
  cudaFree(ws);
  cudaFree(dper);
}

TEST_F(KernelsGpu, CastAndClipMatchHostTwin) {
  for (auto from : kDtypes)
    for (auto to : kDtypes) {
      TypedBuffer hs = random_buffer(rng, from, 65537, 1, 70000.0f);
      TypedBuffer hd = random_buffer(rng, to, 65537);
      DeviceCopy gs(hs), gd(hd);
      cast(hs.data(), from, hd.data(), to, 65537, host);
      cast(gs.data(), from, gd.data(), to, 65537, gpu);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_same_bytes(gd.fetch(), hd);
    }
}

// Issue 17 #12 on the GPU: a non-finite list is left as it was, and the checked
// clip raises found_inf, as the host twin does.
TEST_F(KernelsGpu, ClipOfANonFiniteListMatchesHostTwin) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")})
    for (auto d : kDtypes) {
      TypedBuffer h = random_buffer(rng, d, 65537, 1);
      h.set(4099, bad);
      DeviceCopy g(h);
      gcommTensor_t ht = h.tensor(), gt = g.tensor();
      size_t ws_bytes = norm_workspace_bytes(&gt, 1);
      void* ws = nullptr;
      ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
      float hnorm = 0, hfound = 0;
      DeviceFloat gnorm(0.0f), gfound(0.0f);
      clip_by_global_norm(&ht, 1, 1e-3f, &hnorm, nullptr, 0, host, &hfound);
      clip_by_global_norm(&gt, 1, 1e-3f, gnorm.p, ws, ws_bytes, gpu, gfound.p);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      cudaFree(ws);
      expect_same_bytes(g.fetch(), h);
      EXPECT_EQ(gfound.get(), hfound) << "dtype " << d << " bad " << bad;
      EXPECT_EQ(hfound, 1.0f);
    }
}

TEST_F(KernelsGpu, ScalerUpdateMatchesTheRuleWithoutHostSync) {
  gcommGradScalerConfig_t c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.init_scale = 1024.0f;
  c.growth_interval = 2;
  GradScaler g(gcommCudaDevice(0), c);
  GradScaler h(gcommHostDevice(), c);
  TypedBuffer hb = random_buffer(rng, gcommFloat16, 4095);
  for (int stepi = 0; stepi < 7; ++stepi) {
    if (stepi == 4) hb.set(17, std::nanf(""));
    if (stepi == 5) hb = random_buffer(rng, gcommFloat16, 4095);
    DeviceCopy gb(hb);
    gcommTensor_t ht = hb.tensor(), gt = gb.tensor();
    h.unscale(&ht, 1, nullptr);
    g.unscale(&gt, 1, nullptr);
    h.update(nullptr);
    g.update(nullptr);
    ScalerState hs = h.read(nullptr), gs = g.read(nullptr);
    EXPECT_EQ(gs.scale, hs.scale) << stepi;
    EXPECT_EQ(gs.growth_tracker, hs.growth_tracker);
    EXPECT_EQ(gs.skipped_last, hs.skipped_last);
  }
}

TEST_F(KernelsGpu, ScalerStateWrittenOnTheDeviceReadsBack) {
  gcommGradScalerConfig_t c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.growth_interval = 4;
  GradScaler g(gcommCudaDevice(0), c);
  g.write(gcommGradScalerState_t{512.0f, 3, 1, 1}, nullptr);
  ScalerState s = g.read(nullptr);
  EXPECT_EQ(s.scale, 512.0f);
  EXPECT_EQ(s.inv_scale, 1.0f / 512.0f);
  EXPECT_EQ(s.growth_tracker, 3);
  EXPECT_EQ(s.skipped_last, 1);
  g.update(nullptr);  // the fourth clean step grows
  EXPECT_EQ(g.read(nullptr).scale, 1024.0f);
}

}  // namespace
}  // namespace gradcomm::kernels
