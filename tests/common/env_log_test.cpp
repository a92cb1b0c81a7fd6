#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
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
      EXPECT_NE(e.message().find(std::string("GRADCOMM_TIMEOUT_S='") + bad + "' is not a timeout"),
                std::string::npos)
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
  GCOMM_INFO(INIT, "hello ", 1);
  GCOMM_TRACE(COLL, "too detailed");
  ASSERT_EQ(out.lines.size(), 1u);
  const std::string& line = out.lines[0];
  std::string expected_tail = ":" + std::to_string(getpid()) + ":3 gradcomm INFO [INIT] hello 1";
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

// Issue 19: GRADCOMM_DEBUG_SUBSYS as NCCL_DEBUG_SUBSYS (a list, ALL, ^ for all but).
TEST(LogSubsystems, ParseAsNcclDoes) {
  std::string unknown;
  EXPECT_EQ(parse_log_subsystems("", &unknown), kAllLogSubs);
  EXPECT_EQ(parse_log_subsystems("ALL", &unknown), kAllLogSubs);
  EXPECT_EQ(parse_log_subsystems("INIT,COLL", &unknown),
            static_cast<unsigned>(LogSub::INIT) | static_cast<unsigned>(LogSub::COLL));
  EXPECT_EQ(parse_log_subsystems("reducer", &unknown), static_cast<unsigned>(LogSub::REDUCER)) << "any case";
  EXPECT_EQ(parse_log_subsystems("^COLL", &unknown), kAllLogSubs & ~static_cast<unsigned>(LogSub::COLL));
  EXPECT_EQ(unknown, "");
  EXPECT_EQ(parse_log_subsystems("INIT,NET,,bogus", &unknown), static_cast<unsigned>(LogSub::INIT));
  EXPECT_EQ(unknown, "'NET', 'bogus'");
}

TEST_F(LogTest, TheSubsystemFilterKeepsWarnings) {
  Captured out;
  setenv("GRADCOMM_DEBUG_SUBSYS", "^COLL", 1);
  reset_log_config();
  set_log_config(LogLevel::kTrace, capture, &out);
  GCOMM_TRACE(COLL, "filtered out");
  GCOMM_INFO(STORE, "kept");
  GCOMM_WARN("always");
  unsetenv("GRADCOMM_DEBUG_SUBSYS");
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_NE(out.lines[0].find("INFO [STORE] kept"), std::string::npos) << out.lines[0];
  EXPECT_NE(out.lines[1].find("WARN always"), std::string::npos) << out.lines[1];
}

TEST(LogFile, PlaceholdersAreFilledIn) {
  EXPECT_EQ(resolve_log_path("/tmp/gc.%h.%p.%r.log", "node7", 123, 4), "/tmp/gc.node7.123.4.log");
  EXPECT_EQ(resolve_log_path("%r-%%-%x-%", "h", 1, -1), "--%-%x-%") << "unknown rank, literal %, others kept";
}

// Lines go to one file per rank (threads of the local transport included).
TEST_F(LogTest, DebugFileGetsOneFilePerRank) {
  char dir[] = "/tmp/gradcomm-log-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pattern = std::string(dir) + "/log.%r.txt";
  setenv("GRADCOMM_DEBUG_FILE", pattern.c_str(), 1);
  setenv("GRADCOMM_DEBUG", "INFO", 1);
  reset_log_config();
  set_thread_log_rank(0);
  GCOMM_INFO(INIT, "line of rank 0");
  set_thread_log_rank(1);
  GCOMM_WARN("line of rank 1");
  reset_log_config();  // closes the files
  unsetenv("GRADCOMM_DEBUG_FILE");
  unsetenv("GRADCOMM_DEBUG");
  for (int r = 0; r < 2; ++r) {
    const std::string path = std::string(dir) + "/log." + std::to_string(r) + ".txt";
    FILE* f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr) << path;
    char buf[512] = {};
    ASSERT_NE(std::fgets(buf, sizeof buf, f), nullptr);
    std::fclose(f);
    EXPECT_NE(std::string(buf).find("line of rank " + std::to_string(r)), std::string::npos) << buf;
    std::remove(path.c_str());
  }
  rmdir(dir);
}

// A file that opens but cannot be written (a full disk): said once on stderr, and
// that line and every later one go to stderr, as for a path that cannot be opened.
TEST_F(LogTest, AnUnwritableDebugFileFallsBackToStderrWithAWarning) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full here";
  setenv("GRADCOMM_DEBUG_FILE", "/dev/full", 1);
  setenv("GRADCOMM_DEBUG", "INFO", 1);
  reset_log_config();
  testing::internal::CaptureStderr();
  GCOMM_INFO(INIT, "first line");
  GCOMM_WARN("second line");
  const std::string err = testing::internal::GetCapturedStderr();
  reset_log_config();
  unsetenv("GRADCOMM_DEBUG_FILE");
  unsetenv("GRADCOMM_DEBUG");
  EXPECT_NE(err.find("GRADCOMM_DEBUG_FILE: cannot write '/dev/full'"), std::string::npos) << err;
  EXPECT_NE(err.find("first line"), std::string::npos) << err;
  EXPECT_NE(err.find("second line"), std::string::npos) << err;
  size_t warnings = 0;
  for (size_t at = err.find("GRADCOMM_DEBUG_FILE"); at != std::string::npos;
       at = err.find("GRADCOMM_DEBUG_FILE", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << err;
}

}  // namespace
}  // namespace gradcomm
