// The kernels' C API through libgradcomm.so, on the host: each call works and
// each refuses bad input with a status and a message, launching nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gradcomm/gradcomm.h"

namespace {

const gcommDevice_t kHost = gcommHostDevice();
std::string last() {
  return gcommGetLastError();
}

TEST(KernelsApi, UnscalePackUnpackOnTheHost) {
  std::vector<float> a = {2, 4, 6}, b = {8, 10};
  gcommTensor_t t[2] = {{a.data(), 3, gcommFloat32}, {b.data(), 2, gcommFloat32}};
  float inv = 0.5f, found = 0;
  ASSERT_EQ(gcommUnscaleAndCheck(t, 2, &inv, &found, kHost, nullptr), gcommSuccess) << last();
  EXPECT_EQ(a[2], 3.0f);
  EXPECT_EQ(found, 0.0f);
  ASSERT_EQ(gcommCheckFinite(t, 2, &found, kHost, nullptr), gcommSuccess) << last();
  EXPECT_EQ(found, 0.0f);
  b[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_EQ(gcommCheckFinite(t, 2, &found, kHost, nullptr), gcommSuccess) << last();
  EXPECT_EQ(found, 1.0f);
  EXPECT_TRUE(std::isnan(b[0]));
  b[0] = 8.0f;
  found = 0.0f;
  std::vector<uint16_t> bucket(5);
  ASSERT_EQ(gcommPack(t, 2, nullptr, bucket.data(), gcommBfloat16, 1.0f, nullptr, kHost, nullptr),
            gcommSuccess);
  EXPECT_EQ(bucket[0], 0x3f80);  // 1.0 in bf16
  ASSERT_EQ(
      gcommUnpack(bucket.data(), gcommBfloat16, nullptr, t, 2, 2.0f, nullptr, 1, &found, kHost, nullptr),
      gcommSuccess);
  EXPECT_EQ(a[0], 3.0f);   // 1 + 1*2
  EXPECT_EQ(b[1], 15.0f);  // 5 + 5*2
}

TEST(KernelsApi, NormClipAndCast) {
  std::vector<float> a = {3, 4};
  gcommTensor_t t{a.data(), 2, gcommFloat32};
  size_t ws = 99;
  ASSERT_EQ(gcommNormWorkspaceSize(&t, 1, &ws), gcommSuccess);
  float norm = 0;
  ASSERT_EQ(gcommL2Norm(&t, 1, &norm, nullptr, nullptr, 0, kHost, nullptr), gcommSuccess);
  EXPECT_EQ(norm, 5.0f);
  ASSERT_EQ(gcommClipByGlobalNorm(&t, 1, 1.0f, &norm, nullptr, 0, kHost, nullptr), gcommSuccess);
  EXPECT_NEAR(a[0], 0.6f, 1e-6);
  uint16_t h[2];
  ASSERT_EQ(gcommCast(a.data(), gcommFloat32, h, gcommFloat16, 2, kHost, nullptr), gcommSuccess);
}

TEST(KernelsApi, ClipReportsANonFiniteNormInAFlag) {
  std::vector<float> a = {3, std::numeric_limits<float>::infinity(), 4};
  gcommTensor_t t{a.data(), 3, gcommFloat32};
  float norm = 0, found = 0;
  ASSERT_EQ(gcommClipByGlobalNormAndCheck(&t, 1, 1.0f, &norm, &found, nullptr, 0, kHost, nullptr),
            gcommSuccess)
      << last();
  EXPECT_EQ(found, 1.0f);
  EXPECT_EQ(a[0], 3.0f) << "nothing is scaled by a non-finite norm";
  EXPECT_EQ(gcommClipByGlobalNormAndCheck(&t, 1, 1.0f, &norm, nullptr, nullptr, 0, kHost, nullptr),
            gcommInvalidArgument);
  EXPECT_NE(last().find("'found_inf'"), std::string::npos) << last();
}

TEST(KernelsApi, BadInputIsRefusedAndNothingRuns) {
  std::vector<float> a = {2, 4};
  gcommTensor_t t{a.data(), 2, gcommFloat32};
  float inv = 0.5f, found = 0;
  EXPECT_EQ(gcommUnscaleAndCheck(&t, 1, nullptr, &found, kHost, nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("gcommUnscaleAndCheck: argument 'inv_scale'"), std::string::npos) << last();
  EXPECT_EQ(gcommCheckFinite(&t, 1, nullptr, kHost, nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("gcommCheckFinite: argument 'found_inf'"), std::string::npos) << last();
  gcommDevice_t bad_device = gcommCudaDevice(64);
  EXPECT_EQ(gcommUnscaleAndCheck(&t, 1, &inv, &found, bad_device, nullptr), gcommInvalidArgument);
  EXPECT_EQ(a[0], 2.0f);
  EXPECT_EQ(gcommCast(a.data(), static_cast<gcommDataType_t>(9), a.data(), gcommFloat32, 2, kHost, nullptr),
            gcommInvalidArgument);
  EXPECT_EQ(gcommCast(a.data(), gcommFloat32, a.data() + 1, gcommFloat32, 1, kHost, nullptr), gcommSuccess)
      << "disjoint neighbours are fine";
  EXPECT_EQ(gcommCast(a.data(), gcommFloat32, reinterpret_cast<char*>(a.data()) + 2, gcommFloat16, 2, kHost,
                      nullptr),
            gcommInvalidArgument);
  EXPECT_EQ(gcommNormWorkspaceSize(&t, 1, nullptr), gcommInvalidArgument);
}

// Issue 17 #2: a list count above GCOMM_MAX_TENSORS is refused before the list
// is read (it used to read t[1] of a one-element array and complain about its
// dtype); a tensor or bucket reaching past GCOMM_ADDRESS_LIMIT likewise.
TEST(KernelsApi, AbsurdCountsAreRefusedBeforeTheListIsRead) {
  auto one = std::make_unique<gcommTensor_t[]>(1);  // on the heap: ASan sees any read past it
  std::vector<float> a(4, 2.0f);
  one[0] = gcommTensor_t{a.data(), 4, gcommFloat32};
  float inv = 0.5f, found = 0, norm = 0;
  size_t ws = 0;
  auto refused_for_length = [](gcommStatus_t s) {
    return s == gcommInvalidArgument && last().find("GCOMM_MAX_TENSORS") != std::string::npos;
  };
  for (size_t n : {SIZE_MAX, SIZE_MAX / 2, static_cast<size_t>(GCOMM_MAX_TENSORS) + 1}) {
    EXPECT_TRUE(refused_for_length(gcommL2Norm(one.get(), n, &norm, nullptr, nullptr, 0, kHost, nullptr)))
        << last();
    EXPECT_TRUE(refused_for_length(gcommUnscaleAndCheck(one.get(), n, &inv, &found, kHost, nullptr)))
        << last();
    EXPECT_TRUE(refused_for_length(gcommCheckFinite(one.get(), n, &found, kHost, nullptr))) << last();
    EXPECT_TRUE(
        refused_for_length(gcommClipByGlobalNorm(one.get(), n, 1.0f, &norm, nullptr, 0, kHost, nullptr)))
        << last();
    EXPECT_TRUE(refused_for_length(gcommNormWorkspaceSize(one.get(), n, &ws))) << last();
    EXPECT_TRUE(refused_for_length(
        gcommPack(one.get(), n, nullptr, a.data(), gcommFloat32, 1.0f, nullptr, kHost, nullptr)))
        << last();
    EXPECT_TRUE(refused_for_length(
        gcommUnpack(a.data(), gcommFloat32, nullptr, one.get(), n, 1.0f, nullptr, 0, &found, kHost, nullptr)))
        << last();
  }
  // Element counts that fit size_t but not memory.
  gcommTensor_t far{a.data(), (static_cast<size_t>(GCOMM_ADDRESS_LIMIT) >> 2), gcommFloat32};
  EXPECT_EQ(gcommCheckFinite(&far, 1, &found, kHost, nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("GCOMM_ADDRESS_LIMIT"), std::string::npos) << last();
  EXPECT_EQ(gcommNormWorkspaceSize(&far, 1, &ws), gcommInvalidArgument);
  EXPECT_EQ(gcommCast(a.data(), gcommFloat32, a.data(), gcommFloat32, SIZE_MAX / 8, kHost, nullptr),
            gcommInvalidArgument);
  // A bucket offset that puts a tensor past the address limit.
  size_t far_offset = static_cast<size_t>(GCOMM_ADDRESS_LIMIT) / 4;
  EXPECT_EQ(gcommPack(one.get(), 1, &far_offset, a.data(), gcommFloat32, 1.0f, nullptr, kHost, nullptr),
            gcommInvalidArgument);
  EXPECT_NE(last().find("bucket"), std::string::npos) << last();
  EXPECT_EQ(a[0], 2.0f) << "nothing ran";
  EXPECT_EQ(gcommL2Norm(one.get(), 1, &norm, nullptr, nullptr, 0, kHost, nullptr), gcommSuccess) << last();
  EXPECT_EQ(norm, 4.0f);
}

TEST(KernelsApi, GradScalerLifecycleAndBadHandles) {
  gcommGradScalerConfig_t c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.init_scale = 4.0f;
  gcommGradScaler_t s = nullptr;
  ASSERT_EQ(gcommGradScalerCreate(kHost, &c, &s), gcommSuccess) << last();
  std::vector<float> g = {4, std::numeric_limits<float>::infinity()};
  gcommTensor_t t{g.data(), 2, gcommFloat32};
  ASSERT_EQ(gcommGradScalerUnscale(s, &t, 1, nullptr), gcommSuccess);
  EXPECT_EQ(g[0], 1.0f);
  int found = 0, skipped = 0;
  ASSERT_EQ(gcommGradScalerGetFoundInf(s, nullptr, &found), gcommSuccess);
  EXPECT_EQ(found, 1);
  ASSERT_EQ(gcommGradScalerUpdate(s, nullptr), gcommSuccess);
  ASSERT_EQ(gcommGradScalerGetSkipped(s, nullptr, &skipped), gcommSuccess);
  EXPECT_EQ(skipped, 1);
  float scale = 0;
  ASSERT_EQ(gcommGradScalerGetScale(s, nullptr, &scale), gcommSuccess);
  EXPECT_EQ(scale, 2.0f);
  const float* dscale = nullptr;
  ASSERT_EQ(gcommGradScalerDeviceState(s, &dscale, nullptr, nullptr, nullptr), gcommSuccess);
  EXPECT_EQ(*dscale, 2.0f);  // host scaler: host memory
  ASSERT_EQ(gcommGradScalerDestroy(s), gcommSuccess);
  EXPECT_EQ(gcommGradScalerUpdate(s, nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("not a live gcommGradScaler_t"), std::string::npos) << last();
  EXPECT_EQ(gcommGradScalerDestroy(s), gcommInvalidArgument);
}

// A checkpoint's state restores the scale rule exactly; a bad state is refused
// naming the field and changes nothing.
TEST(KernelsApi, GradScalerStateRoundTripsAndIsValidated) {
  gcommGradScalerConfig_t c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.growth_interval = 3;
  c.hysteresis = 2;
  gcommGradScaler_t s = nullptr;
  ASSERT_EQ(gcommGradScalerCreate(kHost, &c, &s), gcommSuccess) << last();
  ASSERT_EQ(gcommGradScalerUpdate(s, nullptr), gcommSuccess);  // one clean step
  gcommGradScalerState_t st{};
  ASSERT_EQ(gcommGradScalerGetState(s, nullptr, &st), gcommSuccess) << last();
  EXPECT_EQ(st.scale, 65536.0f);
  EXPECT_EQ(st.growth_tracker, 1);
  EXPECT_EQ(st.hysteresis_left, 2);
  EXPECT_EQ(st.skipped_last, 0);

  gcommGradScalerState_t next{1024.0f, 2, 1, 1};
  ASSERT_EQ(gcommGradScalerSetState(s, &next, nullptr), gcommSuccess) << last();
  const float* inv = nullptr;
  ASSERT_EQ(gcommGradScalerDeviceState(s, nullptr, &inv, nullptr, nullptr), gcommSuccess);
  EXPECT_EQ(*inv, 1.0f / 1024.0f);
  ASSERT_EQ(gcommGradScalerUpdate(s, nullptr), gcommSuccess);  // the third clean step grows
  float scale = 0;
  ASSERT_EQ(gcommGradScalerGetScale(s, nullptr, &scale), gcommSuccess);
  EXPECT_EQ(scale, 2048.0f);

  struct Bad {
    gcommGradScalerState_t state;
    const char* field;
  };
  const Bad bad[] = {{{0.0f, 0, 1, 0}, "scale"},
                     {{std::numeric_limits<float>::infinity(), 0, 1, 0}, "scale"},
                     {{std::numeric_limits<float>::quiet_NaN(), 0, 1, 0}, "scale"},
                     {{8.0f, 3, 1, 0}, "growth_tracker"},
                     {{8.0f, -1, 1, 0}, "growth_tracker"},
                     {{8.0f, 0, 0, 0}, "hysteresis_left"},
                     {{8.0f, 0, 3, 0}, "hysteresis_left"},
                     {{8.0f, 0, 1, 2}, "skipped_last"}};
  for (const Bad& b : bad) {
    EXPECT_EQ(gcommGradScalerSetState(s, &b.state, nullptr), gcommInvalidArgument) << b.field;
    EXPECT_NE(last().find(b.field), std::string::npos) << last();
  }
  EXPECT_EQ(gcommGradScalerSetState(s, nullptr, nullptr), gcommInvalidArgument);
  EXPECT_EQ(gcommGradScalerGetState(s, nullptr, nullptr), gcommInvalidArgument);
  ASSERT_EQ(gcommGradScalerGetState(s, nullptr, &st), gcommSuccess);
  EXPECT_EQ(st.scale, 2048.0f) << "a refused state changes nothing";
  EXPECT_EQ(st.growth_tracker, 0);
  ASSERT_EQ(gcommGradScalerDestroy(s), gcommSuccess);
}

TEST(KernelsApi, GradScalerConfigIsVersionedAndValidated) {
  gcommGradScalerConfig_t c;
  std::memset(&c, 0, sizeof(c));
  gcommGradScaler_t s = nullptr;
  EXPECT_EQ(gcommGradScalerCreate(kHost, &c, &s), gcommInvalidArgument);
  EXPECT_EQ(s, nullptr);
  c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.growth_factor = 0.5f;
  EXPECT_EQ(gcommGradScalerCreate(kHost, &c, &s), gcommInvalidArgument);
  EXPECT_NE(last().find("growth_factor"), std::string::npos) << last();
  EXPECT_EQ(gcommGradScalerCreate(kHost, nullptr, &s), gcommSuccess) << "NULL config = defaults";
  float scale = 0;
  ASSERT_EQ(gcommGradScalerGetScale(s, nullptr, &scale), gcommSuccess);
  EXPECT_EQ(scale, 65536.0f);
  EXPECT_EQ(gcommGradScalerDestroy(s), gcommSuccess);
}

}  // namespace
