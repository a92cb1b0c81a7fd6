// What a reducer is made with: its C config struct, checked, and the settings a
// user gives through the environment, read once where the reducer is created.
// Nothing below reads the environment: tests set ReducerSettings directly, and the
// parsing is tested with a made-up environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "comm/bootstrap/launch_env.hpp"
#include "gradcomm/reducer.h"
#include "reducer/bucket_plan.hpp"

namespace gradcomm::reducer {

struct ReducerSettings {
  // GRADCOMM_REDUCER_TIMING=0/1; unset: on where it costs a clock read (host), off
  // where it costs CUDA event records (GPU). A malformed value warns and is unset.
  std::optional<bool> timing;
  // GRADCOMM_REDUCER_TIMING_BUDGET: what a measured step's timing may cost, percent
  // of the step (default 0.5; inf: every step measured); step_timeline.hpp.
  double timing_budget_percent = 0.5;
  // GRADCOMM_REDUCER_EPILOGUE: "bucket" (default) runs each plain bucket's epilogue
  // right after its collective, overlapping the later buckets' communication;
  // "finalize" runs them all at finalize in one fused pass per wire dtype. Anything
  // else is refused (gcommInvalidArgument) at creation.
  bool epilogue_at_finalize = false;
  // GRADCOMM_REDUCER_HOST_THREAD=0/1 (default 1): a host reducer with peers runs its
  // buckets on the communicator's lane (comm/host_lane.hpp). A malformed value warns
  // and keeps 1.
  bool host_thread = true;
  // GRADCOMM_TRACE_FILE (%r, %h, %p as per_rank_path; empty: no trace), from synced
  // step GRADCOMM_TRACE_START (default 1) for GRADCOMM_TRACE_STEPS (default 20).
  std::string trace_file;
  uint64_t trace_first_step = 1;
  uint64_t trace_steps = 20;
  // GRADCOMM_STRAGGLER_WINDOW: synced steps per straggler attribution (0: off;
  // unset: 10 on the host, off on a GPU, where its all-gather waits for the
  // step's work and its cost is not measured yet); GRADCOMM_STRAGGLER_MIN_MS: the
  // least lateness that counts (default 20). Malformed values warn and are unset
  // (straggler_monitor.hpp).
  std::optional<int> straggler_window;
  double straggler_min_ms = 20;
  // GRADCOMM_REDUCER_BUCKET_AUTOTUNE=0/1: decides for a config left at
  // gcommBucketAutotuneAuto. A malformed value warns and is unset.
  std::optional<bool> bucket_autotune;
};

ReducerSettings reducer_settings_from(const comm::bootstrap::EnvLookup& env);

struct ReducerOptions {
  size_t bucket_cap_bytes = size_t{25} << 20;
  size_t first_bucket_bytes = size_t{1} << 20;
  int wire_dtype = kWireSameAsGrad;
  bool grad_as_bucket_view = false;
  bool average = true;
  bool unused_as_zero = false;
  bool rebuild_buckets = true;
  bool sharded = false;  // gcommReducerSharded
  int bucket_autotune = gcommBucketAutotuneAuto;
  ReducerSettings settings;
};

// The config checked (gcommInvalidArgument naming the field) and the process
// environment's settings.
ReducerOptions reducer_options_from(const gcommReducerConfig_t& config);

}  // namespace gradcomm::reducer
