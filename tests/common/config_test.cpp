// The versioned config-struct pattern, on two versions of a test struct.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/api_guard.hpp"
#include "common/config.hpp"

namespace gradcomm {
namespace {

// Version 1 of a config, as an old caller compiled it.
struct ConfigV1 {
  size_t size;
  uint32_t magic;
  uint32_t version;
  int32_t alpha;
  int32_t beta;
};
// Version 2, as the library knows it now: two fields appended.
struct ConfigV2 {
  size_t size;
  uint32_t magic;
  uint32_t version;
  int32_t alpha;
  int32_t beta;
  double gamma;
  int64_t delta;
};
constexpr ConfigV2 kDefaults = {sizeof(ConfigV2), GCOMM_CONFIG_MAGIC, 2, 1, 2, 3.5, 4};

ConfigV2 read(const void* user) {
  return read_config(static_cast<const ConfigV2*>(user), kDefaults, "ConfigV2");
}

TEST(Config, NullMeansDefaults) {
  ConfigV2 c = read(nullptr);
  EXPECT_EQ(c.alpha, 1);
  EXPECT_EQ(c.delta, 4);
}

TEST(Config, CurrentVersionIsCopiedWhole) {
  ConfigV2 user = kDefaults;
  user.alpha = 10;
  user.gamma = -1.0;
  user.delta = 99;
  ConfigV2 c = read(&user);
  EXPECT_EQ(c.alpha, 10);
  EXPECT_EQ(c.beta, 2);
  EXPECT_EQ(c.gamma, -1.0);
  EXPECT_EQ(c.delta, 99);
}

TEST(Config, OlderSmallerStructGetsDefaultsForFieldsItLacks) {
  ConfigV1 old = {sizeof(ConfigV1), GCOMM_CONFIG_MAGIC, 1, 7, 8};
  ConfigV2 c = read(&old);
  EXPECT_EQ(c.alpha, 7);
  EXPECT_EQ(c.beta, 8);
  EXPECT_EQ(c.gamma, 3.5);
  EXPECT_EQ(c.delta, 4);
  EXPECT_EQ(c.size, sizeof(ConfigV2));
}

TEST(Config, NewerLargerStructIsAcceptedAndExtraFieldsIgnored) {
  struct ConfigV3 {
    ConfigV2 v2;
    int64_t future;
  } newer;
  newer.v2 = kDefaults;
  newer.v2.size = sizeof(ConfigV3);
  newer.v2.version = 3;
  newer.v2.beta = 22;
  newer.future = 123;
  ConfigV2 c = read(&newer);
  EXPECT_EQ(c.beta, 22);
}

TEST(Config, StructNotMadeByTheInitializerIsRefused) {
  ConfigV2 zeroed;
  std::memset(&zeroed, 0, sizeof(zeroed));
  EXPECT_EQ(api_call("t", [&] { read(&zeroed); }), gcommInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("_INITIALIZER"), std::string::npos) << last_error();

  ConfigV2 garbage;
  std::memset(&garbage, 0xAB, sizeof(garbage));
  EXPECT_EQ(api_call("t", [&] { read(&garbage); }), gcommInvalidArgument);
}

TEST(Config, BadSizeOrVersionIsRefused) {
  ConfigV2 user = kDefaults;
  user.size = 3;
  EXPECT_EQ(api_call("t", [&] { read(&user); }), gcommInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("size 3"), std::string::npos);
  user = kDefaults;
  user.version = 0;
  EXPECT_EQ(api_call("t", [&] { read(&user); }), gcommInvalidArgument);
}

}  // namespace
}  // namespace gradcomm
