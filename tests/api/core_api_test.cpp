// The core C API through libgradcomm.so, as an embedder calls it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gradcomm/gradcomm.h"

namespace {

std::string last() {
  return gcommGetLastError();
}

TEST(CoreApi, VersionMatchesTheHeader) {
  int v = -1;
  ASSERT_EQ(gcommGetVersion(&v), gcommSuccess);
  EXPECT_EQ(v, GCOMM_VERSION_CODE);
  EXPECT_STREQ(gcommGetVersionString(), "0.1.0");
}

TEST(CoreApi, NullOutPointersAreRefusedWithAMessage) {
  EXPECT_EQ(gcommGetVersion(nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("gcommGetVersion"), std::string::npos) << last();
  EXPECT_NE(last().find("'version'"), std::string::npos) << last();
  EXPECT_EQ(gcommDataTypeSize(gcommFloat32, nullptr), gcommInvalidArgument);
  EXPECT_EQ(gcommGetCudaDeviceCount(nullptr), gcommInvalidArgument);
  int x = 0;
  EXPECT_EQ(gcommGetNcclVersion(&x, nullptr), gcommInvalidArgument);
  EXPECT_EQ(gcommGetNcclVersion(nullptr, &x), gcommInvalidArgument);
}

TEST(CoreApi, StatusNames) {
  EXPECT_STREQ(gcommGetStatusName(gcommSuccess), "gcommSuccess");
  EXPECT_STREQ(gcommGetStatusName(gcommRemoteError), "gcommRemoteError");
  EXPECT_STREQ(gcommGetStatusString(gcommOutOfMemory), "out of memory");
  gcommClearLastError();
  EXPECT_STREQ(gcommGetStatusName(static_cast<gcommStatus_t>(1234)), "gcommUnknownStatus");
  EXPECT_NE(last().find("1234 is not a gcommStatus_t"), std::string::npos) << last();
  EXPECT_STREQ(gcommGetStatusString(static_cast<gcommStatus_t>(-5)), "unknown status");
}

TEST(CoreApi, LastErrorIsPerThreadAndClearable) {
  EXPECT_EQ(gcommGetVersion(nullptr), gcommInvalidArgument);
  std::string other = "unset";
  std::thread t([&] { other = gcommGetLastError(); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_FALSE(last().empty());
  gcommClearLastError();
  EXPECT_EQ(last(), "");
}

TEST(CoreApi, DataTypes) {
  size_t bytes = 0;
  ASSERT_EQ(gcommDataTypeSize(gcommFloat32, &bytes), gcommSuccess);
  EXPECT_EQ(bytes, 4u);
  ASSERT_EQ(gcommDataTypeSize(gcommBfloat16, &bytes), gcommSuccess);
  EXPECT_EQ(bytes, 2u);
  bytes = 99;
  EXPECT_EQ(gcommDataTypeSize(static_cast<gcommDataType_t>(7), &bytes), gcommInvalidArgument);
  EXPECT_EQ(bytes, 99u) << "a failed call must leave outputs alone";
  EXPECT_NE(last().find("7 is not a gcommDataType_t"), std::string::npos) << last();
  EXPECT_STREQ(gcommDataTypeName(gcommFloat16), "f16");
  EXPECT_STREQ(gcommDataTypeName(static_cast<gcommDataType_t>(-1)), "unknown");
}

TEST(CoreApi, DeviceDescriptors) {
  gcommDevice_t h = gcommHostDevice();
  EXPECT_EQ(h.kind, gcommDeviceHost);
  gcommDevice_t c = gcommCudaDevice(3);
  EXPECT_EQ(c.kind, gcommDeviceCuda);
  EXPECT_EQ(c.ordinal, 3);
  int n = -1;
  ASSERT_EQ(gcommGetCudaDeviceCount(&n), gcommSuccess);
  EXPECT_GE(n, 0);
}

// Whether this library was built with CUDA, as its environment JSON says.
bool library_has_cuda() {
  size_t required = 0;
  EXPECT_EQ(gcommGetEnvironmentJson(nullptr, 0, &required), gcommSuccess);
  std::vector<char> json(required);
  EXPECT_EQ(gcommGetEnvironmentJson(json.data(), json.size(), nullptr), gcommSuccess);
  return std::string(json.data()).find("\"cuda_built\": true") != std::string::npos;
}

TEST(CoreApi, NcclVersions) {
  int built = 0, loaded = 0;
  if (!library_has_cuda()) {  // a build without CUDA has no NCCL, and says so
    ASSERT_EQ(gcommGetNcclVersion(&built, &loaded), gcommNotSupported);
    EXPECT_NE(std::string(gcommGetLastError()).find("built without CUDA"), std::string::npos)
        << gcommGetLastError();
    return;
  }
  ASSERT_EQ(gcommGetNcclVersion(&built, &loaded), gcommSuccess);
  EXPECT_GT(built, 20000);
  EXPECT_GT(loaded, 20000);
}

TEST(CoreApi, EnvironmentReportWithSizeQueryAndTruncation) {
  size_t required = 0;
  ASSERT_EQ(gcommGetEnvironmentReport(nullptr, 0, &required), gcommSuccess);
  ASSERT_GT(required, 20u);
  std::vector<char> buf(required);
  ASSERT_EQ(gcommGetEnvironmentReport(buf.data(), buf.size(), nullptr), gcommSuccess);
  std::string report(buf.data());
  EXPECT_EQ(report.size() + 1, required);
  EXPECT_NE(report.find("gradcomm 0.1.0"), std::string::npos) << report;
  EXPECT_NE(report.find("NCCL built"), std::string::npos) << report;
  EXPECT_NE(report.find("GPUs:"), std::string::npos) << report;

  char small[8];
  std::memset(small, 'x', sizeof(small));
  ASSERT_EQ(gcommGetEnvironmentReport(small, sizeof(small), &required), gcommSuccess);
  EXPECT_EQ(std::strlen(small), 7u);
  EXPECT_EQ(std::string(small), report.substr(0, 7));

  EXPECT_EQ(gcommGetEnvironmentReport(nullptr, 16, &required), gcommInvalidArgument);
}

struct Lines {
  std::vector<std::string> lines;
};
void collect(gcommLogLevel_t, const char* line, void* user) {
  static_cast<Lines*>(user)->lines.emplace_back(line);
}

TEST(CoreApi, LogConfigRoutesLinesToTheCallback) {
  Lines out;
  gcommLogConfig_t cfg = GCOMM_LOG_CONFIG_INITIALIZER;
  cfg.level = gcommLogInfo;
  cfg.callback = collect;
  cfg.user_data = &out;
  ASSERT_EQ(gcommSetLogConfig(&cfg), gcommSuccess);
  EXPECT_EQ(gcommGetVersion(nullptr), gcommInvalidArgument);  // failures are logged at INFO
  ASSERT_EQ(gcommSetLogConfig(nullptr), gcommSuccess);
  ASSERT_FALSE(out.lines.empty());
  EXPECT_NE(out.lines.back().find("[CALL] gcommGetVersion failed (gcommInvalidArgument): "),
            std::string::npos)
      << out.lines.back();
}

TEST(CoreApi, LogConfigNotMadeByTheInitializerIsRefused) {
  gcommLogConfig_t cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.level = gcommLogTrace;
  EXPECT_EQ(gcommSetLogConfig(&cfg), gcommInvalidArgument);
  EXPECT_NE(last().find("_INITIALIZER"), std::string::npos) << last();

  gcommLogConfig_t bad_level = GCOMM_LOG_CONFIG_INITIALIZER;
  bad_level.level = static_cast<gcommLogLevel_t>(17);
  EXPECT_EQ(gcommSetLogConfig(&bad_level), gcommInvalidArgument);
  EXPECT_NE(last().find("17"), std::string::npos) << last();
}

TEST(CoreApi, LogConfigFromAnOlderSmallerHeaderIsAccepted) {
  // A caller built when the struct ended after `level`: callback and user_data
  // take their defaults (stderr).
  gcommLogConfig_t cfg = GCOMM_LOG_CONFIG_INITIALIZER;
  cfg.size = offsetof(gcommLogConfig_t, callback);
  cfg.level = gcommLogNone;
  cfg.callback = collect;  // beyond the old size: must be ignored
  EXPECT_EQ(gcommSetLogConfig(&cfg), gcommSuccess);
  ASSERT_EQ(gcommSetLogConfig(nullptr), gcommSuccess);
}

}  // namespace
