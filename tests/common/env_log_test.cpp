#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm {
namespace {

struct Captured {
  std::vector<std::string> lines;
};
void capture(gcommLogLevel_t, const char* line, void* user) {
  static_cast<Captured*>(user)->lines.emplace_back(line);
}

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    reset_log_config();
    set_thread_log_rank(-1);
  }
};

TEST(Env, IntegersParseAndMalformedValuesKeepTheDefault) {
  setenv("GRADCOMM_TEST_INT", "42", 1);
  EXPECT_EQ(env_int("GRADCOMM_TEST_INT", 7, 0, 100), 42);
  setenv("GRADCOMM_TEST_INT", "42abc", 1);
  EXPECT_EQ(env_int("GRADCOMM_TEST_INT", 7, 0, 100), 7);
  setenv("GRADCOMM_TEST_INT", "1000", 1);
  EXPECT_EQ(env_int("GRADCOMM_TEST_INT", 7, 0, 100), 7);
  unsetenv("GRADCOMM_TEST_INT");
  EXPECT_EQ(env_int("GRADCOMM_TEST_INT", 7, 0, 100), 7);
}

TEST(Env, TimeoutKnob) {
  unsetenv("GRADCOMM_TIMEOUT_S");
  EXPECT_EQ(knobs::timeout_seconds(), 300.0);
  setenv("GRADCOMM_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(knobs::timeout_seconds(), 2.5);
  setenv("GRADCOMM_TIMEOUT_S", "1e30", 1);
  EXPECT_EQ(knobs::timeout_seconds(), 1e30) << "saturated where deadlines are made";
  setenv("GRADCOMM_TIMEOUT_S", "inf", 1);
  EXPECT_EQ(knobs::timeout_seconds(), std::numeric_limits<double>::infinity());
  // Issue 17 #10: a malformed value used to fall back to 300 s with a warning
  // (calling -1 "not a number"); it is an error naming the variable now.
  for (const char* bad : {"abc", "-1", "0", "nan", "3x", "-inf", "1e-400"}) {
    setenv("GRADCOMM_TIMEOUT_S", bad, 1);
    try {
      knobs::timeout_seconds();
      ADD_FAILURE() << "accepted GRADCOMM_TIMEOUT_S=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), gcommInvalidArgument);
      EXPECT_NE(e.message().find(std::string("GRADCOMM_TIMEOUT_S='") + bad + "' is not a timeout"), std::string::npos)
          << e.message();
    }
  }
  unsetenv("GRADCOMM_TIMEOUT_S");
}

TEST(Env, DebugLevelNames) {
  setenv("GRADCOMM_DEBUG", "info", 1);
  EXPECT_EQ(knobs::debug_level(), LogLevel::kInfo);
  setenv("GRADCOMM_DEBUG", "TRACE", 1);
  EXPECT_EQ(knobs::debug_level(), LogLevel::kTrace);
  setenv("GRADCOMM_DEBUG", "NONE", 1);
  EXPECT_EQ(knobs::debug_level(), LogLevel::kNone);
  setenv("GRADCOMM_DEBUG", "loud", 1);
  EXPECT_EQ(knobs::debug_level(), LogLevel::kWarn);
  unsetenv("GRADCOMM_DEBUG");
  EXPECT_EQ(knobs::debug_level(), LogLevel::kWarn);
}

TEST_F(LogTest, LinesCarryHostPidAndRankAndRespectTheLevel) {
  Captured out;
  set_log_config(LogLevel::kInfo, capture, &out);
  set_thread_log_rank(3);
  GCOMM_INFO("hello ", 1);
  GCOMM_TRACE("too detailed");
  ASSERT_EQ(out.lines.size(), 1u);
  const std::string& line = out.lines[0];
  std::string expected_tail = ":" + std::to_string(getpid()) + ":3 gradcomm INFO hello 1";
  EXPECT_NE(line.find(expected_tail), std::string::npos) << line;
  EXPECT_NE(line.find(':'), 0u) << "host name missing: " << line;
}

TEST_F(LogTest, NoRankWhenUnknown) {
  Captured out;
  set_log_config(LogLevel::kWarn, capture, &out);
  GCOMM_WARN("w");
  ASSERT_EQ(out.lines.size(), 1u);
  EXPECT_NE(out.lines[0].find(":" + std::to_string(getpid()) + " gradcomm WARN w"), std::string::npos)
      << out.lines[0];
}

TEST_F(LogTest, LevelComesFromTheEnvironmentUntilConfigured) {
  setenv("GRADCOMM_DEBUG", "TRACE", 1);
  reset_log_config();
  EXPECT_EQ(log_level(), LogLevel::kTrace);
  unsetenv("GRADCOMM_DEBUG");
  reset_log_config();
  EXPECT_EQ(log_level(), LogLevel::kWarn);
}

}  // namespace
}  // namespace gradcomm
