// C API of the reducer (include/gradcomm/reducer.h).
#include <algorithm>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "comm/api/handles.hpp"
#include "common/api/out_string.hpp"
#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/handle_registry.hpp"
#include "kernels/api/handles.hpp"
#include "reducer/compressions.hpp"
#include "reducer/reducer.hpp"

using namespace gradcomm;
using namespace gradcomm::comm;
using namespace gradcomm::reducer;

// Holds the communicator and scaler handles it uses (counted, so they cannot be
// destroyed under it) and refuses calls once either was aborted or is gone.
struct gcommReducer {
  gcommComm_t comm_handle;
  gcommGradScaler_t scaler_handle;
  std::unique_ptr<Reducer> reducer;
  ~gcommReducer() {
    reducer.reset();
    release_communicator(comm_handle);
    if (scaler_handle != nullptr) kernels::release_grad_scaler(scaler_handle);
  }
};

namespace {

HandleRegistry<gcommReducer>& reducers() {
  static HandleRegistry<gcommReducer> registry("gcommReducer_t");
  return registry;
}

Reducer& reducer_of(gcommReducer_t handle) {
  return *reducers().get(handle)->reducer;
}

// A saved strategy state into the caller's buffer (size 0: only *required).
void copy_state_out(const std::vector<uint8_t>& state, void* buffer, size_t size, size_t* required) {
  if (required != nullptr) *required = state.size();
  if (size == 0) return;
  require(size >= state.size(), "size ", size, " is below the state's ", state.size(),
          " bytes (ask with size 0)");
  std::memcpy(buffer, state.data(), state.size());
}

// Every stats struct is this header followed by uint64_t counters (reducer/strategy.hpp).
struct StatsHeader {
  size_t size;
  uint32_t magic;
  uint32_t version;
};

// The counters into the caller's stats struct: as many as its size holds (an
// older, smaller struct gets the fields it knows).
void write_counters(const std::vector<Counter>& counters, StatsHeader* out) {
  const size_t room = (out->size - sizeof(StatsHeader)) / sizeof(uint64_t);
  auto* fields = reinterpret_cast<unsigned char*>(out) + sizeof(StatsHeader);
  for (size_t k = 0; k < counters.size() && k < room; ++k)
    std::memcpy(fields + k * sizeof(uint64_t), &counters[k].value, sizeof(uint64_t));
}

}  // namespace

extern "C" {

GCOMM_API gcommStatus_t gcommReducerCreate(gcommComm_t comm, const gcommTensor_t* grads, size_t num_grads,
                                           const gcommReducerConfig_t* config, gcommReducer_t* reducer) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(reducer);
    const gcommReducerConfig_t defaults = GCOMM_REDUCER_CONFIG_INITIALIZER;
    gcommReducerConfig_t c = read_config(config, defaults, "gcommReducerConfig_t");
    ReducerOptions options = reducer_options_from(c);
    auto made = std::make_unique<gcommReducer>();
    made->comm_handle = nullptr;
    made->scaler_handle = nullptr;
    // Acquire in an order that the destructor undoes whatever fails later.
    Communicator& communicator = acquire_communicator(comm);
    made->comm_handle = comm;
    kernels::GradScaler* scaler = nullptr;
    if (c.scaler != nullptr) {
      scaler = &kernels::acquire_grad_scaler(c.scaler);
      made->scaler_handle = c.scaler;
    }
    made->reducer = std::make_unique<Reducer>(communicator, grads, num_grads, options, scaler);
    reducers().add(made.get());
    *reducer = made.release();
  });
}

GCOMM_API gcommStatus_t gcommReducerDestroy(gcommReducer_t reducer) {
  return GCOMM_API_CALL({ reducers().destroy(reducer); });
}

GCOMM_API gcommStatus_t gcommReducerBeginStep(gcommReducer_t reducer, int sync) {
  return GCOMM_API_CALL({
    require(sync == 0 || sync == 1, "sync must be 0 or 1, not ", sync);
    reducer_of(reducer).begin_step(sync == 1);
  });
}

GCOMM_API gcommStatus_t gcommReducerMarkReady(gcommReducer_t reducer, size_t index, gcommStream_t stream) {
  return GCOMM_API_CALL({ reducer_of(reducer).mark_ready(index, stream); });
}

GCOMM_API gcommStatus_t gcommReducerFinalize(gcommReducer_t reducer, gcommStream_t stream, int* skip_step) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    r.finalize(stream);
    if (skip_step != nullptr) *skip_step = r.read_found_inf(stream) ? 1 : 0;
  });
}

GCOMM_API gcommStatus_t gcommReducerFoundInf(gcommReducer_t reducer, const float** device_flag) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(device_flag);
    *device_flag = reducer_of(reducer).found_inf_flag();
  });
}

GCOMM_API gcommStatus_t gcommReducerGradNorm(gcommReducer_t reducer, gcommStream_t stream,
                                             const float** device_norm) {
  return GCOMM_API_CALL({
    const float* norm = reducer_of(reducer).clip_grad_norm(0.0f, stream);
    if (device_norm != nullptr) *device_norm = norm;
  });
}

GCOMM_API gcommStatus_t gcommReducerClipGradNorm(gcommReducer_t reducer, float max_norm, gcommStream_t stream,
                                                 const float** device_norm) {
  return GCOMM_API_CALL({
    require(max_norm > 0.0f, "max_norm must be a positive finite number, not ", max_norm,
            " (gcommReducerGradNorm takes the norm without clipping)");
    const float* norm = reducer_of(reducer).clip_grad_norm(max_norm, stream);
    if (device_norm != nullptr) *device_norm = norm;
  });
}

GCOMM_API gcommStatus_t gcommReducerGradData(gcommReducer_t reducer, size_t index, void** data) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(data);
    *data = reducer_of(reducer).grad_data(index);
  });
}

GCOMM_API gcommStatus_t gcommReducerSetGradData(gcommReducer_t reducer, size_t index, void* data) {
  return GCOMM_API_CALL({ reducer_of(reducer).set_grad_data(index, data); });
}

GCOMM_API gcommStatus_t gcommReducerSetAllGradData(gcommReducer_t reducer, void* const* data,
                                                   size_t num_grads) {
  return GCOMM_API_CALL({ reducer_of(reducer).set_all_grad_data(data, num_grads); });
}

GCOMM_API gcommStatus_t gcommReducerMarkReadyAt(gcommReducer_t reducer, size_t index, const void* data,
                                                gcommStream_t stream) {
  return GCOMM_API_CALL({ reducer_of(reducer).mark_ready(index, stream, data); });
}

GCOMM_API gcommStatus_t gcommReducerGetStats(gcommReducer_t reducer, gcommReducerStats_t* stats) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(stats);
    *stats = reducer_of(reducer).stats();
  });
}

GCOMM_API gcommStatus_t gcommReducerDescribe(gcommReducer_t reducer, char* buffer, size_t size,
                                             size_t* required) {
  return GCOMM_API_CALL({ copy_out_string(reducer_of(reducer).describe(), buffer, size, required); });
}

GCOMM_API gcommStatus_t gcommReducerSetTiming(gcommReducer_t reducer, int enable) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    require(enable == 0 || enable == 1, "enable must be 0 or 1, not ", enable);
    r.set_timing(enable == 1);
  });
}

GCOMM_API gcommStatus_t gcommReducerGetStepTiming(gcommReducer_t reducer, gcommReducerStepTiming_t* timing) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    check_versioned_out(timing, "gcommReducerStepTiming_t", "GCOMM_REDUCER_STEP_TIMING_INITIALIZER");
    gcommReducerStepTiming_t out = GCOMM_REDUCER_STEP_TIMING_INITIALIZER;
    const StepTiming t = r.step_timing(&out.measured_steps, &out.stride);
    out.step = t.step;
    out.step_us = t.step_us;
    out.backward_us = t.backward_us;
    out.comm_us = t.comm_us;
    out.overlapped_comm_us = t.overlapped_comm_us;
    out.overlap = t.overlap();
    write_versioned_out(out, timing, "gcommReducerStepTiming_t", "GCOMM_REDUCER_STEP_TIMING_INITIALIZER");
  });
}

GCOMM_API gcommStatus_t gcommReducerGetBucketAutotune(gcommReducer_t reducer,
                                                      gcommBucketAutotuneReport_t* report) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    check_versioned_out(report, "gcommBucketAutotuneReport_t", "GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER");
    write_versioned_out(r.bucket_autotune(), report, "gcommBucketAutotuneReport_t",
                        "GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER");
  });
}

GCOMM_API gcommStatus_t gcommReducerNoteStepMark(gcommReducer_t reducer, gcommStepMark_t mark) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    require(mark == gcommStepMarkOptimizerDone || mark == gcommStepMarkForwardStart, "mark ",
            static_cast<int>(mark),
            " is not a gcommStepMark_t (gcommStepMarkOptimizerDone, gcommStepMarkForwardStart)");
    r.note_step_mark(static_cast<StepMark>(mark));
  });
}

GCOMM_API gcommStatus_t gcommReducerGetStragglerReport(gcommReducer_t reducer,
                                                       gcommStragglerReport_t* report) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    check_versioned_out(report, "gcommStragglerReport_t", "GCOMM_STRAGGLER_REPORT_INITIALIZER");
    gcommStragglerReport_t out = GCOMM_STRAGGLER_REPORT_INITIALIZER;
    const StragglerReport s = r.straggler_report();
    out.windows = s.windows;
    out.named_windows = s.named_windows;
    out.first_step = s.first_step;
    out.last_step = s.last_step;
    out.late_rank = s.window.rank;
    out.late_steps = s.window.late_steps;
    out.window_steps = s.window.steps;
    out.phase = static_cast<gcommLatePhase_t>(s.window.phase);
    out.late_ms = s.window.late_us / 1e3;
    out.last_step_late_rank = s.last_step_verdict.rank;
    out.last_step_phase = static_cast<gcommLatePhase_t>(s.last_step_verdict.phase);
    out.last_step_late_ms = s.last_step_verdict.late_us / 1e3;
    out.clock_offset_us = s.clock_offset_us;
    write_versioned_out(out, report, "gcommStragglerReport_t", "GCOMM_STRAGGLER_REPORT_INITIALIZER");
  });
}

GCOMM_API gcommStatus_t gcommReducerGetNonFiniteReport(gcommReducer_t reducer,
                                                       gcommNonFiniteReport_t* report) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    check_versioned_out(report, "gcommNonFiniteReport_t", "GCOMM_NONFINITE_REPORT_INITIALIZER");
    gcommNonFiniteReport_t out = GCOMM_NONFINITE_REPORT_INITIALIZER;
    const StragglerReport s = r.straggler_report();
    out.windows = s.windows;
    out.first_step = s.first_step;
    out.last_step = s.last_step;
    out.nonfinite_steps = s.nonfinite.steps;
    out.source_rank = s.nonfinite.rank;
    out.source_grad = s.nonfinite.grad;
    out.source_steps = s.nonfinite.source_steps;
    out.alone_steps = s.nonfinite.alone_steps;
    write_versioned_out(out, report, "gcommNonFiniteReport_t", "GCOMM_NONFINITE_REPORT_INITIALIZER");
  });
}

GCOMM_API gcommStatus_t gcommReducerStartTrace(gcommReducer_t reducer, const char* path, uint64_t steps) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    GCOMM_REQUIRE_NOT_NULL(path);
    r.start_trace(path, steps);
  });
}

GCOMM_API gcommStatus_t gcommReducerStopTrace(gcommReducer_t reducer) {
  return GCOMM_API_CALL({ reducer_of(reducer).stop_trace(); });
}

GCOMM_API gcommStatus_t gcommReducerEnableCompression(gcommReducer_t reducer, gcommCompression_t kind,
                                                      const void* config, const size_t* grad_rows) {
  return GCOMM_API_CALL({ reducer_of(reducer).enable_compression(kind, config, grad_rows); });
}

GCOMM_API gcommStatus_t gcommReducerEnableCompressionText(gcommReducer_t reducer, const char* spec,
                                                          const size_t* grad_rows) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    GCOMM_REQUIRE_NOT_NULL(spec);
    r.enable_compression(std::string(spec), grad_rows);
  });
}

GCOMM_API gcommStatus_t gcommReducerGetCompression(gcommReducer_t reducer, gcommCompression_t* kind) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    GCOMM_REQUIRE_NOT_NULL(kind);
    *kind = r.compression();
  });
}

GCOMM_API gcommStatus_t gcommReducerGetCompressionStats(gcommReducer_t reducer, gcommCompression_t kind,
                                                        void* stats) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    const CompressionEntry& entry = compression_entry(kind);
    auto* out = static_cast<StatsHeader*>(stats);
    check_versioned_out(out, entry.stats_struct, entry.stats_initializer);
    const auto [in_use, counters] = r.compression_in_use();
    if (in_use != kind)
      fail(gcommInvalidState, "the statistics of ", compression_name(kind), ": ", compression_name(kind),
           " is not enabled on this reducer (it compresses with ", compression_name(in_use), ")");
    write_counters(counters, out);
  });
}

GCOMM_API gcommStatus_t gcommReducerDescribeCompression(gcommReducer_t reducer, char* buffer, size_t size,
                                                        size_t* required) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    const auto [kind, counters] = r.compression_in_use();
    nlohmann::json stats = nlohmann::json::object();
    for (const Counter& c : counters) stats[c.name] = c.value;
    const nlohmann::json j = {{"kind", compression_name(kind)}, {"stats", stats}};
    copy_out_string(j.dump(), buffer, size, required);
  });
}

GCOMM_API gcommStatus_t gcommReducerSaveCompressionState(gcommReducer_t reducer, void* buffer, size_t size,
                                                         size_t* required) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    require(buffer != nullptr || size == 0, "buffer is NULL but size is ", size);
    copy_state_out(r.save_compression(), buffer, size, required);
  });
}

GCOMM_API gcommStatus_t gcommReducerLoadCompressionState(gcommReducer_t reducer, const void* data,
                                                         size_t bytes) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    require(data != nullptr || bytes == 0, "data is NULL but bytes is ", bytes);
    r.load_compression(static_cast<const uint8_t*>(data), bytes);
  });
}

GCOMM_API gcommStatus_t gcommReducerSaveCompressionStatePart(gcommReducer_t reducer,
                                                             gcommCompressionStatePart_t part, void* buffer,
                                                             size_t size, size_t* required) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    require(part == gcommCompressionStateAll || part == gcommCompressionStateShared, "part ",
            static_cast<int>(part), " is neither gcommCompressionStateAll nor gcommCompressionStateShared");
    require(buffer != nullptr || size == 0, "buffer is NULL but size is ", size);
    copy_state_out(
        r.save_compression(part == gcommCompressionStateShared ? StatePart::kShared : StatePart::kAll),
        buffer, size, required);
  });
}

GCOMM_API gcommStatus_t gcommReducerCarryCompressionState(gcommReducer_t reducer, const void* data,
                                                          size_t bytes) {
  return GCOMM_API_CALL({
    Reducer& r = reducer_of(reducer);
    require(data != nullptr || bytes == 0, "data is NULL but bytes is ", bytes);
    r.load_compression(static_cast<const uint8_t*>(data), bytes, StateOrigin::kEarlierWorld);
  });
}

}  // extern "C"

extern "C" {

GCOMM_API gcommStatus_t gcommReducerGetShard(gcommReducer_t reducer, size_t bucket, gcommTensor_t* shard,
                                             gcommShardPiece_t* pieces, size_t max_pieces,
                                             size_t* num_pieces) {
  return GCOMM_API_CALL({
    require(pieces != nullptr || max_pieces == 0, "pieces is NULL but max_pieces is ", max_pieces);
    gcommTensor_t wire{};
    std::vector<ShardPiece> found = reducer_of(reducer).shard(bucket, &wire);
    if (shard != nullptr) *shard = wire;
    if (num_pieces != nullptr) *num_pieces = found.size();
    for (size_t k = 0; k < found.size() && k < max_pieces; ++k)
      pieces[k] =
          gcommShardPiece_t{found[k].grad, found[k].grad_offset, found[k].count, found[k].shard_offset};
  });
}

GCOMM_API gcommStatus_t gcommReducerSetParams(gcommReducer_t reducer, const gcommTensor_t* params,
                                              size_t num_params) {
  return GCOMM_API_CALL({ reducer_of(reducer).set_params(params, num_params); });
}

GCOMM_API gcommStatus_t gcommReducerAllGatherParams(gcommReducer_t reducer, size_t bucket,
                                                    gcommStream_t stream) {
  return GCOMM_API_CALL({ reducer_of(reducer).all_gather_params(bucket, stream); });
}

}  // extern "C"
