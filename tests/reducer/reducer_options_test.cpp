// The reducer's settings from the environment (reducer/reducer_options.hpp), read
// through a made-up environment: each variable's values, its default, and what a
// malformed value does (refused for the epilogue mode, a warning and the default
// for the others). The reducer itself never reads the environment.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "common/error.hpp"
#include "reducer/reducer_options.hpp"

namespace gradcomm::reducer {
namespace {

ReducerSettings settings(const std::map<std::string, std::string>& vars) {
  return reducer_settings_from([&](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

TEST(ReducerSettings, AnEmptyEnvironmentGivesTheDefaults) {
  const ReducerSettings s = settings({});
  EXPECT_FALSE(s.timing.has_value()) << "unset: on for host communicators, off on GPUs";
  EXPECT_FALSE(s.epilogue_at_finalize);
  EXPECT_TRUE(s.host_thread);
  EXPECT_EQ(s.trace_file, "");
  EXPECT_DOUBLE_EQ(s.timing_budget_percent, 0.5);
  EXPECT_FALSE(s.straggler_window.has_value()) << "unset: 10 on the host, off on GPUs";
  EXPECT_DOUBLE_EQ(s.straggler_min_ms, 20);
  EXPECT_FALSE(s.bucket_autotune.has_value()) << "unset: the config decides";
}

TEST(ReducerSettings, EachVariableIsRead) {
  const ReducerSettings s = settings({{"GRADCOMM_REDUCER_TIMING", "0"},
                                      {"GRADCOMM_REDUCER_EPILOGUE", "finalize"},
                                      {"GRADCOMM_REDUCER_HOST_THREAD", "0"},
                                      {"GRADCOMM_TRACE_FILE", "/tmp/t_%r.json"},
                                      {"GRADCOMM_TRACE_START", "2"},
                                      {"GRADCOMM_TRACE_STEPS", "1"},
                                      {"GRADCOMM_REDUCER_TIMING_BUDGET", "2.5"},
                                      {"GRADCOMM_STRAGGLER_WINDOW", "0"},
                                      {"GRADCOMM_STRAGGLER_MIN_MS", "2.5"}});
  EXPECT_EQ(s.timing, std::optional<bool>(false));
  EXPECT_TRUE(s.epilogue_at_finalize);
  EXPECT_FALSE(s.host_thread);
  EXPECT_EQ(s.trace_file, "/tmp/t_%r.json");
  EXPECT_EQ(s.trace_first_step, 2u);
  EXPECT_EQ(s.trace_steps, 1u);
  EXPECT_DOUBLE_EQ(s.timing_budget_percent, 2.5);
  EXPECT_EQ(s.straggler_window, std::optional<int>(0));
  EXPECT_DOUBLE_EQ(s.straggler_min_ms, 2.5);
  EXPECT_TRUE(std::isinf(settings({{"GRADCOMM_REDUCER_TIMING_BUDGET", "inf"}}).timing_budget_percent));
  EXPECT_EQ(settings({{"GRADCOMM_REDUCER_TIMING", "1"}}).timing, std::optional<bool>(true));
  EXPECT_EQ(settings({{"GRADCOMM_REDUCER_BUCKET_AUTOTUNE", "0"}}).bucket_autotune,
            std::optional<bool>(false));
  EXPECT_EQ(settings({{"GRADCOMM_REDUCER_BUCKET_AUTOTUNE", "1"}}).bucket_autotune, std::optional<bool>(true));
  EXPECT_FALSE(settings({{"GRADCOMM_REDUCER_BUCKET_AUTOTUNE", "on"}}).bucket_autotune.has_value())
      << "malformed: a warning, and the config decides";
  EXPECT_FALSE(settings({{"GRADCOMM_REDUCER_EPILOGUE", "bucket"}}).epilogue_at_finalize);
}

TEST(ReducerSettings, MalformedValuesKeepTheDefaultExceptTheEpilogueModeWhichIsRefused) {
  EXPECT_FALSE(settings({{"GRADCOMM_REDUCER_TIMING", "yes"}}).timing.has_value());
  EXPECT_TRUE(settings({{"GRADCOMM_REDUCER_HOST_THREAD", "yes"}}).host_thread);
  EXPECT_FALSE(settings({{"GRADCOMM_STRAGGLER_WINDOW", "-3"}}).straggler_window.has_value());
  EXPECT_DOUBLE_EQ(settings({{"GRADCOMM_STRAGGLER_MIN_MS", "soon"}}).straggler_min_ms, 20);
  for (const char* bad : {"0", "-1", "nan", "half"})
    EXPECT_DOUBLE_EQ(settings({{"GRADCOMM_REDUCER_TIMING_BUDGET", bad}}).timing_budget_percent, 0.5) << bad;
  const ReducerSettings t = settings({{"GRADCOMM_TRACE_FILE", "t.json"}, {"GRADCOMM_TRACE_STEPS", "0"}});
  EXPECT_EQ(t.trace_steps, 20u) << "out of range: the default";
  try {
    settings({{"GRADCOMM_REDUCER_EPILOGUE", "later"}});
    FAIL() << "an unknown epilogue mode was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    EXPECT_NE(e.message().find("GRADCOMM_REDUCER_EPILOGUE is 'later': use 'bucket'"), std::string::npos)
        << e.message();
  }
}

}  // namespace
}  // namespace gradcomm::reducer
