#include "reducer/reducer_options.hpp"

#include <cmath>
#include <limits>

#include "common/dtype.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "reducer/chrome_trace.hpp"

namespace gradcomm::reducer {

ReducerSettings reducer_settings_from(const comm::bootstrap::EnvLookup& env) {
  ReducerSettings s;
  auto value = [&](const char* name) -> std::optional<std::string> {
    std::optional<std::string> v = env(name);
    return v && !v->empty() ? v : std::nullopt;
  };
  if (auto timing = value("GRADCOMM_REDUCER_TIMING"))
    if (const int64_t t = env_int_value("GRADCOMM_REDUCER_TIMING", timing, -1, 0, 1); t >= 0)
      s.timing = t == 1;
  s.timing_budget_percent =
      env_double_value("GRADCOMM_REDUCER_TIMING_BUDGET", value("GRADCOMM_REDUCER_TIMING_BUDGET"),
                       s.timing_budget_percent, 0.001, HUGE_VAL);
  if (auto epilogue = value("GRADCOMM_REDUCER_EPILOGUE")) {
    if (*epilogue == "finalize")
      s.epilogue_at_finalize = true;
    else if (*epilogue != "bucket")
      fail(gcommInvalidArgument, "GRADCOMM_REDUCER_EPILOGUE is '", *epilogue,
           "': use 'bucket' (the default) or 'finalize'");
  }
  s.host_thread =
      env_int_value("GRADCOMM_REDUCER_HOST_THREAD", value("GRADCOMM_REDUCER_HOST_THREAD"), 1, 0, 1) == 1;
  if (auto window = value("GRADCOMM_STRAGGLER_WINDOW"))
    if (const int64_t w = env_int_value("GRADCOMM_STRAGGLER_WINDOW", window, -1, 0, 100000); w >= 0)
      s.straggler_window = static_cast<int>(w);
  s.straggler_min_ms =
      env_double_value("GRADCOMM_STRAGGLER_MIN_MS", value("GRADCOMM_STRAGGLER_MIN_MS"), 20.0, 0.0, 1e9);
  if (auto autotune = value("GRADCOMM_REDUCER_BUCKET_AUTOTUNE"))
    if (const int64_t a = env_int_value("GRADCOMM_REDUCER_BUCKET_AUTOTUNE", autotune, -1, 0, 1); a >= 0)
      s.bucket_autotune = a == 1;
  s.trace_file = value("GRADCOMM_TRACE_FILE").value_or("");
  if (!s.trace_file.empty()) {
    s.trace_first_step = static_cast<uint64_t>(env_int_value(
        "GRADCOMM_TRACE_START", value("GRADCOMM_TRACE_START"), 1, 1, std::numeric_limits<int64_t>::max()));
    s.trace_steps = static_cast<uint64_t>(env_int_value("GRADCOMM_TRACE_STEPS", value("GRADCOMM_TRACE_STEPS"),
                                                        20, 1, static_cast<int64_t>(kMaxTraceSteps)));
  }
  return s;
}

ReducerOptions reducer_options_from(const gcommReducerConfig_t& c) {
  ReducerOptions o;
  require(c.bucket_cap_bytes > 0, "bucket_cap_bytes must be > 0");
  require(c.first_bucket_bytes > 0, "first_bucket_bytes must be > 0");
  require(
      c.wire_dtype == GCOMM_WIRE_SAME_AS_GRAD || is_valid_dtype(static_cast<gcommDataType_t>(c.wire_dtype)),
      "wire_dtype ", c.wire_dtype, " is neither GCOMM_WIRE_SAME_AS_GRAD (-1) nor a gcommDataType_t");
  require(c.grad_as_bucket_view == 0 || c.grad_as_bucket_view == 1,
          "grad_as_bucket_view must be 0 or 1, not ", c.grad_as_bucket_view);
  require(c.average == 0 || c.average == 1, "average must be 0 or 1, not ", c.average);
  require(c.unused_grads == gcommUnusedError || c.unused_grads == gcommUnusedAsZero, "unused_grads ",
          c.unused_grads, " is not a gcommUnusedGrads_t (gcommUnusedError, gcommUnusedAsZero)");
  require(c.rebuild_buckets == 0 || c.rebuild_buckets == 1, "rebuild_buckets must be 0 or 1, not ",
          c.rebuild_buckets);
  require(c.mode == gcommReducerAllReduce || c.mode == gcommReducerSharded, "mode ", c.mode,
          " is not a gcommReducerMode_t (gcommReducerAllReduce, gcommReducerSharded)");
  require(c.bucket_autotune == gcommBucketAutotuneAuto || c.bucket_autotune == gcommBucketAutotuneOn ||
              c.bucket_autotune == gcommBucketAutotuneOff,
          "bucket_autotune ", c.bucket_autotune,
          " is not a gcommBucketAutotune_t (gcommBucketAutotuneAuto, gcommBucketAutotuneOn, "
          "gcommBucketAutotuneOff)");
  require(c.reserved_v2 == 0, "reserved_v2 must be 0, not ", c.reserved_v2);
  o.bucket_cap_bytes = c.bucket_cap_bytes;
  o.first_bucket_bytes = c.first_bucket_bytes;
  o.wire_dtype = c.wire_dtype;
  o.grad_as_bucket_view = c.grad_as_bucket_view == 1;
  o.average = c.average == 1;
  o.unused_as_zero = c.unused_grads == gcommUnusedAsZero;
  o.rebuild_buckets = c.rebuild_buckets == 1;
  o.sharded = c.mode == gcommReducerSharded;
  o.bucket_autotune = c.bucket_autotune;
  o.settings = reducer_settings_from(comm::bootstrap::process_environment());
  return o;
}

}  // namespace gradcomm::reducer
