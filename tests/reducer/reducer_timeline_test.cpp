// Step timing and the step trace: the overlap arithmetic, the overlap of real
// steps (0 when every gradient is marked before any bucket can launch, > 0 when
// buckets launch during marking), the Chrome trace's events and their order, the
// environment switch, and the C API's refusals. Host ranks everywhere; the same
// cases on GPU 0 where one is present (timing turned on there: it is off by default).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "reducer/reducer_rig.hpp"
#include "reducer/step_timeline.hpp"

namespace gradcomm::test {
namespace {

using reducer::MeasuredSpan;
using reducer::SpanKind;
using reducer::Track;

MeasuredSpan comm_span(double begin, double end) {
  return MeasuredSpan{"all_reduce", SpanKind::kComm, Track::kReducer, 0, false, begin, end};
}

TEST(StepTimingMath, CommunicationBeforeBackwardEndsIsOverlapped) {
  std::vector<MeasuredSpan> spans = {
      comm_span(10, 20),                                                            // all before 30: 10
      comm_span(25, 45),                                                            // 5 of 20
      comm_span(50, 60),                                                            // after: 0
      MeasuredSpan{"pack", SpanKind::kCompute, Track::kReducer, 0, false, 0, 100},  // not communication
      MeasuredSpan{"ready", SpanKind::kCompute, Track::kCaller, 0, true, 5, 5}};
  reducer::StepTiming t = reducer::timing_of(7, 100, 30, spans);
  EXPECT_EQ(t.step, 7u);
  EXPECT_DOUBLE_EQ(t.comm_us, 40);
  EXPECT_DOUBLE_EQ(t.overlapped_comm_us, 15);
  EXPECT_DOUBLE_EQ(t.overlap(), 15.0 / 40.0);
  EXPECT_DOUBLE_EQ(reducer::timing_of(1, 10, 5, {}).overlap(), 0.0);  // nothing sent
  // Spans that end before they begin (clock quirks) count nothing.
  EXPECT_DOUBLE_EQ(reducer::timing_of(1, 10, 50, {comm_span(20, 10)}).comm_us, 0.0);
}

// Backward ends once: the mark that completes the gradients stamps it, and
// finalize's later call (made for steps with missing gradients) keeps that stamp.
// On the H100 the stamp taken at finalize counted the launches made at the last
// mark as backward (overlap 1 where none was possible).
TEST(StepTimingStamps, TheFirstBackwardDoneStampsTheEndOfBackward) {
  reducer::StepTimeline timeline(gcommHostDevice(), /*enabled=*/true);
  timeline.begin_step(1, nullptr);
  timeline.backward_done(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timeline.backward_done(nullptr);  // finalize
  timeline.end_step(nullptr);
  ASSERT_EQ(timeline.measured_steps(), 1u);
  EXPECT_LT(timeline.last().backward_us, 10000.0);
  EXPECT_GE(timeline.last().step_us, 20000.0);
}

TEST(StepTimingBudget, AStepWithinBudgetIsMeasuredEveryTimeAndOneOverItSpacesTheNext) {
  const reducer::TimingBudget budget;  // 0.5% or 5 us
  EXPECT_EQ(budget.stride_for(0, 1000), 1u);
  EXPECT_EQ(budget.stride_for(5, 1000), 1u);      // at the floor
  EXPECT_EQ(budget.stride_for(40, 10000), 1u);    // 0.4% of the step
  EXPECT_EQ(budget.stride_for(100, 1000), 20u);   // 100 us over a 5 us allowance
  EXPECT_EQ(budget.stride_for(501, 100000), 2u);  // just over 500 us
  EXPECT_EQ(budget.stride_for(500, 2400), 42u);   // an H100 GPT-2 medium step's timing (+16-23%)
  EXPECT_EQ(budget.stride_for(1e12, 1), reducer::TimingBudget::kMaxStride);
  EXPECT_EQ(budget.stride_for(std::nan(""), 1000), 1u);
  EXPECT_EQ(budget.stride_for(10, -5), 2u);  // a negative length counts as 0: the floor
  EXPECT_EQ((reducer::TimingBudget{0, 0}.stride_for(1e-3, 1000)), reducer::TimingBudget::kMaxStride);
}

// With no allowance at all, the first step's stamps (clock reads) are over budget:
// the next steps are not measured until the stride has passed, and turning timing
// back on measures the next step again.
TEST(StepTimingBudget, StepsInsideTheStrideAreNotMeasured) {
  reducer::StepTimeline timeline(gcommHostDevice(), /*enabled=*/true, reducer::TimingBudget{0, 0});
  auto step = [&](uint64_t n) {
    timeline.begin_step(n, nullptr);
    const bool recording = timeline.recording();
    timeline.backward_done(nullptr);
    timeline.end_step(nullptr);
    return recording;
  };
  EXPECT_TRUE(step(1));
  ASSERT_EQ(timeline.measured_steps(), 1u);
  EXPECT_EQ(timeline.stride(), reducer::TimingBudget::kMaxStride);
  for (uint64_t n = 2; n <= 5; ++n) EXPECT_FALSE(step(n)) << "step " << n;
  EXPECT_EQ(timeline.measured_steps(), 1u);
  EXPECT_EQ(timeline.last().step, 1u);
  timeline.set_enabled(false);
  timeline.set_enabled(true);
  EXPECT_TRUE(step(6));
  EXPECT_EQ(timeline.measured_steps(), 2u);
  // The default budget on the host: a few clock reads, every step measured.
  reducer::StepTimeline host(gcommHostDevice(), /*enabled=*/true);
  for (uint64_t n = 1; n <= 5; ++n) {
    host.begin_step(n, nullptr);
    host.end_step(nullptr);
  }
  EXPECT_EQ(host.measured_steps(), 5u);
  EXPECT_EQ(host.stride(), 1u);
}

class ReducerTimeline : public ReducerRig {
 protected:
  static constexpr size_t kGrads = 6;
  static constexpr size_t kCount = 1000;

  // These cases measure consecutive steps: every step, whatever its timing costs
  // (on a GPU, steps this short would otherwise be measured one in several).
  void SetUp() override {
    setenv("GRADCOMM_REDUCER_TIMING_BUDGET", "inf", 1);
    ReducerRig::SetUp();
  }
  void TearDown() override { unsetenv("GRADCOMM_REDUCER_TIMING_BUDGET"); }

  // Fixed plan (no rebuild): one 4000-byte gradient per bucket, bucket 0 holding
  // the last registered gradient.
  static gcommReducerConfig_t config() {
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    c.bucket_cap_bytes = 4000;
    c.first_bucket_bytes = 4000;
    c.rebuild_buckets = 0;
    return c;
  }

  // One synced step; `forward`: mark in registration order (bucket 0, holding the
  // last gradient, completes with the last mark), else in reverse (buckets launch
  // while marking goes on).
  static std::string step(gcommReducer_t r, std::vector<GradMem>& mem, cudaStream_t stream, bool forward,
                          std::mt19937& rng) {
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    for (size_t k = 0; k < kGrads; ++k) {
      const size_t i = forward ? k : kGrads - 1 - k;
      mem[i].upload(random_buffer(rng, gcommFloat32, kCount), stream);
      RIG_CHECK(gcommReducerMarkReady(r, i, stream));
      // Backward takes a while to make the next gradient: time for the host
      // reducer's thread to start the buckets already complete.
      if (!forward) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
    if (stream != nullptr && cudaStreamSynchronize(stream) != cudaSuccess)
      return "cudaStreamSynchronize failed";
    return "";
  }

  // Runs `body` on two ranks, each with its gradients and reducer.
  void with_reducers(
      const std::function<std::string(int, gcommReducer_t, std::vector<GradMem>&, cudaStream_t)>& body,
      gcommReducerConfig_t c = config()) {
    auto comms = make_comms(2);
    run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      std::vector<GradMem> mem;
      std::vector<gcommTensor_t> tensors;
      for (size_t i = 0; i < kGrads; ++i) {
        mem.emplace_back(gcommFloat32, kCount, gpu());
        tensors.push_back(mem.back().tensor());
      }
      gcommReducer_t r = nullptr;
      RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &c, &r));
      std::string e = body(rank, r, mem, stream);
      RIG_CHECK(gcommReducerDestroy(r));
      return e;
    });
  }
};

std::string fetch_timing(gcommReducer_t r, gcommReducerStepTiming_t* t) {
  *t = GCOMM_REDUCER_STEP_TIMING_INITIALIZER;
  RIG_CHECK(gcommReducerGetStepTiming(r, t));
  return "";
}

TEST_P(ReducerTimeline, OverlapIsZeroWhenBucketsLaunchAfterBackwardAndPositiveWhenDuring) {
  with_reducers(
      [&](int rank, gcommReducer_t r, std::vector<GradMem>& mem, cudaStream_t stream) -> std::string {
        std::mt19937 rng(11 + rank);
        if (gpu()) RIG_CHECK(gcommReducerSetTiming(r, 1));
        gcommReducerStepTiming_t t;
        std::string e = fetch_timing(r, &t);
        if (!e.empty()) return e;
        if (t.step != 0 || t.measured_steps != 0) return "a step was measured before any ran";

        e = step(r, mem, stream, /*forward=*/true, rng);
        if (!e.empty()) return e;
        if (!(e = fetch_timing(r, &t)).empty()) return e;
        std::ostringstream why;
        why << "registration order: step " << t.step << ", " << t.measured_steps << " measured, step "
            << t.step_us << " us, backward " << t.backward_us << " us, comm " << t.comm_us
            << " us, overlapped " << t.overlapped_comm_us << " us, overlap " << t.overlap;
        if (t.step != 1 || t.measured_steps != 1) return why.str() + ": step 1 was not measured";
        if (!(t.comm_us > 0) || !(t.backward_us <= t.step_us) || !(t.backward_us >= 0)) return why.str();
        // Host: exactly 0 (every collective runs after the last mark). GPU: the
        // collectives and the end of backward wait for the same copy; allow clock noise.
        if (gpu() ? t.overlap > 0.05 : t.overlap != 0.0) return why.str() + ": expected no overlap";

        // An accumulation step is not measured.
        RIG_CHECK(gcommReducerBeginStep(r, 0));
        for (size_t i = 0; i < kGrads; ++i) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
        RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));

        e = step(r, mem, stream, /*forward=*/false, rng);
        if (!e.empty()) return e;
        if (!(e = fetch_timing(r, &t)).empty()) return e;
        why.str("");
        why << "reverse order: step " << t.step << ", " << t.measured_steps << " measured, comm " << t.comm_us
            << " us, overlapped " << t.overlapped_comm_us << " us, overlap " << t.overlap;
        if (t.step != 2 || t.measured_steps != 2) return why.str() + ": step 2 was not measured";
        if (!(t.overlap >= 0 && t.overlap <= 1)) return why.str();
        // Host: buckets 0..4 communicated (on the reducer's thread) while marking went on.
        if (!gpu() && !(t.overlap > 0)) return why.str() + ": expected overlap";

        // Off: nothing more is measured.
        RIG_CHECK(gcommReducerSetTiming(r, 0));
        e = step(r, mem, stream, true, rng);
        if (!e.empty()) return e;
        if (!(e = fetch_timing(r, &t)).empty()) return e;
        if (t.measured_steps != 2 || t.step != 2)
          return "timing off still measured step " + std::to_string(t.step);
        return "";
      });
}

// The trace of each rank, parsed; "" path: the test failed to read it.
nlohmann::json read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// A rank's trace written from `pattern` ("%r": the rank), read and removed; null if unreadable.
nlohmann::json take_rank_trace(const std::string& pattern, int rank) {
  std::string file = pattern;
  file.replace(file.find("%r"), 2, std::to_string(rank));
  nlohmann::json doc = read_trace(file);
  std::remove(file.c_str());
  return doc;
}

std::string temp_pattern(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/gradcomm_" + name + "_" + std::to_string(getpid());
}

// Checks one rank's trace: steps `first`..`last`, and per step and bucket
// ready <= pack <= all_reduce <= epilogue, buckets one after the other.
std::string check_trace(const nlohmann::json& doc, int rank, uint64_t first, uint64_t last,
                        bool host_clock_only, size_t buckets) {
  if (!doc.is_object() || !doc.contains("traceEvents")) return "not a trace: " + doc.dump().substr(0, 200);
  std::map<uint64_t, std::map<int, std::map<std::string, std::pair<double, double>>>>
      at;  // step, bucket, name
  std::map<uint64_t, double> overlap;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "M") continue;
    if (e.value("pid", -1) != rank)
      return "an event of pid " + e["pid"].dump() + " in rank " + std::to_string(rank);
    const uint64_t step = e["args"]["step"].get<uint64_t>();
    if (e.value("cat", "") == "step") {
      if (e["name"] == "step " + std::to_string(step)) overlap[step] = e["args"]["overlap"].get<double>();
      continue;
    }
    const double ts = e["ts"].get<double>();
    const double dur = e.value("dur", 0.0);
    at[step][e["args"]["bucket"].get<int>()][e["name"].get<std::string>()] = {ts, ts + dur};
  }
  if (overlap.size() != last - first + 1 || overlap.begin()->first != first ||
      overlap.rbegin()->first != last)
    return "traced steps " + std::to_string(overlap.size()) + " from " +
           (overlap.empty() ? "none" : std::to_string(overlap.begin()->first)) + ", expected " +
           std::to_string(first) + ".." + std::to_string(last);
  if (at.size() != overlap.size()) return "steps without bucket events";
  for (const auto& [step, by_bucket] : at) {
    const size_t seen = static_cast<size_t>(
        std::count_if(by_bucket.begin(), by_bucket.end(), [](const auto& kv) { return kv.first >= 0; }));
    if (seen != buckets)
      return "step " + std::to_string(step) + " has events of " + std::to_string(seen) +
             " buckets, expected " + std::to_string(buckets);
    double previous_end = -1;
    for (const auto& [bucket, spans] : by_bucket) {
      if (bucket < 0) continue;  // the scaler update / found-inf flag
      const std::string where = "step " + std::to_string(step) + " bucket " + std::to_string(bucket);
      for (const char* name : {"ready", "pack", "all_reduce", "epilogue"})
        if (spans.count(name) == 0) return where + " has no '" + name + "' event";
      const auto& ready = spans.at("ready");
      const auto& pack = spans.at("pack");
      const auto& reduce = spans.at("all_reduce");
      const auto& epilogue = spans.at("epilogue");
      if (host_clock_only && ready.first > pack.first) return where + ": packed before it was ready";
      if (!(pack.first <= pack.second && pack.second <= reduce.first && reduce.first <= reduce.second &&
            reduce.second <= epilogue.first && epilogue.first <= epilogue.second))
        return where + ": pack, all_reduce, epilogue out of order";
      if (pack.first < previous_end) return where + ": began before the previous bucket's epilogue ended";
      previous_end = epilogue.second;
    }
  }
  return "";
}

TEST_P(ReducerTimeline, TraceHoldsEachBucketsEventsInOrderForTheRequestedSteps) {
  const std::string pattern = temp_pattern("trace") + "_%r.json";
  with_reducers(
      [&](int rank, gcommReducer_t r, std::vector<GradMem>& mem, cudaStream_t stream) -> std::string {
        std::mt19937 rng(5 + rank);
        std::string e = step(r, mem, stream, false, rng);  // step 1: not traced
        if (!e.empty()) return e;
        RIG_CHECK(gcommReducerStartTrace(r, pattern.c_str(), 2));  // steps 2 and 3
        for (int k = 0; k < 3 && e.empty(); ++k) e = step(r, mem, stream, k % 2 == 0, rng);
        if (!e.empty()) return e;
        RIG_CHECK(gcommReducerStopTrace(r));  // written already (host) or now (GPU): succeeds either way
        const nlohmann::json doc = take_rank_trace(pattern, rank);
        if (doc.is_null()) return "cannot read the trace of rank " + std::to_string(rank);
        return check_trace(doc, rank, 2, 3, !gpu(), kGrads);
      });
}

// GRADCOMM_REDUCER_EPILOGUE=finalize: no bucket has an epilogue of its own; one
// fused epilogue (bucket -1, all gradients are f32: one wire dtype) follows the
// last collective. (The results equal the per-bucket epilogue's: ctest
// the ctest *.epilogue_at_finalize runs the reducer tests in this mode.)
TEST_P(ReducerTimeline, EpilogueAtFinalizeIsOneFusedPassAfterTheLastCollective) {
  const std::string pattern = temp_pattern("fused") + "_%r.json";
  ASSERT_EQ(setenv("GRADCOMM_REDUCER_EPILOGUE", "finalize", 1), 0);
  with_reducers(
      [&](int rank, gcommReducer_t r, std::vector<GradMem>& mem, cudaStream_t stream) -> std::string {
        std::mt19937 rng(9 + rank);
        std::string e = step(r, mem, stream, false, rng);
        if (!e.empty()) return e;
        RIG_CHECK(gcommReducerStartTrace(r, pattern.c_str(), 1));
        if (!(e = step(r, mem, stream, false, rng)).empty()) return e;
        RIG_CHECK(gcommReducerStopTrace(r));
        const nlohmann::json doc = take_rank_trace(pattern, rank);
        if (doc.is_null()) return "cannot read the trace of rank " + std::to_string(rank);
        double last_collective_end = -1, fused_begin = -1;
        int fused = 0;
        for (const auto& ev : doc["traceEvents"]) {
          if (ev.value("ph", "") == "M" || ev.value("cat", "") == "step") continue;
          const std::string name = ev["name"].get<std::string>();
          const int bucket = ev["args"]["bucket"].get<int>();
          const double ts = ev["ts"].get<double>();
          if (name == "all_reduce")
            last_collective_end = std::max(last_collective_end, ts + ev.value("dur", 0.0));
          if (name != "epilogue") continue;
          if (bucket >= 0) return "bucket " + std::to_string(bucket) + " has an epilogue of its own";
          ++fused;
          fused_begin = ts;
        }
        if (fused != 1) return "expected one fused epilogue, found " + std::to_string(fused);
        if (last_collective_end < 0 || fused_begin < last_collective_end)
          return "the fused epilogue began before the last all-reduce ended";
        return "";
      });
  unsetenv("GRADCOMM_REDUCER_EPILOGUE");
}

// An unknown mode refuses the C API's creation, naming the variable (every value's
// parsing is tests/reducer/reducer_options_test.cpp's, without the environment).
TEST_P(ReducerTimeline, AnUnknownEpilogueModeIsRefusedAtCreation) {
  ASSERT_EQ(setenv("GRADCOMM_REDUCER_EPILOGUE", "later", 1), 0);
  auto comms = make_comms(1);
  GradMem mem(gcommFloat32, 8, gpu());
  gcommTensor_t tensor = mem.tensor();
  gcommReducerConfig_t c = config();
  gcommReducer_t r = nullptr;
  EXPECT_EQ(gcommReducerCreate(comms[0], &tensor, 1, &c, &r), gcommInvalidArgument);
  EXPECT_NE(std::string(gcommGetLastError()).find("GRADCOMM_REDUCER_EPILOGUE is 'later': use 'bucket'"),
            std::string::npos)
      << gcommGetLastError();
  EXPECT_EQ(r, nullptr);
  unsetenv("GRADCOMM_REDUCER_EPILOGUE");
  destroy(comms);
}

TEST_P(ReducerTimeline, EnvironmentTracesWithoutACodeChangeOneFilePerRank) {
  const std::string base = temp_pattern("envtrace");
  ASSERT_EQ(setenv("GRADCOMM_TRACE_FILE", (base + ".json").c_str(), 1), 0);
  ASSERT_EQ(setenv("GRADCOMM_TRACE_START", "2", 1), 0);
  ASSERT_EQ(setenv("GRADCOMM_TRACE_STEPS", "1", 1), 0);
  with_reducers(
      [&](int rank, gcommReducer_t r, std::vector<GradMem>& mem, cudaStream_t stream) -> std::string {
        std::mt19937 rng(3);
        for (int k = 0; k < 3; ++k) {
          std::string e = step(r, mem, stream, true, rng);
          if (!e.empty()) return e;
        }
        (void)rank;
        return "";
      });
  unsetenv("GRADCOMM_TRACE_FILE");
  unsetenv("GRADCOMM_TRACE_START");
  unsetenv("GRADCOMM_TRACE_STEPS");
  for (int rank = 0; rank < 2; ++rank) {
    // No %r in the name: the rank goes before the extension.
    const std::string file = base + ".rank" + std::to_string(rank) + ".json";
    const nlohmann::json doc = read_trace(file);
    std::remove(file.c_str());
    ASSERT_FALSE(doc.is_null()) << "no trace at " << file;
    EXPECT_EQ(check_trace(doc, rank, 2, 2, !gpu(), kGrads), "");
  }
}

TEST_P(ReducerTimeline, BadRequestsAreRefusedAndChangeNothing) {
  with_reducers([&](int rank, gcommReducer_t r, std::vector<GradMem>& mem,
                    cudaStream_t stream) -> std::string {
    auto expect = [&](gcommStatus_t got, gcommStatus_t want, const char* what,
                      const char* needle) -> std::string {
      if (got != want)
        return std::string(what) + " returned " + gcommGetStatusString(got) + ", expected " +
               gcommGetStatusString(want);
      if (needle != nullptr && std::string(gcommGetLastError()).find(needle) == std::string::npos)
        return std::string(what) + ": message '" + gcommGetLastError() + "' does not mention '" + needle +
               "'";
      return "";
    };
    std::string e;
    const std::string missing_dir = "/nonexistent-gradcomm-dir/trace.json";
    if (!(e = expect(gcommReducerStartTrace(r, nullptr, 5), gcommInvalidArgument, "NULL path", "path"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerStartTrace(r, missing_dir.c_str(), 5), gcommInvalidArgument,
                     "unwritable path", "nonexistent-gradcomm-dir"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerStartTrace(r, "/tmp/x.json", 0), gcommInvalidArgument, "0 steps", "steps"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerSetTiming(r, 2), gcommInvalidArgument, "enable 2", "0 or 1")).empty())
      return e;
    if (!(e = expect(gcommReducerGetStepTiming(r, nullptr), gcommInvalidArgument, "NULL timing", nullptr))
             .empty())
      return e;
    gcommReducerStepTiming_t raw{};  // not from the initializer
    if (!(e = expect(gcommReducerGetStepTiming(r, &raw), gcommInvalidArgument, "no initializer",
                     "INITIALIZER"))
             .empty())
      return e;
    if (raw.step != 0 || raw.size != 0) return "a refused call wrote into the struct";
    RIG_CHECK(gcommReducerStopTrace(r));  // nothing running: nothing to do
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    if (!(e = expect(gcommReducerSetTiming(r, 1), gcommInvalidState, "timing mid-step", "between steps"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerStartTrace(r, "/tmp/x.json", 1), gcommInvalidState, "trace mid-step",
                     "between steps"))
             .empty())
      return e;
    for (size_t i = 0; i < kGrads; ++i) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
    RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
    (void)rank;
    (void)mem;
    return "";
  });
}

// PowerSGD's phases appear in the trace as their own spans.
TEST_P(ReducerTimeline, PowerSgdPhasesAreTraced) {
  const std::string pattern = temp_pattern("psgd") + "_%r.json";
  gcommReducerConfig_t c = config();
  with_reducers(
      [&](int rank, gcommReducer_t r, std::vector<GradMem>& mem, cudaStream_t stream) -> std::string {
        std::vector<size_t> rows(kGrads, 25);  // 25 x 40
        gcommPowerSgdConfig_t p = GCOMM_POWERSGD_CONFIG_INITIALIZER;
        p.rank = 2;
        p.start_iter = 0;
        p.min_compression_rate = 1.0f;
        RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, &p, rows.data()));
        RIG_CHECK(gcommReducerStartTrace(r, pattern.c_str(), 1));
        std::mt19937 rng(9);
        std::string e = step(r, mem, stream, false, rng);
        if (!e.empty()) return e;
        RIG_CHECK(gcommReducerStopTrace(r));
        const nlohmann::json doc = take_rank_trace(pattern, rank);
        if (doc.is_null()) return "cannot read the trace of rank " + std::to_string(rank);
        std::map<std::string, int> names;
        for (const auto& ev : doc["traceEvents"]) names[ev.value("name", "")]++;
        for (const char* want : {"PowerSGD P = MQ", "all_reduce P", "PowerSGD orthogonalize, Q = MtP",
                                 "all_reduce Q", "PowerSGD decompress"})
          if (names[want] == 0) return std::string("no '") + want + "' span in the PowerSGD trace";
        return "";
      },
      c);
}

INSTANTIATE_TEST_SUITE_P(, ReducerTimeline, ::testing::Values(RigDevice::kHost, RigDevice::kGpu), rig_name);

}  // namespace
}  // namespace gradcomm::test
